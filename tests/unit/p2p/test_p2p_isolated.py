"""The copy test with every CUDA step in a child process under a hard deadline, on the in-memory GPU stand-in.

The stand-in's calls run in the forked children, so a copy that never returns really blocks its child: the
parent's deadline, not a flag, is what turns it into BLOCK.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import pytest

from fwman.app.p2p import CopyResult
from fwman.cli.render import finish
from fwman.core import clock as clocks
from fwman.core.errors import ExitCode, MissingError, VerificationError
from fwman.host.isolate import CRASHED, ERROR, HUNG, OK, run_isolated
from fwman.p2p.copytest import run_isolated_copy_test
from tests.support.appcontext import memory_app
from tests.support.gpus import MemoryGpus, all_pairs

TIMEOUT = 1.5


@dataclass
class HangingGpus(MemoryGpus):
    """The stand-in, plus ``hang``: pairs (src, dst) whose copy never returns; ``die``: pairs whose copy kills
    the process (a driver segfault)."""

    hang: set[tuple[int, int]] = field(default_factory=set)
    die: set[tuple[int, int]] = field(default_factory=set)

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        if (src_device, dst_device) in self.hang:
            threading.Event().wait()  # blocks forever, as a peer copy over a broken mapping does
        if (src_device, dst_device) in self.die:
            os._exit(139)
        super().copy(dst_device, dst, src_device, src, size)


def test_a_hung_pair_is_block_for_that_pair_within_its_deadline_and_the_others_are_measured() -> None:
    layer = HangingGpus(3, peer=all_pairs(3), hang={(0, 1)})
    start = clocks.monotonic()
    report = run_isolated_copy_test(lambda: layer, 4096, repeats=2, warmup=2, timeout=TIMEOUT)
    elapsed = clocks.monotonic() - start
    assert [(p.src, p.dst) for p in report.blocked] == [(0, 1)]
    blocked = report.pair(0, 1)
    assert blocked is not None and blocked.hung == "warm-up copies"
    # every other ordered pair (and the diagonal) ran and verified, with bandwidth and latency
    others = [p for p in report.pairs if (p.src, p.dst) != (0, 1)]
    assert len(others) == 8 and all(p.ok and p.gbps and p.latency_us is not None for p in others)
    assert report.matrix()[0][1] == "HUNG"
    # one deadline spent, not more: the rest of the run is quick
    assert elapsed < TIMEOUT + 5
    assert report.verdict().startswith("BLOCK: 1 copy hung (first: GPU0 -> GPU1 in warm-up copies, killed after 1.5 s)")
    app, out = memory_app()
    with pytest.raises(VerificationError) as e:
        finish(app, "p2p-test", CopyResult(report), False)
    assert e.value.exit_code == ExitCode.VERIFICATION
    assert "BLOCK GPU0 -> GPU1: hung in warm-up copies: no answer within 1.5 s (killed)" in out.getvalue()


def test_json_names_the_blocked_pair_and_its_step() -> None:
    report = run_isolated_copy_test(lambda: HangingGpus(2, peer=all_pairs(2), hang={(1, 0)}), 4096, timeout=TIMEOUT)
    payload = report.to_json()
    assert payload["blocked"] == [{"src": 1, "dst": 0, "step": "warm-up copies"}]
    assert payload["ok"] is False and payload["pair_timeout_s"] == TIMEOUT
    assert payload["matrix_latency_us"][1][0] == "-" and payload["matrix_latency_us"][0][1] != "-"


def test_wrong_data_in_a_child_is_still_caught() -> None:
    report = run_isolated_copy_test(
        lambda: HangingGpus(2, peer=all_pairs(2), corrupt={(1, 0): [5, 9]}), 4096, timeout=TIMEOUT
    )
    bad = report.pair(1, 0)
    assert bad is not None and bad.corrupted_bytes == 2 and bad.first_bad_offset == 5
    assert report.matrix()[1][0] == "BAD" and not report.ok


def test_a_pair_without_peer_access_is_staged_and_still_verified() -> None:
    report = run_isolated_copy_test(lambda: HangingGpus(2, peer=set()), 4096, timeout=TIMEOUT)
    p = report.pair(0, 1)
    assert p is not None and p.peer_access is False and not p.direct and p.ok
    assert report.matrix()[0][1].endswith("*")


def test_a_child_that_dies_is_an_error_of_its_pair() -> None:
    report = run_isolated_copy_test(lambda: HangingGpus(2, peer=all_pairs(2), die={(0, 1)}), 4096, timeout=TIMEOUT)
    p = report.pair(0, 1)
    assert p is not None and p.error == "the child died (exit status 139) in warm-up copies"
    assert p.hung is None and report.pair(1, 0) is not None and report.pair(1, 0).ok  # type: ignore[union-attr]


def test_a_driver_that_hangs_on_open_is_block_before_any_pair() -> None:
    def never_opens() -> MemoryGpus:
        threading.Event().wait()
        raise AssertionError("unreachable")

    report = run_isolated_copy_test(never_opens, 4096, timeout=TIMEOUT)
    assert report.pairs == [] and not report.ok
    assert report.verdict() == "BLOCK: cuInit and device enumeration hung: no answer within 1.5 s (killed)"


def test_no_usable_driver_in_the_child_is_missing_here() -> None:
    def missing() -> MemoryGpus:
        raise MissingError("the CUDA driver sees no GPU", hint="check `nvidia-smi`")

    with pytest.raises(MissingError) as e:
        run_isolated_copy_test(missing, 4096, timeout=TIMEOUT)
    assert e.value.message == "the CUDA driver sees no GPU" and e.value.hint == "check `nvidia-smi`"


def test_run_isolated_statuses() -> None:
    assert run_isolated(lambda step: 42, 5).status == OK
    hung = run_isolated(lambda step: (step("one"), step("two"), threading.Event().wait()), 0.5)
    assert (hung.status, hung.step) == (HUNG, "two")
    crashed = run_isolated(lambda step: os._exit(3), 5)
    assert (crashed.status, crashed.error) == (CRASHED, "the child died (exit status 3)")
    error = run_isolated(lambda step: 1 // 0, 5)
    assert (error.status, error.error_kind) == (ERROR, "ZeroDivisionError")


def test_a_cuda_error_while_opening_the_driver_is_verification_failed_not_block() -> None:
    from fwman.p2p.device import CudaError

    def broken() -> MemoryGpus:
        raise CudaError("cuDevicePrimaryCtxRetain", 999, "CUDA_ERROR_UNKNOWN")

    with pytest.raises(VerificationError) as e:
        run_isolated_copy_test(broken, 4096, timeout=TIMEOUT)
    assert e.value.exit_code == ExitCode.VERIFICATION
    assert e.value.message == (
        "cuInit and device enumeration failed: cuDevicePrimaryCtxRetain failed: CUDA_ERROR_UNKNOWN (999)"
    )
