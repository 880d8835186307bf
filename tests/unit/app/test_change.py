"""app/change: the one flow of every changing command (dry run -> plan; else permit, then apply) and its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwman.app.change import ChangeResult, plan_or_apply
from fwman.app.text import Line
from fwman.core.errors import BlockedError
from fwman.host.actions import WriteFile
from fwman.host.live import LiveHost


def _refuse() -> None:
    raise BlockedError("needs root")


def _text(change: ChangeResult) -> list[str]:
    return [item.plain for item in change.text() if isinstance(item, Line)]


def test_a_dry_run_plans_without_asking_permission_or_writing(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    actions = [WriteFile("/etc/fwman/x.conf", b"x\n")]
    plan = plan_or_apply(host, actions, dry_run=True, permit=_refuse, nothing="current", done="written")
    assert (plan.dry_run, plan.changed, plan.actions) == (True, False, ["write /etc/fwman/x.conf (2 bytes, mode 644)"])
    assert _text(plan) == ["would write /etc/fwman/x.conf (2 bytes, mode 644)"]
    assert not (tmp_path / "etc").exists()


def test_permission_is_asked_before_anything_is_written(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    with pytest.raises(BlockedError):
        plan_or_apply(host, [WriteFile("/etc/fwman/x.conf", b"x\n")], dry_run=False, permit=_refuse)
    assert not (tmp_path / "etc").exists()


def test_apply_then_again_says_nothing_to_do(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    actions = [WriteFile("/etc/fwman/x.conf", b"x\n")]
    done = plan_or_apply(host, actions, dry_run=False, nothing="current", done="written")
    assert done.changed and done.to_json() == {"dry_run": False, "changed": True, "actions": done.actions}
    assert _text(done) == ["written"] and (tmp_path / "etc/fwman/x.conf").read_bytes() == b"x\n"
    again = plan_or_apply(host, actions, dry_run=False, nothing="current", done="written")
    assert (again.changed, _text(again)) == (False, ["current"])
    assert _text(plan_or_apply(host, actions, dry_run=True, nothing="current")) == ["current"]
