#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.firmware: the VBIOS upgrade plan (check mode) and, confirmed per host, exactly that upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
module: firmware
short_description: Plan the VBIOS upgrade of every card, and run exactly the plan a person confirmed
version_added: "0.1.0"
description:
  - Reads the plan from C(fwman upgrade --dry-run --json) (the catalog's recommended image per card).
  - In check mode returns the plan as RV(plan) (bus -> from/to) and changes nothing. Paste it into
    O(expected_plan) after reading it.
  - A real run requires O(confirm=true) and O(expected_plan). It refuses when the host's plan differs in any
    way from O(expected_plan) (another card, another version on either side, a card missing), and when fwman's
    own gates block the plan. It then runs C(fwman upgrade --apply --yes) with one C(--card) per bus of the
    expected plan, so it never flashes more than the plan names. fwman backs up every card first.
  - A card already on its expected target version counts as done, so a second run after the reboot changes
    nothing.
  - "Run it in a play with C(serial: 1) and C(max_fail_percentage: 0): one host is flashed at a time, and the
    play stops on the first failure."
options:
  confirm:
    description: Set to true to flash. Without it, a real run that would flash fails and changes nothing.
    type: bool
    default: false
  expected_plan:
    description:
      - Bus id (C(0000:41:00.0) or C(41:00.0)) to the expected change, as C("FROM -> TO")
        (C("94.02.26.48.15 -> 94.02.42.80.27")) or a dict with C(from) and C(to).
      - Required for a real run that would flash.
    type: dict
    default: {}
  timeout:
    description: Seconds before nvflash is given up on, per card (C(fwman upgrade --timeout)).
    type: int
    default: 300
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Returns the plan; nothing is backed up or flashed.
  diff_mode:
    support: full
    details: Per bus, the firmware version before and after.
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: What would be flashed (read it, then copy it into expected_plan)
  fwman.p2p.firmware:
  check_mode: true
  register: fw_plan

- name: Flash exactly this, one host at a time (in a play with serial 1 and max_fail_percentage 0)
  fwman.p2p.firmware:
    confirm: true
    expected_plan:
      "0000:41:00.0": "94.02.26.48.15 -> 94.02.42.80.27"
      "0000:61:00.0": "94.02.26.48.15 -> 94.02.42.80.27"
"""

RETURN = r"""
plan:
  description: Bus id to C({from, to}) for every card the host's plan would flash.
  returned: always
  type: dict
  sample: {"0000:41:00.0": {"from": "94.02.26.48.15", "to": "94.02.42.80.27"}}
ready:
  description: Whether fwman's gates let the plan run (C(upgrade --dry-run)'s C(ready)).
  returned: always
  type: bool
blockers:
  description: The messages of the plan's findings of severity C(block).
  returned: always
  type: list
  elements: str
flashed:
  description: The C(flashed) rows of C(fwman.upgrade-apply/2) (each with its C(bus_id)).
  returned: when cards were flashed
  type: list
  elements: dict
next_steps:
  description: What to do after the flash (firmware setup switches, reboot, C(fwman upgrade --check)).
  returned: when cards were flashed
  type: list
  elements: str
reboot_required:
  description: True when a card was flashed (the new firmware runs after a cold reboot).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman, normalize_bus


def parse_expected(module, raw):
    """Return {bus: (from, to)} from the expected_plan option; fail the task on a malformed entry."""
    out = {}
    for bus, change in (raw or {}).items():
        if isinstance(change, dict):
            frm, to = change.get("from"), change.get("to")
        else:
            frm, sep, to = str(change).partition("->")
            if not sep:
                module.fail_json(msg=f"expected_plan[{bus}]: write it as 'FROM -> TO', got {change!r}")
        if not frm or not to:
            module.fail_json(msg=f"expected_plan[{bus}]: needs both the current and the target version")
        out[normalize_bus(bus)] = (str(frm).strip(), str(to).strip())
    return out


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        confirm={"type": "bool", "default": False},
        expected_plan={"type": "dict", "default": {}},
        timeout={"type": "int", "default": 300},
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    doc, _ = fwman.json("upgrade-plan", "upgrade", "--dry-run")
    cards = {normalize_bus(c["bus_id"]): c for c in doc.get("gpus") or []}
    plan = {
        bus: {"from": c.get("vbios_version"), "to": c.get("target_version")}
        for bus, c in cards.items()
        if c.get("action") == "flash" and c.get("selected", True)
    }
    blockers = [f.get("message") for f in doc.get("findings") or [] if f.get("severity") == "block"]
    result = {"plan": plan, "ready": bool(doc.get("ready")), "blockers": blockers, "reboot_required": False}
    expected = parse_expected(module, module.params["expected_plan"])

    # what of the expected plan is still to do, and what is done already (a second run after the reboot)
    to_flash, done, problems = [], [], []
    for bus, (frm, to) in expected.items():
        card = cards.get(bus)
        if card is None:
            problems.append(f"{bus}: no such card on this host")
        elif bus in plan and (plan[bus]["from"], plan[bus]["to"]) == (frm, to):
            to_flash.append(bus)
        elif card.get("vbios_version") == to and bus not in plan:
            done.append(bus)
        elif bus in plan:
            problems.append(f"{bus}: the host's plan is {plan[bus]['from']} -> {plan[bus]['to']}, not {frm} -> {to}")
        else:
            problems.append(f"{bus}: runs {card.get('vbios_version')} and the host's plan flashes nothing there "
                            f"({card.get('reason') or card.get('action')}), not {frm} -> {to}")
    extra = sorted(set(plan) - set(expected))
    for bus in extra:
        problems.append(f"{bus}: the host's plan also flashes it ({plan[bus]['from']} -> {plan[bus]['to']}), "
                        "and the expected plan does not name it")
    result["plan_matches"] = not problems
    result["changed"] = bool(plan) if not expected else bool(to_flash)
    if to_flash:
        result["diff"] = {
            "before": {b: plan[b]["from"] for b in to_flash},
            "after": {b: plan[b]["to"] for b in to_flash},
        }
    if module.check_mode:
        module.exit_json(**result)
    if not plan and not expected:
        module.exit_json(**result)  # nothing to flash and nothing expected: in the wanted state
    if not expected:
        module.fail_json(msg="the host's plan flashes cards, but no expected_plan was given: run in check mode, "
                         "read the plan, and pass it as expected_plan", **result)
    if problems:
        module.fail_json(msg="refusing to flash: the host's plan is not the expected plan: " + "; ".join(problems),
                         **result)
    if not to_flash:
        module.exit_json(**result)  # every expected card already runs its target version
    if not module.params["confirm"]:
        module.fail_json(msg="refusing to flash without confirm: true (the plan matches; nothing was changed)",
                         **result)
    if not result["ready"]:
        module.fail_json(msg="fwman's gates block the plan: " + ("; ".join(blockers) or "not ready"), **result)
    # --yes: fwman asks on a terminal before it flashes; the play already required confirm: true
    argv = ["upgrade", "--apply", "--yes", "--timeout", str(module.params["timeout"])]
    for bus in sorted(to_flash):
        argv += ["--card", bus]
    applied, _ = fwman.json("upgrade-apply", *argv)
    flashed = applied.get("flashed") or []
    result.update(flashed=flashed, next_steps=applied.get("next_steps") or [], reboot_required=bool(flashed),
                  backup_run=applied.get("backup_run"), changed=True)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
