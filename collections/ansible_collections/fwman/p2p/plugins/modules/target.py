#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.target: the host brought to its P2P target (``fwman apply``), or verified there (``--check``)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: target
short_description: Bring a GPU host to its P2P target with fwman apply, or verify it is there
version_added: "0.2.0"
description:
  - C(state=applied) runs C(fwman plan --json) and, when a part has steps still needed, C(fwman apply --json), which runs
    the same planner the command line runs (the kernel hooks, the DKMS block, the patched modules for every
    installed kernel, the module options, the user-space hold). Nothing runs when the plan is empty
    (C(changed=false)).
  - C(state=verified) runs C(fwman apply --check --json) after the reboot and fails the task when the host is not
    at its target (a part still needed, a doctor blocker), so a play with C(serial) stops at the first host
    whose check fails (playbooks/apply.yml).
  - The owner's steps fwman cannot take (firmware, the firmware setup, the kernel command line) are returned as
    C(owner_steps), never done.
options:
  state:
    description: C(applied) to take fwman's steps, C(verified) to check the host is at its target.
    type: str
    choices: [applied, verified]
    default: applied
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Returns the plan's parts (what C(fwman apply) would do); changes nothing.
  diff_mode:
    support: none
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: fwman's part of the way to P2P
  fwman.p2p.target:
    state: applied
- name: After the reboot, stop here if the host is not at its target
  fwman.p2p.target:
    state: verified
"""

RETURN = r"""
parts:
  description: The parts of C(fwman plan) with steps still needed (before the task), each C(part), C(goal),
    C(command), C(steps).
  returned: always
  type: list
  elements: dict
applied:
  description: The steps C(fwman apply) took, one line each.
  returned: state=applied, not in check mode
  type: list
  elements: str
owner_steps:
  description: The steps fwman cannot take, each C(id), C(message), C(fix), C(severity), C(before_apply).
  returned: state=applied
  type: list
  elements: dict
check:
  description: The C(fwman.apply-check/1) document.
  returned: state=verified
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman


def main():
    spec = dict(COMMON_ARGS)
    spec["state"] = {"type": "str", "choices": ["applied", "verified"], "default": "applied"}
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    if module.params["state"] == "verified":
        doc, _ = fwman.json("apply-check", "apply", "--check", ok=(0, 4))
        result = {"changed": False, "check": doc, "parts": doc.get("parts") or []}
        if not doc.get("at_target"):
            missing = [p["part"] for p in doc.get("parts") or []]
            missing += [f["id"] for f in doc.get("findings") or [] if f.get("severity") == "block"]
            if doc.get("doctor_error"):
                missing.append(f"doctor: {doc['doctor_error']}")
            module.fail_json(msg=f"not at the P2P target: {', '.join(missing) or 'see check'}", **result)
        module.exit_json(**result)
    plan, _ = fwman.json("plan", "plan")
    result = {"changed": bool(plan.get("parts")), "parts": plan.get("parts") or [],
              "owner_steps": plan.get("owner_steps") or []}
    if not result["changed"] or module.check_mode:
        module.exit_json(**result)
    done, _ = fwman.json("plan", "apply")
    result["applied"] = done.get("applied") or []
    result["changed"] = bool(done.get("changed"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
