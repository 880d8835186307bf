"""fwman p2p without a GPU: the copy test on an in-memory device layer (a stand-in for GPU hardware that can
corrupt bytes and fail calls), the pure report, and the CLI's error paths on real libraries that are not CUDA."""

from __future__ import annotations

import ctypes.util
import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.app.p2p import CopyResult
from fwman.cli.render import finish
from fwman.core.errors import ExitCode, MissingError, VerificationError
from fwman.p2p.copytest import LATENCY_REPEATS, MIB, CopyReport, PairResult, compare, pattern, run_copy_test
from fwman.p2p.cuda import load_library
from tests.support.appcontext import memory_app
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.gpus import MemoryGpus, all_pairs


def ticking(step: float = 0.001) -> Callable[[], float]:
    """Return a clock that advances ``step`` seconds per reading (bandwidth becomes exact, not timed)."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def test_every_ordered_pair_and_the_diagonal_are_copied_and_verified() -> None:
    layer = MemoryGpus(4, peer=all_pairs(4))
    report = run_copy_test(layer, 4096, repeats=3, clock=ticking())
    assert [(p.src, p.dst) for p in report.pairs] == [(a, b) for a in range(4) for b in range(4)]
    assert report.ok and not report.corrupted and not report.failed
    assert all(p.direct for p in report.pairs)
    # peer access was enabled both ways for every pair, and every buffer was freed
    assert layer.enabled == all_pairs(4)
    assert layer.memory == {}
    # one warm-up copy plus three timed copies per pair, then the latency's 10 warm-up and 100 timed small copies
    assert sum(1 for name, _ in layer.calls if name == "MemcpyPeer") == 16 * (4 + 10 + LATENCY_REPEATS)
    # the clock advanced once between start and stop: 3 copies of 4096 bytes in 0.001 s
    assert report.pair(0, 1) is not None and report.pair(0, 1).gbps == pytest.approx(3 * 4096 / 0.001 / 1e9)
    assert report.verdict() == "every byte verified: 16 copies of 4096 bytes"


def test_pairs_without_peer_access_are_marked_staged_in_the_matrix() -> None:
    layer = MemoryGpus(2, peer={(0, 1)})  # one direction only: not direct
    report = run_copy_test(layer, 1024, repeats=1, clock=ticking())
    cells = report.matrix()
    assert cells[0][0].endswith("*") is False and cells[0][1].endswith("*") and cells[1][0].endswith("*")
    assert report.pair(0, 1) is not None and report.pair(0, 1).peer_access is False
    assert layer.enabled == set()  # never enabled where cuDeviceCanAccessPeer says no
    assert report.ok
    assert "2 staged through host memory" in report.verdict()


def test_a_corrupted_byte_is_counted_located_and_fails_the_report() -> None:
    layer = MemoryGpus(3, peer=all_pairs(3), corrupt={(2, 0): [5, 777]})
    report = run_copy_test(layer, 2048, repeats=2, clock=ticking())
    assert not report.ok
    bad = report.corrupted
    assert [(p.src, p.dst, p.corrupted_bytes, p.first_bad_offset) for p in bad] == [(2, 0, 2, 5)]
    assert report.matrix()[2][0] == "BAD"
    assert report.verdict().startswith("FAILED: 1 copy corrupted data (first: GPU2 -> GPU0, 2 bytes wrong")


def test_a_copy_that_silently_does_nothing_is_caught() -> None:
    layer = MemoryGpus(2, peer=all_pairs(2), drop={(0, 1)})
    report = run_copy_test(layer, 4096, repeats=1, clock=ticking())
    p = report.pair(0, 1)
    assert p is not None and p.corrupted_bytes > 4000 and p.first_bad_offset is not None
    assert not report.ok


def test_a_cuda_error_in_one_pair_is_reported_and_the_other_pairs_still_run() -> None:
    layer = MemoryGpus(2, peer=all_pairs(2), fail={("MemAlloc", 1): "CUDA_ERROR_OUT_OF_MEMORY"})
    report = run_copy_test(layer, 1024, repeats=1, clock=ticking())
    assert [(p.src, p.dst) for p in report.failed] == [(0, 1), (1, 0), (1, 1)]
    assert report.pair(0, 0) is not None and report.pair(0, 0).ok
    assert (
        report.pair(0, 1) is not None and report.pair(0, 1).error == "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (999)"
    )
    assert report.matrix()[0][1] == "ERR"
    assert layer.memory == {}  # what was allocated before the failure was freed
    assert (
        "FAILED: 3 copies failed (first: GPU0 -> GPU1: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY" in report.verdict()
    )


def test_json_payload_has_the_matrix_pairs_and_verdict() -> None:
    report = run_copy_test(MemoryGpus(1), 3 * MIB, repeats=2, clock=ticking(0.5))
    doc = report.to_json()
    assert doc["gpus"] == [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "bus_id": "0000:01:00.0"}]
    assert doc["matrix_gbps"] == [[f"{3 * MIB * 2 / 0.5 / 1e9:.1f}"]]
    assert doc["pairs"][0]["corrupted_bytes"] == 0 and doc["pairs"][0]["direct"] is True
    assert doc["ok"] is True and doc["verdict"] == "every byte verified: 1 copy of 3 MiB"


def test_pattern_differs_per_seed_and_does_not_repeat_at_powers_of_two() -> None:
    a = pattern(3 * MIB, 1)
    assert len(a) == 3 * MIB and a != pattern(3 * MIB, 2)
    assert a[: 1 << 20] != a[1 << 20 : 2 << 20]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_compare_counts_exactly_the_bytes_that_differ(expected: bytes, got: bytes, chunk: int) -> None:
    n = min(len(expected), len(got))
    diffs = [i for i in range(n) if expected[i] != got[i]]
    wrong, first = compare(expected, got, chunk=chunk)
    assert wrong == len(diffs) + abs(len(expected) - len(got))
    if diffs:
        assert first == diffs[0]
    elif wrong:
        assert first == n
    else:
        assert first is None


def test_report_with_no_pairs_is_not_ok() -> None:
    assert not CopyReport(gpus=[], size_bytes=MIB, repeats=1).ok
    assert PairResult(0, 0, MIB, 1, seconds=0.0).gbps is None


# -- the CLI's error paths: real libraries, no GPU ----------------------------------------------------------------
def test_without_libcuda_the_error_is_clear_and_exits_5(tmp_path: pytest.TempPathFactory) -> None:
    r = FwmanEnv(variables={"FWMAN_LIBCUDA": "/nonexistent/libcuda.so.1"})("p2p")
    assert r.code == ExitCode.MISSING
    assert "cannot load the CUDA driver library /nonexistent/libcuda.so.1" in r.stderr
    assert "hint: install the NVIDIA driver's user space" in r.stderr
    assert r.stdout == ""


def test_a_library_that_is_not_cuda_is_refused() -> None:
    libc = ctypes.util.find_library("c")
    assert libc is not None
    with pytest.raises(MissingError, match=r"is not a CUDA driver library \(no cuInit"):
        load_library(libc)
    r = FwmanEnv(variables={"FWMAN_LIBCUDA": libc})("p2p", "--json")
    assert r.code == ExitCode.MISSING and r.stdout == ""


def test_p2p_test_refuses_a_snapshot() -> None:
    r = FwmanEnv()("p2p", "--snapshot", str(EXAMPLE_HOST))
    assert r.code == ExitCode.USAGE
    assert "--snapshot does not apply" in r.stderr


def test_help_teaches_with_examples() -> None:
    r = FwmanEnv()("p2p", "--help")
    assert r.code == 0
    assert "fwman p2p --size 256" in r.stdout and "Exit status" in r.stdout


# -- what the user sees: the CLI's rendering and exit status on a report ----------------------------------------
def test_text_output_shows_the_matrix_direct_access_and_verdict() -> None:
    app, out = memory_app()
    report = run_copy_test(MemoryGpus(2, peer=all_pairs(2)), MIB, repeats=1, clock=ticking(0.001))
    finish(app, "p2p-test", CopyResult(report), False)
    text = out.getvalue()
    assert "fwman p2p: 2 GPUs, 1 MiB per copy, 1 warm-up and 1 timed copy per pair, CUDA driver API 13.0" in text
    assert "GPU1  0000:21:00.0  NVIDIA GeForce RTX 3090" in text
    cell = f"{MIB / 0.001 / 1e9:.1f}"
    bandwidth, latency = [line.split() for line in text.splitlines() if line.startswith("GPU0  ")][-2:]
    assert bandwidth == ["GPU0", cell, cell]
    # the ticking clock advanced 1 ms over 100 small copies: 10 microseconds each
    assert latency == ["GPU0", "10.00", "10.00"]
    assert "peer access: direct for 2 of 2 GPU pairs" in text
    assert text.rstrip().endswith("verdict: every byte verified: 4 copies of 1 MiB")


def test_corruption_is_shown_and_exits_with_verification_failed() -> None:
    app, out = memory_app()
    report = run_copy_test(MemoryGpus(2, peer=all_pairs(2), corrupt={(0, 1): [0]}), MIB, repeats=1, clock=ticking())
    with pytest.raises(VerificationError) as e:
        finish(app, "p2p-test", CopyResult(report), False)
    assert e.value.exit_code == ExitCode.VERIFICATION
    assert "CORRUPTED GPU0 -> GPU1: 1 of 1048576 bytes wrong, first at offset 0x0" in out.getvalue()
    assert "1 copy corrupted data" in e.value.message


def test_json_output_is_versioned_and_still_exits_4_on_failure() -> None:
    app, out = memory_app()
    layer = MemoryGpus(2, fail={("MemcpyPeer", 1): "CUDA_ERROR_ILLEGAL_ADDRESS"})
    report = run_copy_test(layer, 4096, repeats=1, clock=ticking())
    with pytest.raises(VerificationError):
        finish(app, "p2p-test", CopyResult(report), True)
    doc = json.loads(out.getvalue())
    assert doc["schema"] == "fwman.p2p-test/1" and doc["ok"] is False
    assert doc["matrix_gbps"][1] == ["ERR", "ERR"]
