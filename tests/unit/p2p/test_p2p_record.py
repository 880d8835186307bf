"""The P2P verification record: `fwman p2p` appends it with a fingerprint; `fwman doctor` reads it back.

The copy test runs on the in-memory GPU layer of tests/support/gpus.py (no GPU here); the host is the example rig
materialised under a temporary --root, so the record is really written to disk and doctor really reads it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from fwman.p2p.history import (
    CardPrint,
    Fingerprint,
    P2PRecord,
    changes,
    read_history,
    standing,
)
from fwman.reports.doctor.checks.verification import verification_findings
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.gpus import MemoryGpus, all_pairs, memory_driver
from tests.support.p2p_records import FP, copy_record


def test_the_same_configuration_reads_back_as_verified_with_date_and_slowest_pair() -> None:
    [f] = verification_findings([copy_record()], FP)
    assert f.severity == "ok"
    assert f.message == ("P2P verified on this configuration (2026-11-30, slowest pair 24.6 GB/s, every byte verified)")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"kernel": "6.8.12-5-pve"}, "kernel changed (was 6.8.12-4-pve, now 6.8.12-5-pve)"),
        ({"module_srcversion": "FFFF"}, "loaded module srcversion changed (was 8C1B2D6A0F4E3B2A1D9C7E5, now FFFF)"),
        ({"manifest": None}, "fwman build of the module changed (was aikitoria 570.86.16-p2p @ 0123abc, now unknown)"),
        ({"iommu": "translated"}, "IOMMU mode changed (was passthrough, now translated)"),
    ],
)
def test_one_changed_field_makes_it_not_verified_since_that_change(change: dict[str, object], expected: str) -> None:
    now = dataclasses.replace(FP, **change)  # type: ignore[arg-type]
    [f] = verification_findings([copy_record()], now)
    assert f.severity == "warn"
    assert f.message.startswith(f"P2P not verified since {expected}: last verified 2026-11-30")


def test_a_flashed_card_changes_its_vbios_and_bar1() -> None:
    flashed = CardPrint("0000:21:00.0", "10de:2204", "3842:3982", "94.02.42.80.27", 256 << 20)
    now = dataclasses.replace(FP, gpus=(FP.gpus[0], flashed))
    assert [c.describe() for c in changes(FP, now)] == [
        "VBIOS of 0000:21:00.0 changed (was 94.02.42.C0.05, now 94.02.42.80.27)",
        "BAR1 of 0000:21:00.0 changed (was 32 GiB, now 256 MiB)",
    ]
    assert standing([copy_record()], now).state == "changed"


def test_a_failed_test_on_this_configuration_blocks_and_an_older_pass_does_not_hide_it() -> None:
    records = [copy_record(), copy_record(ok=False, time="2026-12-01T08:00:00Z")]
    [f] = verification_findings(records, FP)
    assert f.severity == "block" and "FAILED on this configuration (2026-12-01)" in f.message


def test_going_back_to_a_verified_configuration_finds_its_record_again() -> None:
    other = dataclasses.replace(FP, kernel="6.8.12-5-pve")
    records = [copy_record(), copy_record(fp=other, time="2026-12-01T08:00:00Z")]
    assert standing(records, FP).state == "verified"
    assert standing(records, FP).record == records[0]


def test_no_history_is_never_verified() -> None:
    [f] = verification_findings([], FP)
    assert f.severity == "info" and f.message.startswith("P2P never verified")


_text = st.one_of(st.none(), st.text(max_size=8))


@given(
    st.builds(
        Fingerprint,
        kernel=_text,
        module_version=_text,
        module_srcversion=_text,
        module_flavour=_text,
        manifest=_text,
        userspace=_text,
        iommu=_text,
        gpus=st.lists(
            st.builds(
                CardPrint,
                st.text(min_size=1, max_size=6),
                st.text(max_size=4),
                st.text(max_size=4),
                _text,
                st.one_of(st.none(), st.integers(0, 1 << 40)),
            ),
            max_size=3,
        ).map(tuple),
    )
)
def test_a_record_survives_its_json_line_and_equals_its_own_configuration(fp: Fingerprint) -> None:
    rec = copy_record(fp=fp)
    back = P2PRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back == rec
    assert changes(back.fingerprint, fp) == [] or len({g.bus_id for g in fp.gpus}) < len(fp.gpus)


@given(st.text(max_size=300))
def test_any_history_line_is_a_record_or_skipped_never_a_crash(line: str) -> None:
    try:
        doc = json.loads(line)
    except ValueError:
        return
    try:
        P2PRecord.from_json(doc)
    except (ValueError, TypeError):
        pass


def test_a_damaged_history_line_is_reported_with_its_number_not_skipped(tmp_path: Path) -> None:
    # a verification record is evidence: a damaged line must not let doctor read "never verified" or an older pass
    from fwman.core.errors import VerificationError
    from fwman.host.live import LiveHost
    from fwman.p2p.history import read_history

    history = tmp_path / paths.P2P_HISTORY_FILE.lstrip("/")
    history.parent.mkdir(parents=True)
    history.write_text('{"kind": "copy"}\n\n{not json\n')
    with pytest.raises(VerificationError) as e:
        read_history(LiveHost(str(tmp_path)))
    assert f"{paths.P2P_HISTORY_FILE} line 1:" in str(e.value) and "(and 1 more)" in str(e.value)


# -- the command line, end to end on a materialised example host ---------------------------------------------------
@pytest.fixture
def rig_root(tmp_path: Path) -> Path:
    return materialize(EXAMPLE_HOST, tmp_path / "root")


def test_p2p_test_writes_a_record_that_doctor_reads_back_as_verified(rig_root: Path) -> None:
    gpus = MemoryGpus(2, peer=all_pairs(2))
    r = FwmanEnv(cuda_driver=memory_driver(gpus))("--root", str(rig_root), "p2p", "--size", "1", "--repeats", "1")
    assert r.code == 0, r.stderr
    # the copies ran on the layer the test handed in (in the isolated children: the table names its 2 GPUs' pairs)
    assert "fwman p2p: 2 GPUs," in r.stdout and "verdict: every byte verified: 4 copies of 1 MiB" in r.stdout
    assert f"recorded in {paths.P2P_HISTORY_FILE}" in r.stderr
    history = rig_root / paths.P2P_HISTORY_FILE.lstrip("/")
    [line] = history.read_text().splitlines()
    doc = json.loads(line)
    assert doc["format"] == "fwman.p2p-record/1" and doc["ok"] is True and doc["every_byte_verified"] is True
    assert doc["fingerprint"]["kernel"] == "6.8.12-4-pve"
    assert doc["fingerprint"]["module_version"] == "570.86.16"
    assert [g["vbios"] for g in doc["fingerprint"]["gpus"]] == ["94.02.42.C0.05"] * 2 + ["94.02.26.48.15"] * 2
    assert doc["fingerprint"]["iommu"] == "translated"

    d = FwmanEnv()("--root", str(rig_root), "doctor", "--json")
    steps = {s["id"]: s for s in json.loads(d.stdout)["steps"]}
    [f] = steps["p2p.verified"]["findings"]
    assert f["severity"] == "ok" and f["message"].startswith("P2P verified on this configuration (")

    # a kernel update: the same record no longer counts
    (rig_root / paths.KERNEL_RELEASE.lstrip("/")).write_text("6.8.12-5-pve\n")
    d = FwmanEnv()("--root", str(rig_root), "doctor", "--json")
    [f] = {s["id"]: s for s in json.loads(d.stdout)["steps"]}["p2p.verified"]["findings"]
    assert f["severity"] == "warn"
    assert f["message"].startswith("P2P not verified since kernel changed (was 6.8.12-4-pve, now 6.8.12-5-pve)")
    assert len(read_history_of(rig_root)) == 1


def read_history_of(root: Path) -> list[P2PRecord]:
    from fwman.host.live import LiveHost

    return read_history(LiveHost(str(root)))


def test_no_record_leaves_the_history_alone(rig_root: Path) -> None:
    run = FwmanEnv(cuda_driver=memory_driver(MemoryGpus(2, peer=all_pairs(2))))
    r = run("--root", str(rig_root), "p2p", "--size", "1", "--repeats", "1", "--no-record")
    assert r.code == 0, r.stderr
    assert not (rig_root / paths.P2P_HISTORY_FILE.lstrip("/")).exists()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@given(st.fixed_dictionaries({"format": st.just("fwman.p2p-record/1"), "time": st.text(max_size=20),
                              "kind": st.sampled_from(["copy", "nccl"])}, optional={
    "fingerprint": _json, "transports": _json, "environment": _json, "prefix": _json, "slowest_gbps": _json,
    "gpus": _json, "ok": _json}))  # fmt: skip
def test_a_record_of_any_shape_is_read_or_refused_never_a_crash(doc: dict[str, object]) -> None:
    try:
        rec = P2PRecord.from_json(doc)
    except (ValueError, TypeError):
        return
    assert rec.kind in ("copy", "nccl") and isinstance(rec.ok, bool)
