"""The NCCL tier's real runner script on a stand-in PyTorch (tests/unit/p2p/standin_torch): real processes, one
per rank, the control run with NCCL_P2P_DISABLE=1, and the advice derived from them. A rank that never returns,
killed at the runner's deadline (seconds of waiting), is tests/system/test_p2p_nccl_deadlines.py's.

The stand-in sums across the worker processes through files, so a wrong sum, a rank that never returns and a
delayed all-reduce are faults of the run, not canned outputs. A delay is a floor on what the runner measures (it
sleeps in every all-reduce), never a ceiling: on a loaded machine the other run can be slower than any delay a
test can afford, so which run was faster, and the advice and doctor finding that follow, are tested on the
runner's output with the measured seconds in it (``_measured``), as fwman reads it from a GPU host.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from fwman.core import clock as clocks
from fwman.p2p.history import P2PRecord
from fwman.p2p.nccl import RESULT_TAG, NcclComparison, report_from_torch, run_nccl_test
from fwman.p2p.record import record_from_nccl
from fwman.reports.doctor.checks.verification import verification_findings
from tests.support.nccl_standin import SIZES, compare, standin_host
from tests.support.p2p_records import FP, copy_record

#: seconds the stand-in's all-reduce sleeps on the delayed path (STANDIN_DELAY_P2P / STANDIN_DELAY_SHM)
DELAY = 0.002


def test_both_runs_time_every_size_and_the_control_is_the_run_with_p2p_disabled(tmp_path: Path) -> None:
    c = compare(tmp_path, STANDIN_DELAY_SHM=str(DELAY))
    assert c.ok and c.p2p.world == 2
    assert [r.size_bytes for r in c.p2p.sizes] == list(SIZES) and all(r.wrong == 0 for r in c.p2p.sizes)
    assert c.control is not None and c.control.environment["NCCL_P2P_DISABLE"] == "1"
    assert c.p2p.transport == "P2P" and c.control.transport == "SHM"
    # every all-reduce of the control sleeps DELAY, so its mean is at least that whatever the load (a lower bound
    # is all a loaded machine guarantees: which of two runs is faster is tested on the runner's output, below)
    assert [n for n, _, _ in c.faster()] == list(SIZES) and all(b >= DELAY for _, _, b in c.faster())


def test_the_p2p_run_is_timed_with_p2p_allowed(tmp_path: Path) -> None:
    c = compare(tmp_path, STANDIN_DELAY_P2P=str(DELAY))
    assert c.ok  # both exact: slower is advice, not a failure
    assert [n for n, _, _ in c.faster()] == list(SIZES) and all(a >= DELAY for _, a, _ in c.faster())


def test_wrong_values_with_p2p_fail_and_advise_against_p2p(tmp_path: Path) -> None:
    c = compare(tmp_path, STANDIN_WRONG="1")
    assert not c.ok and c.p2p.wrong and c.control is not None and c.control.ok
    assert c.p2p.verdict().startswith("WRONG RESULTS")
    assert c.advice() == "do not use P2P: the all-reduce with P2P allowed did not verify"


def test_a_runner_that_never_returns_at_all_is_killed_by_fwman(tmp_path: Path) -> None:
    # the prefix stands for a container entry that itself hangs: the runner's own deadline never starts
    host = standin_host(tmp_path)
    start = clocks.monotonic()
    hang = f"sleep 60.{os.getpid()}"  # a command line no other process has
    report = run_nccl_test(host, prefix=["sh", "-c", f"{hang}; true", "-"], runner="torch", timeout=0.5, margin=0.5)
    assert clocks.monotonic() - start < 10
    assert report.hung == "the NCCL runner (torch.distributed) did not return within 1 s (killed)"
    assert report.verdict().startswith("BLOCK:") and not report.ok
    # the whole tree is killed, not only the shell: its hanging child does not go on running
    alive = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip() == hang.encode():
                alive.append(pid)
    assert alive == [], f"left running: {hang} ({alive})"


def _runner_output(seconds: dict[int, float], via: tuple[str, str], environment: dict[str, str]) -> str:
    """Return what the torch runner prints for 2 exact ranks (TORCH_SCRIPT's result line, with the mean seconds of
    one all-reduce per size as it measures them) after NCCL_DEBUG=INFO's connection lines, rank 0 -> 1 via
    ``via[0]`` and 1 -> 0 via ``via[1]`` (the form NVIDIA/nccl#1189 quotes)."""
    lines = [f"host:1:1 [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {1 - r}[{1 - r}] via {via[r]}" for r in (0, 1)]
    sizes = [
        {"bytes": n, "elements": n // 4, "wrong": 0, "seconds": t, "algbw_gbps": n / t / 1e9, "busbw_gbps": n / t / 1e9}
        for n, t in seconds.items()
    ]
    last = sizes[-1]
    doc = {"world": 2, "elements": last["elements"], "wrong": 0, "seconds": last["seconds"],
           "algbw_gbps": last["algbw_gbps"], "busbw_gbps": last["busbw_gbps"], "sizes": sizes, "torch": "0.0+standin",
           "nccl": "0.0.0", "env": environment, "devices": ["GPU 0", "GPU 1"]}  # fmt: skip
    return "\n".join([*lines, RESULT_TAG + json.dumps(doc)]) + "\n"


def _measured(p2p: dict[int, float], control: dict[int, float]) -> NcclComparison:
    """Return the comparison of a P2P run that NCCL partly staged (P2P one way, SHM the other) and its control,
    from the runner's output with these measured seconds per size; the runs themselves are the tests above."""
    both = ("SHM/direct/direct", "SHM/direct/direct")
    return NcclComparison(
        report_from_torch([], [], 0, _runner_output(p2p, ("P2P/CUMEM", "SHM/direct/direct"), {"NCCL_DEBUG": "INFO"})),
        report_from_torch([], [], 0, _runner_output(control, both, {"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1"})),
    )


def test_p2p_faster_and_exact_at_every_size_is_the_one_case_that_recommends_a_p2p_level() -> None:
    faster = _measured({4: 10e-6, 1024: 12e-6}, {4: 20e-6, 1024: 25e-6})
    assert faster.ok and faster.p2p_faster() is True
    assert faster.advice().startswith("P2P is exact and faster at every size: allow it")
    # faster at one size only, or as fast (a tie): not faster
    for p2p in ({4: 10e-6, 1024: 40e-6}, {4: 10e-6, 1024: 25e-6}):
        c = _measured(p2p, {4: 20e-6, 1024: 25e-6})
        assert c.p2p_faster() is False and c.advice().startswith("keep P2P off for NCCL")


def test_p2p_slower_than_the_control_advises_keeping_it_off_and_names_the_sizes() -> None:
    c = _measured({4: 30e-6, 64: 10e-6, 1024: 40e-6}, {4: 20e-6, 64: 20e-6, 1024: 25e-6})
    assert c.ok  # both exact: slower is advice, not a failure
    assert c.advice() == (
        "keep P2P off for NCCL (NCCL_P2P_DISABLE=1): slower than shared memory at 4 B (30.0 us vs 20.0 us), "
        "1024 B (40.0 us vs 25.0 us) (NVIDIA/nccl#896: 'it is faster to use shared memory')"
    )


def test_doctor_recommends_a_p2p_level_only_where_the_comparison_measured_p2p_faster() -> None:
    # the measured times come in the runner's output, as from a GPU host: timing two stand-in runs cannot order
    # them on a loaded machine (this test failed so once, when it timed runs 2-3 ms apart)
    def nccl_finding(comparison: NcclComparison) -> tuple[P2PRecord, str, str, str | None]:
        rec = record_from_nccl(comparison.p2p, FP, "2026-12-01T10:00:00Z", comparison)
        back = P2PRecord.from_json(rec.to_json())  # through the history's JSON, as doctor reads it
        [f] = [f for f in verification_findings([copy_record(), back], FP) if f.id == "p2p.nccl"]
        return back, f.severity.value, f.message, f.fix

    slower = _measured({4: 30e-6, 1024: 40e-6}, {4: 20e-6, 1024: 25e-6})
    rec, severity, message, fix = nccl_finding(slower)
    assert rec.transport == "P2P+SHM" and rec.p2p_faster is False
    assert rec.advice == slower.advice() and rec.advice.startswith("keep P2P off")
    assert severity == "ok" and fix is None and "measured against NCCL_P2P_DISABLE=1: keep P2P off" in message
    # faster at one size is not faster: the level is recommended only where P2P won at every size, ties included
    for p2p in ({4: 10e-6, 1024: 40e-6}, {4: 10e-6, 1024: 25e-6}):
        rec, severity, _, fix = nccl_finding(_measured(p2p, {4: 20e-6, 1024: 25e-6}))
        assert rec.p2p_faster is False and severity == "ok" and fix is None
    faster = _measured({4: 10e-6, 1024: 12e-6}, {4: 20e-6, 1024: 25e-6})
    rec, severity, _, fix = nccl_finding(faster)
    assert rec.transport == "P2P+SHM" and rec.p2p_faster is True
    assert severity == "warn" and fix is not None and fix.startswith("set NCCL_P2P_LEVEL=SYS")
    unmeasured = P2PRecord(**{**rec.__dict__, "p2p_faster": None, "advice": None})
    [f] = [f for f in verification_findings([copy_record(), unmeasured], FP) if f.id == "p2p.nccl"]
    assert f.fix is not None and "times P2P against an NCCL_P2P_DISABLE=1 control" in f.fix


LIVE27 = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "h200-1gpu" / "live27"


def test_the_real_h200_run_kept_as_fixtures() -> None:
    """What the device printed (fixtures/hosts/h200-1gpu/live27, device-run.sh): warm-up and latency, a real CUDA
    child killed at a 2 s deadline, the NCCL sizes with the control run, one rank so no P2P advice."""
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
