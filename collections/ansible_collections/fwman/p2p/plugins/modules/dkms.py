#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.dkms: keep NVIDIA's DKMS modules from replacing the patched ones (or allow them again)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: dkms
short_description: Block or unblock NVIDIA's DKMS modules, which rebuild the stock driver over the patched one
version_added: "0.1.0"
description:
  - C(state=blocked) runs C(fwman dkms block) (C(dkms remove) of every registered nvidia* module, and an apt pin
    of the *nvidia*dkms* packages to -1) unless fwman's block is in place and no NVIDIA module is registered
    with DKMS. C(state=unblocked) runs C(fwman dkms unblock), which undoes exactly what block did.
  - The state is read from C(fwman dkms status --json).
options:
  state:
    description: Whether DKMS may build NVIDIA's modules.
    type: str
    choices: [blocked, unblocked]
    default: blocked
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Returns what C(fwman dkms block --dry-run) would do.
  diff_mode:
    support: full
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: Keep DKMS away from the patched modules
  fwman.p2p.dkms:
    state: blocked
"""

RETURN = r"""
would:
  description: What would be done (check mode).
  returned: check mode, when something would change
  type: list
  elements: str
status:
  description: The C(fwman.dkms-status/1) document after the task.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman, short_error


def view(doc):
    """Return the part of a dkms-status document a diff shows."""
    registered = [f"{m.get('module')}/{m.get('version')} {m.get('kernel') or ''}".strip() for m in doc.get("modules") or []]
    return {"blocked": bool(doc.get("blocked")), "apt_pin": doc.get("apt_pin"), "registered": registered}


def main():
    spec = dict(COMMON_ARGS)
    spec["state"] = {"type": "str", "choices": ["blocked", "unblocked"], "default": "blocked"}
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    want = module.params["state"]
    before, _ = fwman.json("dkms-status", "dkms", "status")
    if want == "blocked":
        needed = not before.get("blocked") or bool(before.get("modules"))
        argv = ["dkms", "block"]
    else:
        needed = bool(before.get("blocked"))
        argv = ["dkms", "unblock"]
    result = {"changed": needed, "status": before}
    if not needed:
        module.exit_json(**result)
    if module.check_mode:
        if want == "blocked":
            rc, out, err = fwman.run("dkms", "block", "--dry-run")
            if rc != 0:
                module.fail_json(msg=f"fwman dkms block --dry-run failed: {short_error(err, str(rc))}")
            result["would"] = [ln.strip() for ln in out.splitlines() if ln.strip()]
        else:
            result["would"] = ["remove fwman's apt pin and register the removed modules with DKMS again"]
        # the diff of a check-mode run: what is there now, and the lines fwman says it would write
        now = view(before)
        result["diff"] = {
            "before": "".join(f"{k}: {v}\n" for k, v in now.items()),
            "after": "".join(f"would {line.removeprefix('would ')}\n" for line in result["would"]),
        }
        module.exit_json(**result)
    rc, out, err = fwman.run(*argv)
    if rc != 0:
        module.fail_json(msg=f"fwman {' '.join(argv)} failed: {short_error(err, str(rc))}", rc=rc, stderr=err)
    after, _ = fwman.json("dkms-status", "dkms", "status")
    result["status"] = after
    result["diff"] = {"before": view(before), "after": view(after)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
