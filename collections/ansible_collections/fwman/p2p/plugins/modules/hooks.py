#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.hooks: the kernel hook and the boot-time catch-up service, present or absent."""

from __future__ import annotations

DOCUMENTATION = r"""
module: hooks
short_description: Install or remove fwman's kernel hook and boot-time catch-up service
version_added: "0.1.0"
description:
  - C(state=present) runs C(fwman hooks install) when C(fwman hooks status --json) says a file is missing or
    out of date, or the service is not enabled; C(state=absent) runs C(fwman hooks remove) when any file is
    there. Nothing runs when the host is already in the wanted state (C(changed=false)).
  - The hook builds the patched modules for every kernel apt installs; the service catches up at boot.
options:
  state:
    description: Whether the hook and service should be installed and current, or gone.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Reports what C(fwman hooks install --dry-run) would write; changes nothing.
  diff_mode:
    support: full
    details: Each file's state (missing, differs, ok) before and after.
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: Kernel hook and catch-up service
  fwman.p2p.hooks:
    state: present

- name: Take them away again
  fwman.p2p.hooks:
    state: absent
"""

RETURN = r"""
would:
  description: What C(fwman hooks install --dry-run) says it would do (check mode, state=present).
  returned: check mode
  type: list
  elements: str
status:
  description: The C(fwman.hooks-status/1) document after the task.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman, short_error


def files_state(doc):
    """Return {path: ok|differs|missing} from a hooks-status document, plus the service's enablement."""
    state = {f["path"]: ("ok" if f.get("current") else ("differs" if f.get("present") else "missing"))
             for f in doc.get("files") or []}
    state["service enabled"] = "yes" if doc.get("enabled") else "no"
    return state


def main():
    spec = dict(COMMON_ARGS)
    spec["state"] = {"type": "str", "choices": ["present", "absent"], "default": "present"}
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    want = module.params["state"]
    before, _ = fwman.json("hooks-status", "hooks", "status")
    if want == "present":
        needed = not (before.get("installed") and before.get("enabled"))
    else:
        needed = any(f.get("present") for f in before.get("files") or [])
    result = {"changed": needed, "status": before}
    if not needed:
        module.exit_json(**result)
    if module.check_mode:
        if want == "present":
            rc, out, err = fwman.run("hooks", "install", "--dry-run")
            if rc != 0:
                module.fail_json(msg=f"fwman hooks install --dry-run failed: {short_error(err, str(rc))}")
            result["would"] = [ln.strip() for ln in out.splitlines() if ln.strip()]
        else:
            result["would"] = ["remove the kernel hook and the catch-up service"]
        # the diff of a check-mode run: what is there now, and the lines fwman says it would write
        now = files_state(before)
        result["diff"] = {
            "before": "".join(f"{k}: {v}\n" for k, v in now.items()),
            "after": "".join(f"would {line.removeprefix('would ')}\n" for line in result["would"]),
        }
        module.exit_json(**result)
    rc, out, err = fwman.run("hooks", "install" if want == "present" else "remove")
    if rc != 0:
        module.fail_json(msg=f"fwman hooks {'install' if want == 'present' else 'remove'} failed: "
                         f"{short_error(err, str(rc))}", rc=rc, stderr=err)
    after, _ = fwman.json("hooks-status", "hooks", "status")
    result["status"] = after
    result["diff"] = {"before": files_state(before), "after": files_state(after)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
