"""`fwman driver power`: persistence mode and power limits persisted by fwman's unit (written, enabled, applied
now with nvidia-smi), --dry-run and --json; tested on the bundled 4x3090 rig with a stand-in nvidia-smi that
records its argv."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from fwman.core.errors import ParseError
from fwman.driver.power import PowerPlan, parse_limits, render_unit
from tests.support.env import EXAMPLE_HOST, FwmanEnv

BUSES = ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]


@pytest.fixture
def rig(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "smi.argv"
    smi = bin_dir / "nvidia-smi"
    # queries (-q -x, --query-gpu) fail: the rig's limits are then unknown; settings (-pm, -pl) are recorded
    smi.write_text(f'#!/bin/sh\ncase "$*" in *-pm*|*-pl*) echo "$@" >> {log}; exit 0;; esac\nexit 1\n')
    smi.chmod(0o755)
    return root, bin_dir, log


def test_limits_parse() -> None:
    assert parse_limits(["280"], BUSES[:2]) == {BUSES[0]: 280.0, BUSES[1]: 280.0}
    assert parse_limits(["280", "21:00.0=300"], BUSES[:2]) == {BUSES[0]: 280.0, BUSES[1]: 300.0}
    for bad in ("", "0", "2001", "lots", "=280", "zz=280"):
        with pytest.raises(ParseError):
            parse_limits([bad], BUSES)


@given(st.text(max_size=30))
def test_any_limit_is_watts_or_a_parse_error(text: str) -> None:
    try:
        out = parse_limits([text], BUSES)
    except ParseError:
        return
    assert all(1 <= w <= 2000 for w in out.values())


def test_the_unit_runs_persistence_then_each_limit_after_the_modules_load() -> None:
    unit = render_unit(PowerPlan(((BUSES[0], 280.0),), True), BUSES[:2], "/usr/bin/nvidia-smi").decode()
    assert "After=systemd-modules-load.service" in unit and "WantedBy=multi-user.target" in unit
    execs = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert execs == [
        "ExecStart=/usr/bin/nvidia-smi -i 0000:01:00.0 -pm ENABLED",
        "ExecStart=/usr/bin/nvidia-smi -i 0000:21:00.0 -pm ENABLED",
        "ExecStart=/usr/bin/nvidia-smi -i 0000:01:00.0 -pl 280",
    ]


def test_dry_run_changes_nothing_and_says_what_it_would_do(rig: tuple[Path, Path, Path]) -> None:
    root, bin_dir, log = rig
    r = FwmanEnv(path_prepend=[bin_dir])(
        "--root", str(root), "driver", "power", "--apply", "--limit", "280", "--persistence", "--dry-run", "--json"
    )
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["changed"] is False and doc["unit_present"] is False
    assert any(paths.POWER_UNIT in w for w in doc["would"]) and any("-pl 280" in w for w in doc["would"])
    assert [g["bus_id"] for g in doc["gpus"]] == BUSES
    assert not (root / paths.POWER_UNIT.lstrip("/")).exists() and not log.exists()


def test_apply_writes_and_enables_the_unit_and_applies_now_then_off_removes_it(rig: tuple[Path, Path, Path]) -> None:
    root, bin_dir, log = rig
    run = FwmanEnv(path_prepend=[bin_dir])
    r = run("--root", str(root), "driver", "power", "--apply", "--limit", "280", "--limit", "0000:61:00.0=300")
    assert r.code == 0, r.stderr
    unit = (root / paths.POWER_UNIT.lstrip("/")).read_text()
    assert f"ExecStart={bin_dir}/nvidia-smi -i 0000:61:00.0 -pl 300" in unit and "-pm" not in unit
    wants = root / paths.POWER_UNIT_WANTS.lstrip("/")
    assert wants.is_symlink() and os.readlink(wants) == paths.POWER_UNIT
    assert log.read_text().splitlines() == [f"-i {b} -pl {300 if b.startswith('0000:61') else 280}" for b in BUSES]
    off = run("--root", str(root), "driver", "power", "--apply", "--off", "--json")
    assert off.code == 0, off.stderr
    assert json.loads(off.stdout)["unit_present"] is False and not wants.is_symlink()


def test_usage_errors(rig: tuple[Path, Path, Path]) -> None:
    root, bin_dir, _ = rig
    run = FwmanEnv(path_prepend=[bin_dir])
    assert run("--root", str(root), "driver", "power", "--limit", "280").code == 2  # without --apply
    assert run("--root", str(root), "driver", "power", "--apply").code == 2
    bad = run("--root", str(root), "driver", "power", "--apply", "--limit", "9000")
    assert bad.code == 2 and "1 to 2000 W" in bad.stderr
    both = run("--root", str(root), "driver", "power", "--apply", "--off", "--limit", "280")
    assert both.code == 2 and "--off removes the unit" in both.stderr


def _power_findings(unit: bytes | None, limit: float) -> list[tuple[str, str]]:
    from fwman.core.errors import MissingError
    from fwman.gpu.card import Card
    from fwman.gpu.inventory import Inventory
    from fwman.reports.doctor.checks.links import check_power
    from fwman.reports.doctor.facts import Fact, Facts

    card = Card(BUSES[0], "10de", "2204", "3842", "3987", power_limit_w=limit, default_power_limit_w=350.0)
    gone: Fact[object] = Fact.failed(MissingError("not read by this test"))
    names = ("topo", "p2p_read", "audit", "catalog", "iommu", "passthrough", "workloads", "virt", "acs", "slots")
    facts = Facts(
        **{name: gone for name in (*names, "p2p_history", "fingerprint")},  # type: ignore[arg-type]
        inventory=Fact.known(Inventory([card])),
        power_unit=Fact.known(unit),
    )
    return [(f.severity.value, f.message) for f in check_power(facts)]


def test_doctor_says_a_lower_limit_is_fwmans_on_purpose_only_when_the_unit_sets_exactly_it() -> None:
    unit = render_unit(PowerPlan(((BUSES[0], 280.0),), False), BUSES[:1], "/usr/bin/nvidia-smi")
    [(severity, message)] = _power_findings(unit, 280.0)
    assert severity == "ok" and "set at every boot by fwman's unit" in message
    [(severity, _)] = _power_findings(unit, 250.0)  # someone else lowered it further
    assert severity == "warn"
    [(severity, _)] = _power_findings(None, 280.0)
    assert severity == "warn"


@given(st.text(max_size=200))
def test_any_unit_text_gives_limits_never_an_exception(text: str) -> None:
    from fwman.driver.power import unit_limits

    assert all(isinstance(w, float) for w in unit_limits(text).values())


def test_the_p2p_fingerprint_holds_the_power_limits_and_a_change_unverifies_the_record() -> None:
    from dataclasses import replace

    from fwman.p2p.history import Fingerprint, changes
    from fwman.reports.doctor.checks.verification import verification_findings
    from tests.support.p2p_records import FP, copy_record

    capped = replace(FP, power_limits=((BUSES[0], 280.0), (BUSES[1], 280.0)))
    full = replace(FP, power_limits=((BUSES[0], 350.0), (BUSES[1], 280.0)))
    assert Fingerprint.from_json(capped.to_json()) == capped  # through the history's JSON
    [change] = changes(capped, full)
    assert change.describe() == (
        "power limits changed (was 0000:01:00.0 280 W, 0000:21:00.0 280 W, now 0000:01:00.0 350 W, 0000:21:00.0 280 W)"
    )
    [f] = verification_findings([copy_record(fp=capped)], full)
    assert f.severity.value == "warn" and "since power limits changed" in f.message
    assert changes(FP, full) == []  # a record from before the field still counts


def test_the_fingerprint_reads_each_cards_power_limit_and_none_without_one(tmp_path: Path) -> None:
    from fwman.gpu.card import Card
    from fwman.host.live import LiveHost
    from fwman.p2p.fingerprint import read_fingerprint

    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    host = LiveHost(str(root))
    capped = Card(BUSES[1], "10de", "2204", "3842", "3987", power_limit_w=280.0)
    unknown = Card(BUSES[0], "10de", "2204", "3842", "3987")
    assert read_fingerprint(host, [capped, unknown], "passthrough").power_limits == ((BUSES[1], 280.0),)
    assert read_fingerprint(host, [unknown], "passthrough").power_limits is None
