"""The NCCL tier's real runner script on a stand-in PyTorch (tests/unit/p2p/standin_torch): real processes, one
per rank, the runner's own deadline, the control run with NCCL_P2P_DISABLE=1, and the advice derived from them.

The stand-in sums across the worker processes through files, so a wrong sum, a rank that never returns and a
P2P path slower than shared memory are faults of the run, not canned outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fwman.core import clock as clocks
from fwman.host.live import LiveHost
from fwman.p2p.nccl import NcclComparison, run_nccl_comparison, run_nccl_test

STANDIN = Path(__file__).parent / "standin_torch"
SIZES = (4, 64, 1024)


def _host(tmp_path: Path, **faults: str) -> LiveHost:
    return LiveHost(env={"PYTHONPATH": str(STANDIN), "STANDIN_DIR": str(tmp_path / "group"), **faults})


def _compare(tmp_path: Path, timeout: float = 60, **faults: str) -> NcclComparison:
    return run_nccl_comparison(
        _host(tmp_path, **faults), runner="torch", python=sys.executable, sizes=SIZES, timeout=timeout
    )


def test_p2p_faster_and_exact_at_every_size_is_the_one_case_that_recommends_a_p2p_level(tmp_path: Path) -> None:
    c = _compare(tmp_path, STANDIN_DELAY_SHM="0.002")
    assert c.ok and c.p2p.world == 2
    assert [r.size_bytes for r in c.p2p.sizes] == list(SIZES) and all(r.wrong == 0 for r in c.p2p.sizes)
    assert c.control is not None and c.control.environment["NCCL_P2P_DISABLE"] == "1"
    assert c.p2p.transport == "P2P" and c.control.transport == "SHM"
    assert [n for n, a, b in c.faster() if a < b] == list(SIZES)
    assert c.advice().startswith("P2P is exact and faster at every size: allow it")


def test_p2p_slower_than_the_control_advises_keeping_it_off_and_names_the_sizes(tmp_path: Path) -> None:
    c = _compare(tmp_path, STANDIN_DELAY_P2P="0.003")
    assert c.ok  # both exact: slower is advice, not a failure
    advice = c.advice()
    assert advice.startswith("keep P2P off for NCCL (NCCL_P2P_DISABLE=1): slower than shared memory at 4 B (")
    assert "64 B (" in advice and "1024 B (" in advice and "NVIDIA/nccl#896" in advice


def test_wrong_values_with_p2p_fail_and_advise_against_p2p(tmp_path: Path) -> None:
    c = _compare(tmp_path, STANDIN_WRONG="1")
    assert not c.ok and c.p2p.wrong and c.control is not None and c.control.ok
    assert c.p2p.verdict().startswith("WRONG RESULTS")
    assert c.advice() == "do not use P2P: the all-reduce with P2P allowed did not verify"


def test_a_rank_that_never_returns_is_block_naming_it_within_its_timeout_and_the_control_still_runs(
    tmp_path: Path,
) -> None:
    start = clocks.monotonic()
    c = _compare(tmp_path, timeout=4, STANDIN_HANG="1:64")
    elapsed = clocks.monotonic() - start
    assert c.p2p.hung is not None
    assert "rank 1 in all_reduce 64 B (checked)" in c.p2p.hung and "within 4.0 s (killed)" in c.p2p.hung
    assert c.p2p.verdict().startswith("BLOCK: NCCL rank 0 in all_reduce 64 B (checked), rank 1 in")
    # the hang is only with P2P: the control measured every size
    assert c.control is not None and c.control.ok and len(c.control.sizes) == 3
    assert not c.ok and c.advice().startswith("no P2P advice: a run hung (BLOCK)")
    assert elapsed < 4 + 20  # one deadline, plus the two short runs


def test_a_runner_that_never_returns_at_all_is_killed_by_fwman(tmp_path: Path) -> None:
    # the prefix stands for a container entry that itself hangs: the runner's own deadline never starts
    host = _host(tmp_path)
    start = clocks.monotonic()
    report = run_nccl_test(host, prefix=["sh", "-c", "sleep 60", "-"], runner="torch", timeout=0.5, margin=0.5)
    assert clocks.monotonic() - start < 10
    assert report.hung == "the NCCL runner (torch.distributed) did not return within 1 s (killed)"
    assert report.verdict().startswith("BLOCK:") and not report.ok


def test_the_cli_shows_both_runs_per_size_and_exits_4_on_a_hung_rank(tmp_path: Path) -> None:
    from tests.support.env import FwmanEnv

    prefix = f"env PYTHONPATH={STANDIN} STANDIN_DIR={tmp_path / 'group'} STANDIN_WORLD=2"
    env = FwmanEnv()
    ok = env("p2p", "test", "--nccl", "--runner", "torch", "--prefix", prefix + " STANDIN_DELAY_SHM=0.002",
             "--nccl-sizes", "4,1K", "--no-record")  # fmt: skip
    assert ok.code == 0, ok.stderr
    assert "control (NCCL_P2P_DISABLE=1): all-reduce exact on 2 ranks; NCCL used SHM" in ok.stdout
    assert "advice: P2P is exact and faster at every size" in ok.stdout
    rows = [line.split() for line in ok.stdout.splitlines() if line.strip().split(" ")[0] in ("4", "1024")]
    assert [r[0] for r in rows] == ["4", "1024"] and all(r[-1] == "exact" for r in rows)
    hung = env("p2p", "test", "--nccl", "--runner", "torch", "--prefix", prefix + " STANDIN_HANG=0:4",
               "--nccl-sizes", "4,1K", "--timeout", "3", "--no-record", "--json")  # fmt: skip
    assert hung.code == 4
    assert "try the run again with --nccl-env NCCL_P2P_DISABLE=1" in hung.stderr
    import json

    doc = json.loads(hung.stdout)
    assert doc["hung"].startswith("NCCL rank 0 in all_reduce 4 B (checked)") and doc["control"]["ok"] is True


def test_doctor_recommends_a_p2p_level_only_where_the_comparison_measured_p2p_faster(tmp_path: Path) -> None:
    from fwman.p2p.history import P2PRecord
    from fwman.p2p.record import record_from_nccl
    from fwman.reports.doctor.checks.verification import verification_findings
    from tests.support.p2p_records import FP, copy_record

    def nccl_finding(record: P2PRecord) -> tuple[str, str, str | None]:
        back = P2PRecord.from_json(record.to_json())  # through the history's JSON, as doctor reads it
        [f] = [f for f in verification_findings([copy_record(), back], FP) if f.id == "p2p.nccl"]
        return f.severity.value, f.message, f.fix

    slower = _compare(tmp_path / "a", STANDIN_DELAY_P2P="0.003")
    # what the runs give a 2-rank record where NCCL staged some connections: the stand-in prints P2P only, so
    # the record's transport is set to a mix here
    rec = record_from_nccl(slower.p2p, FP, "2026-12-01T10:00:00Z", slower)
    assert rec.p2p_faster is False and rec.advice is not None and rec.advice.startswith("keep P2P off")
    mixed = P2PRecord(**{**rec.__dict__, "transport": "P2P+SHM"})
    severity, message, fix = nccl_finding(mixed)
    assert severity == "ok" and fix is None and "measured against NCCL_P2P_DISABLE=1: keep P2P off" in message
    faster = _compare(tmp_path / "b", STANDIN_DELAY_SHM="0.002")
    rec = P2PRecord(**{**record_from_nccl(faster.p2p, FP, "2026-12-01T10:00:00Z", faster).__dict__,
                       "transport": "P2P+SHM"})  # fmt: skip
    assert rec.p2p_faster is True
    severity, _, fix = nccl_finding(rec)
    assert severity == "warn" and fix is not None and fix.startswith("set NCCL_P2P_LEVEL=SYS")
    unmeasured = P2PRecord(**{**rec.__dict__, "p2p_faster": None, "advice": None})
    _, _, fix = nccl_finding(unmeasured)
    assert fix is not None and "times P2P against an NCCL_P2P_DISABLE=1 control" in fix


LIVE27 = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "h200-1gpu" / "live27"


def test_the_real_h200_run_kept_as_fixtures() -> None:
    """What the device printed (fixtures/hosts/h200-1gpu/live27, device-run.sh): warm-up and latency, a real CUDA
    child killed at a 2 s deadline, the NCCL sizes with the control run, one rank so no P2P advice."""
    import json

    p2p = (LIVE27 / "p2p.txt").read_text()
    assert "3 warm-up and 5 timed copies per pair, 60 s deadline per pair" in p2p
    assert "latency, microseconds (one synchronous 4-byte copy, mean of 100)" in p2p
    assert "verdict: BLOCK: 1 copy hung (first: GPU0 -> GPU0 in cuInit and primary contexts, killed after 2 s)" in p2p
    nccl = (LIVE27 / "nccl.txt").read_text()
    doc = json.loads(nccl[nccl.index("{") : nccl.rindex("}") + 1])
    assert [r["size_bytes"] for r in doc["sizes"]] == [4, 16 << 20, 256 << 20]
    assert all(r["wrong"] == 0 for r in doc["sizes"] + doc["control"]["sizes"])
    assert doc["control"]["environment"]["NCCL_P2P_DISABLE"] == "1"
    assert doc["advice"].startswith("no P2P advice: one rank")
