"""The fwman.p2p collection with the real ansible-core: build, documentation, facts and the firmware module.

These need neither root nor a build: they work on the bundled recorded host (fixtures/hosts/rig-4x3090), where
two EVGA 3090s (0000:41:00.0, 0000:61:00.0) run launch firmware 94.02.26.48.15 and the catalog's Resizable-BAR
image 94.02.42.80.27 has no vendor MD5 yet (so fwman's own gate blocks the flash).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

from tests.support.ansible import (
    BIN,
    COLLECTION,
    FWMAN,
    ansible_env,
    local_host,
    require_ansible,
    run_playbook,
)
from tests.support.env import EXAMPLE_HOST
from tests.support.tools import missing

MODULES = ("host_info", "patched_modules", "module_bundle", "hooks", "dkms", "firmware", "target")
PLAN = {"0000:41:00.0": "94.02.26.48.15 -> 94.02.42.80.27", "0000:61:00.0": "94.02.26.48.15 -> 94.02.42.80.27"}


def test_the_collection_builds_and_every_module_has_documentation(tmp_path: Path) -> None:
    require_ansible()
    env = ansible_env(tmp_path)
    built = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(COLLECTION), "--output-path", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    with tarfile.open(tmp_path / "fwman-p2p-0.1.0.tar.gz") as tar:
        names = set(tar.getnames())
    assert {f"plugins/modules/{m}.py" for m in MODULES} <= names
    assert "roles/p2p_host/tasks/main.yml" in names and "MANIFEST.json" in names
    docs = subprocess.run(
        [str(BIN / "ansible-doc"), "-j", *(f"fwman.p2p.{m}" for m in MODULES)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert docs.returncode == 0, docs.stderr
    rendered = json.loads(docs.stdout)
    for m in MODULES:
        doc = rendered[f"fwman.p2p.{m}"]
        assert doc["doc"]["options"]["root"]["type"] == "path"  # the common fragment is applied
        assert doc["examples"] and doc["return"]
        assert doc["doc"]["attributes"]["check_mode"]["support"] == "full"


def test_host_info_reads_the_json_documents_of_a_recorded_host(tmp_path: Path) -> None:
    require_ansible()
    out = tmp_path / "facts.json"
    play = f"""
- hosts: gpu
  gather_facts: false
  tasks:
    - fwman.p2p.host_info:
        fwman_bin: "{{{{ fwman_bin }}}}"
        snapshot: {EXAMPLE_HOST}
        gather: [scan, doctor, modules]
      register: info
    - ansible.builtin.copy:
        content: "{{{{ info | to_json }}}}"
        dest: {out}
        mode: "0644"
      check_mode: false
"""
    run = run_playbook(tmp_path, {"rig": local_host()}, play, "--check")
    assert run.rc == 0, run.output
    info = json.loads(out.read_text())
    assert info["changed"] is False and info["errors"] == {}
    assert info["fwman"]["scan"]["schema"] == "fwman.scan/2"
    summary = info["summary"]
    assert summary["gpus"] == 4 and summary["vbios"]["0000:41:00.0"] == "94.02.26.48.15"
    assert summary["p2p_ready"] is False and summary["p2p_blockers"][0].startswith("firmware.rebar: ")
    assert summary["next_boot"] == "6.8.12-4-pve" and summary["next_boot_safe"] is False
    assert summary["p2p_verification"] == [
        {
            "id": "p2p.verified",
            "state": "info",
            "message": "P2P never verified on this machine (no `fwman p2p` record)",
            "time": None,
        }
    ]


def _firmware_cases(tmp_path: Path, fwman_bin: str, cases: dict[str, str], *args: str) -> dict[str, dict]:
    """Run one firmware task per case (YAML of its options) and return each registered result."""
    out = tmp_path / "firmware.json"
    tasks = ""
    for name, options in cases.items():
        tasks += f"""
    - name: {name}
      fwman.p2p.firmware:
        fwman_bin: {fwman_bin}
        snapshot: {EXAMPLE_HOST}
{options}
      register: r_{name}
      ignore_errors: true
"""
    names = ", ".join(f"'{n}': r_{n}" for n in cases)
    play = f"""
- hosts: gpu
  gather_facts: false
  tasks:{tasks}
    - ansible.builtin.copy:
        content: "{{{{ {{{names}}} | to_json }}}}"
        dest: {out}
        mode: "0644"
      check_mode: false
"""
    run = run_playbook(tmp_path, {"rig": local_host()}, play, *args)
    assert run.rc in (0, 2), run.output
    return dict(json.loads(out.read_text()))


def test_firmware_check_mode_returns_the_plan_and_a_real_run_refuses_anything_but_it(tmp_path: Path) -> None:
    require_ansible()
    plan_yaml = "        expected_plan:\n" + "".join(f'          "{b}": "{c}"\n' for b, c in PLAN.items())
    checked = _firmware_cases(tmp_path, FWMAN, {"plan": ""}, "--check")["plan"]
    assert checked["changed"] is True and not checked.get("failed")
    assert checked["plan"] == {
        "0000:41:00.0": {"from": "94.02.26.48.15", "to": "94.02.42.80.27"},
        "0000:61:00.0": {"from": "94.02.26.48.15", "to": "94.02.42.80.27"},
    }
    assert checked["ready"] is False and "no known hash" in checked["blockers"][0]

    results = _firmware_cases(
        tmp_path,
        FWMAN,
        {
            "no_plan": "        confirm: true",
            "one_card": '        confirm: true\n        expected_plan: {"41:00.0": "94.02.26.48.15 -> 94.02.42.80.27"}',
            "wrong_version": "        confirm: true\n        expected_plan:"
            ' {"41:00.0": "94.02.26.48.15 -> 94.02.42.99.00", "61:00.0": "94.02.26.48.15 -> 94.02.42.80.27"}',
            "no_confirm": plan_yaml,
            "gated": "        confirm: true\n" + plan_yaml,
        },
    )
    assert "no expected_plan was given" in results["no_plan"]["msg"]
    assert "0000:61:00.0: the host's plan also flashes it" in results["one_card"]["msg"]
    assert "0000:41:00.0: the host's plan is 94.02.26.48.15 -> 94.02.42.80.27, not" in results["wrong_version"]["msg"]
    assert "refusing to flash without confirm: true" in results["no_confirm"]["msg"]
    assert results["gated"]["msg"].startswith("fwman's gates block the plan: 94.02.42.80.27 has no known hash")
    assert all(r["failed"] and not r.get("flashed") for r in results.values())


FAKE_FWMAN = """#!{python}
# fwman with the plan's hash gate cleared: the plan comes from the real fwman; --apply is only logged
import json, subprocess, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if "--apply" in args:
    cards = [args[i + 1] for i, a in enumerate(args) if a == "--card"]
    flashed = [{{"bus_id": c, "before_version": "94.02.26.48.15", "after_version": "94.02.42.80.27"}} for c in cards]
    print(json.dumps({{"schema": "fwman.upgrade-apply/2", "operation": "upgrade", "backup_run": "run-1",
                      "flashed": flashed, "next_steps": ["reboot (cold)"]}}))
else:
    doc = json.loads(subprocess.run([{fwman!r}, *args], capture_output=True, text=True).stdout)
    doc["ready"], doc["findings"] = True, []
    print(json.dumps(doc))
"""


def test_firmware_flashes_exactly_the_cards_of_the_expected_plan(tmp_path: Path) -> None:
    import sys

    require_ansible()
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "fwman"
    fake.write_text(FAKE_FWMAN.format(python=sys.executable, log=str(log), fwman=FWMAN))
    fake.chmod(0o755)
    plan_yaml = "        confirm: true\n        expected_plan:\n" + "".join(
        f'          "{b[5:]}": "{c}"\n' for b, c in PLAN.items()
    )
    result = _firmware_cases(tmp_path, str(fake), {"flash": plan_yaml})["flash"]
    assert not result.get("failed"), result
    assert result["changed"] is True and result["reboot_required"] is True
    applies = [json.loads(line) for line in log.read_text().splitlines() if "--apply" in line]
    assert len(applies) == 1
    cards = [applies[0][i + 1] for i, a in enumerate(applies[0]) if a == "--card"]
    assert cards == ["0000:41:00.0", "0000:61:00.0"]  # exactly the plan: never 01:00.0 or 21:00.0
    assert [r["bus_id"] for r in result["flashed"]] == cards


OLD_FWMAN = """#!{python}
# an fwman of before docs/json.md's renames: the plan as fwman.upgrade-plan/1 printed it (cards, current_version)
import json, subprocess, sys
doc = json.loads(subprocess.run([{fwman!r}, *sys.argv[1:]], capture_output=True, text=True).stdout)
doc["schema"], doc["cards"] = "fwman.upgrade-plan/1", doc.pop("gpus")
print(json.dumps(doc))
"""


def test_firmware_refuses_a_document_version_it_does_not_read(tmp_path: Path) -> None:
    import sys

    require_ansible()
    old = tmp_path / "fwman"
    old.write_text(OLD_FWMAN.format(python=sys.executable, fwman=FWMAN))
    old.chmod(0o755)
    result = _firmware_cases(tmp_path, str(old), {"old": ""}, "--check")["old"]
    # never read as an empty plan ("nothing to flash"): the task fails and names both versions
    assert result["failed"] is True and "plan" not in result
    assert "fwman printed fwman.upgrade-plan/1, and this collection reads fwman.upgrade-plan/2" in result["msg"]


def test_the_collection_is_ansible_lint_clean(tmp_path: Path) -> None:
    require_ansible()
    if not (BIN / "ansible-lint").exists():
        missing("needs ansible-lint (pip install -e '.[dev]')")
    lint = subprocess.run(
        [str(BIN / "ansible-lint"), "--nocolor", "--offline"],
        cwd=COLLECTION,
        capture_output=True,
        text=True,
        env=ansible_env(tmp_path),
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "criteria was 'production'" in lint.stdout + lint.stderr
