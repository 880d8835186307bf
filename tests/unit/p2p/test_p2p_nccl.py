"""The NCCL tier: NCCL_DEBUG=INFO and all_reduce_perf parsers on real output, the runners, the verdict.

Real inputs: the torch runner's whole output on the H200 machine (fixtures/hosts/h200-1gpu/live/
nccl_torch_raw.txt, world size 1, NCCL 2.28.9), transport lines quoted in public NCCL issue threads (each cited
beside it), and one public all_reduce_perf run. Multi-GPU runs could not be made here (one GPU lent).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.host.base import CommandResult
from fwman.p2p.nccl import (
    RESULT_TAG,
    RunnerMissing,
    report_from_nccl_tests,
    report_from_torch,
    run_nccl_test,
    torch_script,
)
from fwman.p2p.nccl_log import parse_all_reduce_perf, parse_nccl_log, transport_class
from tests.support.env import HOSTS

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIVE = HOSTS / "h200-1gpu" / "live"

# NVIDIA/nccl#1189 (NCCL 2.19+, CUMEM and a network connection with [receive])
CUMEM = [
    "H20-GPU-05:1789225:1789736 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM",
    "H20-GPU-05:1789225:1789736 [1] NCCL INFO Channel 03/0 : 1[1] -> 0[0] via P2P/CUMEM",
    "H20-GPU-06:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA",
]
# NVIDIA/nccl#1817 (staged through host memory)
SHM = [
    "sh9-machine-20250813085604-64df4c99dc-m27xf:3884652:3884740 [7] NCCL INFO Channel 01 : 7[7] -> 2[2] via "
    "SHM/direct/direct",
    "sh9-machine-20250813085604-64df4c99dc-m27xf:3884652:3884744 [3] NCCL INFO Channel 00 : 3[3] -> 7[7] via "
    "SHM/direct/direct",
]
# NVIDIA/nccl#527 (bus ids in brackets, P2P/IPC/read); pytorch/pytorch#23534 (NCCL 2.4 "Ring" lines)
IPC = "ip-10-216-179-119:416602:416643 [1] NCCL INFO Channel 04 : 25[101d0] -> 24[101c0] via P2P/IPC/read"
OLD = [
    "ip-172-31-44-237:52617:53046 [4] NCCL INFO Ring 00 : 4[4] -> 5[5] via P2P/IPC ",
    "ip-172-31-44-237:52617:53046 [4] NCCL INFO Ring 00 : 4[4] -> 3[3] via direct shared memory ",
    "ip-172-31-44-237:52617:53046 [4] NCCL INFO Ring 02 : 4 -> 19 [send] via NET/Socket/0 ",
]
# a public all_reduce_perf run (lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result), rows shortened
PERF = """# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6900 on ztan-mig-235z device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0
  4294967296    1073741824     float     sum      -1    24361  176.31  330.58      0    24365  176.27  330.51      0
  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 70.742 
"""  # noqa: E501, W291


def test_transport_lines_of_every_nccl_generation() -> None:
    log = parse_nccl_log("\n".join([*CUMEM, *SHM, IPC, *OLD]))
    assert [(c.channel, c.src, c.dst, c.transport, c.kind) for c in log.channels] == [
        (1, 1, 0, "P2P/CUMEM", "P2P"),
        (3, 1, 0, "P2P/CUMEM", "P2P"),
        (7, 0, 2, "NET/IB/3/GDRDMA", "NET"),
        (1, 7, 2, "SHM/direct/direct", "SHM"),
        (0, 3, 7, "SHM/direct/direct", "SHM"),
        (4, 25, 24, "P2P/IPC/read", "P2P"),
        (0, 4, 5, "P2P/IPC", "P2P"),
        (0, 4, 3, "direct shared memory", "SHM"),
        (2, 4, 19, "NET/Socket/0", "NET"),
    ]
    assert log.channels[2].direction == "receive" and log.channels[-1].direction == "send"
    assert log.summary() == "P2P+SHM+NET"


def test_the_real_torch_run_on_the_h200() -> None:
    raw = (LIVE / "nccl_torch_raw.txt").read_text()
    log = parse_nccl_log(raw)
    assert log.version == "2.28.9+cuda13.0"
    assert log.channels == []  # one rank: "Channel 00/64 : 0" rings, no connection to a peer
    report = report_from_torch((), ("python3",), 0, raw)
    assert (report.world, report.wrong, report.ok) == (1, 0, True)
    assert report.verdict() == (
        "all-reduce exact on 1 rank; one GPU: NCCL connects no peer, so there is no transport to judge"
    )
    assert report.environment["NCCL_DEBUG"] == "INFO"
    # what `fwman p2p --nccl` printed there
    assert "verdict: all-reduce exact on 1 rank" in (LIVE / "nccl.txt").read_text()


def _torch_output(world: int, wrong: int, lines: Sequence[str]) -> str:
    doc = {"world": world, "wrong": wrong, "algbw_gbps": 10.0, "busbw_gbps": 15.0, "nccl": "2.21.5", "env": {}}
    return "\n".join([*lines, RESULT_TAG + json.dumps(doc)]) + "\n"


def test_shm_connections_are_named_with_why_they_matter() -> None:
    report = report_from_torch((), (), 0, _torch_output(4, 0, [*SHM, CUMEM[0]]))
    assert report.ok and report.transport == "P2P+SHM"
    assert report.verdict() == (
        "all-reduce exact on 4 ranks; NCCL used SHM on 2 of 3 connections (P2P/CUMEM x1, SHM/direct/direct x2): "
        "staged through host memory (two copies, CPU memory bandwidth): what NCCL falls back to when it declines "
        "P2P for a pair"
    )


def test_all_p2p_and_wrong_values() -> None:
    assert (
        report_from_torch((), (), 0, _torch_output(2, 0, CUMEM[:2]))
        .verdict()
        .endswith("NCCL used P2P on every connection (P2P/CUMEM x2)")
    )
    bad = report_from_torch((), (), 0, _torch_output(2, 7, CUMEM[:2]))
    assert not bad.ok and bad.verdict() == "WRONG RESULTS: 7 values of the all-reduce differ from the exact sum"


def test_a_runner_that_printed_no_result_is_a_failure_with_its_last_words() -> None:
    report = report_from_torch((), (), 1, "Traceback ...\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp\n")
    assert not report.ok and "RuntimeError: NCCL error" in (report.error or "")


def test_all_reduce_perf_rows_wrong_counts_and_summary() -> None:
    perf = parse_all_reduce_perf(PERF)
    assert len(perf.rows) == 3 and perf.rows[-1].size_bytes == 8589934592
    assert perf.rows[-1].oop_busbw == 338.82 and perf.wrong == 0
    assert (perf.out_of_bounds, perf.avg_busbw, perf.peak_busbw) == (0, 70.742, 338.82)
    assert len(perf.devices) == 2
    report = report_from_nccl_tests((), (), 0, PERF + "\n" + CUMEM[0], 2, {"NCCL_DEBUG": "INFO"})
    assert report.ok and report.world == 2 and report.transport == "P2P"


def test_all_reduce_perf_wrong_and_unchecked() -> None:
    wrong = PERF.replace("0.00      0\n  42", "0.00      3\n  42", 1)
    assert parse_all_reduce_perf(wrong).wrong == 3
    rows = [ln.split() for ln in PERF.splitlines() if ln.strip() and not ln.startswith("#")]
    unchecked = "\n".join(" ".join([*r[:8], "N/A", *r[9:12], "N/A"]) for r in rows) + "\n"
    assert parse_all_reduce_perf(unchecked).wrong is None
    assert not report_from_nccl_tests((), (), 0, unchecked, 2, {}).ok


def test_all_reduce_perf_errors_name_the_line() -> None:
    with pytest.raises(ParseError, match="line 2"):
        parse_all_reduce_perf("# header\n  8  2  float  sum  -1  1.0\n")
    with pytest.raises(ParseError, match="no result rows"):
        parse_all_reduce_perf("nothing\n")


@FUZZ
@given(st.text(max_size=400))
def test_nccl_log_of_any_text_never_fails(text: str) -> None:
    log = parse_nccl_log(text)
    assert all(c.kind in ("P2P", "SHM", "NET", "other") for c in log.channels)


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("0123456789.# N/Afloatsum-\n")), max_size=400))
def test_all_reduce_perf_of_any_text(text: str) -> None:
    try:
        parse_all_reduce_perf(text)
    except ParseError:
        pass


@given(st.sampled_from(["P2P/CUMEM", "P2P/CUMEM/read", "P2P/IPC", "P2P/direct pointer", "SHM/direct/direct",
                        "NET/IB/0/GDRDMA", "NET/Socket/0", "direct shared memory"]))  # fmt: skip
def test_transport_classes(t: str) -> None:
    assert transport_class(t) == {"P": "P2P", "S": "SHM", "N": "NET", "d": "SHM"}[t[0]]


# -- the runner, through a host that answers like a container would ------------------------------------------------
@dataclass
class FakeHost:
    """Answers ``run`` from a table keyed by the program after the prefix and ``env VARS``."""

    answers: dict[str, CommandResult]
    calls: list[list[str]] = field(default_factory=list)

    def run(self, argv: Sequence[str], **_: Any) -> CommandResult:
        self.calls.append(list(argv))
        program = next(a for a in argv[argv.index("env") + 1 :] if "=" not in a)
        return self.answers.get(program, CommandResult(tuple(argv), 127, "", "not found", True))


def test_the_prefix_and_the_variables_reach_the_command_inside_the_container() -> None:
    host = FakeHost({"python3": CommandResult((), 0, _torch_output(4, 0, CUMEM[:2]), "", False)})
    report = run_nccl_test(host, prefix=["pct", "exec", "101", "--"], env={"NCCL_P2P_LEVEL": "SYS"})  # type: ignore[arg-type]
    [argv] = host.calls
    assert argv[:6] == ["pct", "exec", "101", "--", "env", "NCCL_DEBUG=INFO"]
    assert argv[6] == "NCCL_P2P_LEVEL=SYS" and argv[7:9] == ["python3", "-c"] and argv[9] == torch_script()
    assert report.ok and report.prefix == ("pct", "exec", "101", "--")


def test_without_torch_auto_falls_back_to_all_reduce_perf() -> None:
    no_torch = CommandResult((), 3, "FWMAN_NO_TORCH ModuleNotFoundError('torch')\n", "", False)
    host = FakeHost({"python3": no_torch, "all_reduce_perf": CommandResult((), 0, PERF, "", False)})
    report = run_nccl_test(host, gpus=2)  # type: ignore[arg-type]
    assert report.runner == "nccl-tests all_reduce_perf" and report.ok
    assert host.calls[1][-8:] == ["-e", "64M", "-f", "4", "-g", "2", "-c", "1"]


def test_no_runner_at_all_says_what_was_tried() -> None:
    no_torch = CommandResult((), 3, "FWMAN_NO_TORCH ModuleNotFoundError('torch')\n", "", False)
    with pytest.raises(RunnerMissing, match=r"torch: FWMAN_NO_TORCH.*all_reduce_perf not found"):
        run_nccl_test(FakeHost({"python3": no_torch}))  # type: ignore[arg-type]


# -- the command line, end to end: a stand-in `pct` on PATH answers like the container would -----------------------
def test_nccl_tier_in_a_container_uses_its_environment_records_and_doctor_reads_it(tmp_path: Path) -> None:
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import build_rig, rig_4x3090
    from tests.support.env import FwmanEnv

    build_rig(rig_4x3090(), note="nccl tier", lxc_environment={"NCCL_P2P_LEVEL": "SYS"}).write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argv_file = tmp_path / "argv"
    output = _torch_output(4, 0, [*SHM, CUMEM[0]])
    (tmp_path / "out").write_text(output)
    pct = bindir / "pct"
    pct.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv_file}\ncat {tmp_path / "out"}\n')
    pct.chmod(0o755)
    env = FwmanEnv(path_prepend=[bindir])
    r = env("--root", str(root), "p2p", "--nccl", "--prefix", "pct exec 101 --")
    assert r.code == 0, r.stderr
    sent = argv_file.read_text().splitlines()
    assert sent[:5] == ["exec", "101", "--", "env", "NCCL_DEBUG=INFO"] and sent[5] == "NCCL_P2P_LEVEL=SYS"
    assert "NCCL variables of the model server from /etc/pve/lxc/101.conf: NCCL_P2P_LEVEL=SYS" in r.stderr
    assert "verdict: all-reduce exact on 4 ranks; NCCL used SHM on 2 of 3 connections" in r.stdout
    [line] = (root / "var/lib/fwman/p2p-history.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["kind"] == "nccl" and rec["transport"] == "P2P+SHM" and rec["prefix"] == ["pct", "exec", "101", "--"]
    d = env("--root", str(root), "doctor", "--json")
    steps = {s["id"]: s for s in json.loads(d.stdout)["steps"]}
    nccl = next(f for f in steps["p2p.verified"]["findings"] if f["id"] == "p2p.nccl")
    assert nccl["severity"] == "warn" and "NCCL did not use P2P on every connection" in nccl["message"]


@FUZZ
@given(st.text(max_size=300))
def test_torch_runner_output_of_any_text(text: str) -> None:
    from fwman.p2p.nccl import parse_torch_output

    try:
        doc = parse_torch_output(text)
    except ParseError:
        return
    assert doc is None or isinstance(doc, dict)
    report = report_from_torch((), (), 0, text)
    assert report.ok is (report.error is None and report.wrong == 0)
