"""The fleet's journey with the real ansible-core: playbooks/apply.yml takes fwman's part of `fwman plan` on one
host at a time and stops at the first host whose `fwman apply --check` fails, before the next host is touched.

Each host is a copy of the bundled 4x3090 host's tree (``fwman --root``, through the play's ``fwman_root``), so
its check fails (its IOMMU is the owner's step); no reboot (``fwman_reboot: false``).
"""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.hostgen.materialize import materialize
from tests.support.ansible import COLLECTION, local_host, require_ansible, run_playbook
from tests.support.env import EXAMPLE_HOST

PIN = "etc/apt/preferences.d/fwman-nvidia-dkms"


def _hosts(tmp_path: Path, names: list[str]) -> dict[str, dict[str, object]]:
    return {
        name: local_host(fwman_root=str(materialize(EXAMPLE_HOST, tmp_path / name)), fwman_reboot=False)
        for name in names
    }


def test_the_play_applies_one_host_and_stops_at_its_failed_check(tmp_path: Path) -> None:
    require_ansible()
    hosts = _hosts(tmp_path, ["first", "second"])
    play = (COLLECTION / "playbooks/apply.yml").read_text()
    run = run_playbook(tmp_path, hosts, play)
    assert run.rc == 2, run.output
    assert (tmp_path / "first" / PIN).is_file(), "the first host's part was not applied"
    assert not (tmp_path / "second" / PIN).exists(), "the play went on to the second host after a failed check"
    assert "not at the P2P target: " in run.output and "iommu.mode" in run.output, run.output


def test_check_mode_lists_each_host_s_parts_and_changes_nothing(tmp_path: Path) -> None:
    require_ansible()
    hosts = _hosts(tmp_path, ["only"])
    out = tmp_path / "result.json"
    play = f"""
- hosts: gpu
  gather_facts: false
  tasks:
    - fwman.p2p.target:
        fwman_bin: "{{{{ fwman_bin }}}}"
        root: "{{{{ fwman_root }}}}"
      register: target
    - ansible.builtin.copy:
        content: "{{{{ target | to_json }}}}"
        dest: {out}
        mode: "0644"
      check_mode: false
"""
    run = run_playbook(tmp_path, hosts, play, "--check")
    assert run.rc == 0, run.output
    result = json.loads(out.read_text())
    assert result["changed"] is True and [p["part"] for p in result["parts"]] == ["hooks", "dkms"]
    assert "iommu.mode" in {s["id"] for s in result["owner_steps"]}
    assert not (tmp_path / "only" / PIN).exists()
    # applied for real, then a second run: changed=0
    play_real = play.replace("target | to_json", "target | to_json")
    assert run_playbook(tmp_path, hosts, play_real).rc == 0
    assert (tmp_path / "only" / PIN).is_file()
    assert run_playbook(tmp_path, hosts, play_real).rc == 0
    assert json.loads(out.read_text())["changed"] is False
