#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.host_info: what fwman knows about a GPU host (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_info
short_description: Read fwman's view of a multi-GPU NVIDIA host (GPUs, driver, P2P blockers, patched modules)
version_added: "0.1.0"
description:
  - Runs C(fwman scan), C(fwman audit), C(fwman doctor), C(fwman modules status), C(fwman hooks status) and
    C(fwman dkms status) with C(--json) on the managed host and returns their documents, unchanged, plus a
    short summary.
  - Read-only; supports check mode. A command that cannot answer (no GPU in a test root, no dkms) does not fail
    the task; its message is returned in RV(errors).
options:
  gather:
    description: Which documents to read.
    type: list
    elements: str
    choices: [scan, audit, doctor, modules, hooks, dkms]
    default: [scan, audit, doctor, modules, hooks, dkms]
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: Read the host
  fwman.p2p.host_info:
  register: fwman_host

- name: Show what blocks peer-to-peer
  ansible.builtin.debug:
    msg: "{{ fwman_host.summary.p2p_blockers }}"

- name: Only the patched modules, on a recorded host
  fwman.p2p.host_info:
    gather: [modules]
    snapshot: /srv/fwman/snapshots/rig-4x3090
"""

RETURN = r"""
fwman:
  description: The C(--json) documents, keyed by command (each has its C(schema), e.g. C(fwman.scan/2)).
  returned: always
  type: dict
  sample: {"scan": {"schema": "fwman.scan/2", "gpus": []}, "modules": {"schema": "fwman.modules-status/1"}}
summary:
  description: The facts a play usually branches on.
  returned: always
  type: dict
  contains:
    gpus:
      description: Number of NVIDIA GPUs (null when C(scan) was not read or failed).
      type: int
    vbios:
      description: Bus id to VBIOS version.
      type: dict
    next_boot:
      description: The kernel that boots next.
      type: str
    next_boot_safe:
      description: Whether the next boot has working patched modules.
      type: bool
    kernels_safe:
      description: Kernel release to safe-to-boot.
      type: dict
    p2p_ready:
      description: Whether C(fwman doctor) finds nothing that blocks peer-to-peer (null when not read).
      type: bool
    p2p_verdict:
      description: C(fwman doctor)'s one-line verdict, when read.
      type: str
    p2p_blockers:
      description: Ids and messages of the doctor findings of severity C(block).
      type: list
      elements: str
    p2p_verification:
      description: >-
        The P2P verification record as C(fwman doctor) compares it with this configuration: one item per
        record kind (copy test, NCCL) with C(state) (ok when verified here, info when never or not since a
        change, block when the last test here failed), the message and the record's time.
      type: list
      elements: dict
errors:
  description: Command to fwman's error message, for each command that could not answer.
  returned: always
  type: dict
  sample: {"scan": "no NVIDIA GPU found on live host under /tmp/r"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman

COMMANDS = {
    "scan": ("scan", ["scan"], (0,)),
    "audit": ("audit", ["audit"], (0, 3, 4, 5)),
    "doctor": ("doctor", ["doctor"], (0, 3, 4, 5)),
    "modules": ("modules-status", ["modules", "status"], (0,)),
    "hooks": ("hooks-status", ["hooks", "status"], (0,)),
    "dkms": ("dkms-status", ["dkms", "status"], (0,)),
}


def summarize(docs):
    """Return the summary of the documents read."""
    scan, modules, doctor = docs.get("scan"), docs.get("modules"), docs.get("doctor")
    summary = {
        "gpus": None,
        "vbios": {},
        "next_boot": None,
        "next_boot_safe": None,
        "kernels_safe": {},
        "p2p_ready": None,
        "p2p_verdict": None,
        "p2p_blockers": [],
        "p2p_verification": [],
    }
    if scan:
        gpus = scan.get("gpus") or []
        summary["gpus"] = len(gpus)
        summary["vbios"] = {g.get("bus_id"): g.get("vbios_version") for g in gpus}
    if modules:
        rows = modules.get("kernels") or []
        summary["kernels_safe"] = {r.get("kernel"): bool(r.get("safe_to_boot")) for r in rows}
        nxt = (modules.get("next_boot") or {}).get("kernel")
        summary["next_boot"] = nxt
        summary["next_boot_safe"] = summary["kernels_safe"].get(nxt) if nxt else None
    if doctor:
        verdict = doctor.get("verdict") or {}
        summary["p2p_ready"] = verdict.get("ready")
        summary["p2p_verdict"] = verdict.get("line")
        for step in doctor.get("steps") or []:
            if step.get("id") == "p2p.verified":  # the P2P record, as doctor compares it with this configuration
                summary["p2p_verification"] = [
                    {
                        "id": f.get("id"),
                        "state": f.get("severity"),
                        "message": f.get("message"),
                        "time": (f.get("evidence") or {}).get("time"),
                    }
                    for f in step.get("findings") or []
                ]
            for f in step.get("findings") or []:
                if f.get("severity") == "block":
                    summary["p2p_blockers"].append(f"{f.get('id')}: {f.get('message')}")
    return summary


def main():
    spec = dict(COMMON_ARGS)
    spec["gather"] = {"type": "list", "elements": "str", "choices": list(COMMANDS), "default": list(COMMANDS)}
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    docs, errors = {}, {}
    for name in module.params["gather"]:
        kind, argv, ok = COMMANDS[name]
        doc, message = fwman.json(kind, *argv, ok=ok, fail=False)
        if doc is None:
            errors[name] = message
        else:
            docs[name] = doc
    module.exit_json(changed=False, fwman=docs, summary=summarize(docs), errors=errors)


if __name__ == "__main__":
    main()
