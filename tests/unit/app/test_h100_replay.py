"""The real H100 host (fixtures/hosts/h100-1gpu, recorded by live/device-capture.sh): replaying its capture prints
what fwman printed live on that machine, the journey's `plan` and `apply --check` included (one GPU: fwman's part
is not needed, and the box is at its target)."""

from __future__ import annotations

import json

import pytest

from tests.support.env import HOSTS, FwmanEnv, without_host

H100 = HOSTS / "h100-1gpu"
LIVE = H100 / "live"
COMMANDS = [["scan"], ["audit", "--offline"], ["doctor"], ["plan"], ["apply", "--check"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_text_replay_equals_live(argv: list[str]) -> None:
    r = FwmanEnv(variables={"COLUMNS": "100"})("--snapshot", str(H100), *argv)  # the width it was recorded at
    assert r.code == 0, r.stderr
    assert r.stdout.replace(f"snapshot {H100}", "live host") == (LIVE / f"{'_'.join(argv)}.txt").read_text()


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_json_replay_equals_live(argv: list[str]) -> None:
    r = FwmanEnv()("--snapshot", str(H100), *argv, "--json")
    assert r.code == 0, r.stderr
    live = json.loads((LIVE / f"{'_'.join([*argv, '--json'])}.txt").read_text())
    assert without_host(r.json()) == without_host(live)


def test_what_the_real_host_said_of_the_journey() -> None:
    plan = json.loads((LIVE / "plan_--json.txt").read_text())
    assert plan["parts"] == [] and plan["not_needed"].startswith("one GPU")
    assert json.loads((LIVE / "apply_--check_--json.txt").read_text())["at_target"] is True
