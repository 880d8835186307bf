"""`fwman report` and `fwman catalog propose` through the CLI: the exit codes of what cannot be reported."""

from __future__ import annotations

from pathlib import Path

from tests.support.env import EXAMPLE_HOST, FwmanEnv

SNAP = str(EXAMPLE_HOST)


def test_a_card_fwman_never_flashed_has_nothing_to_report(fwman: FwmanEnv) -> None:
    r = fwman("flash", "report", "--card", "41:00.0", "--snapshot", SNAP)
    assert r.code == 5 and r.stdout == ""
    assert "no successful flash of 0000:41:00.0 is recorded: nothing to report" in r.stderr


def test_an_unknown_card_is_a_usage_error(fwman: FwmanEnv) -> None:
    assert fwman("flash", "report", "--card", "99:00.0", "--snapshot", SNAP).code == 2


def test_propose_needs_a_report_and_a_local_entry(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("catalog", "propose", "f00d:3090", "--snapshot", SNAP)
    assert r.code == 2 and "--report FILE URL" in r.stderr
    report = tmp_path / "r.json"
    report.write_text('{"schema": "fwman.report/1"}')
    r = fwman("catalog", "propose", "f00d:3090", "--report", str(report), "https://forge.example/1", "--snapshot", SNAP)
    assert r.code == 5 and "no local entry for f00d:3090" in r.stderr
    r = fwman("catalog", "propose", "f00d:3090", "--report", str(tmp_path / "nope.json"), "https://x.example/1")
    assert r.code == 5
