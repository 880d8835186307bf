"""The P2P copy test: every ordered pair of GPUs (and each GPU with itself), every byte compared.

:func:`run_copy_test` drives a :class:`~fwman.p2p.device.DeviceLayer` (real CUDA, or the tests' in-memory
one); :class:`CopyReport` holds the results and the verdict, and is pure. Bad P2P setups are known to corrupt
data silently, so a copy counts only when the bytes read back are exactly the bytes written.

Bandwidth is bytes copied per second of wall clock, in GB/s (10^9 bytes), over ``repeats`` copies after
``warmup`` untimed warm-up copies (a cold pair measures several times slower than one whose GPUs are awake:
"3.2 GB/s cold vs 13.1 GB/s once both are awake", club-3090 scripts/lib/p2p_collective_check.py), with the
context synchronised before the clock starts and before it stops. Latency is the mean wall time of one
synchronous copy of :data:`LATENCY_BYTES` bytes over :data:`LATENCY_REPEATS` copies, after a warm-up of its own
("the latency number is the important one", club-3090 docs/PCIE_P2P.md); those bytes are checked too.

:func:`run_isolated_copy_test` runs each pair in a child process under a hard deadline
(:func:`fwman.host.isolate.run_isolated`): a pair that hangs is BLOCK, naming the step it hung in, and the other
pairs are still measured.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fwman.core import clock as clocks
from fwman.core.errors import FwmanError, MissingError, VerificationError
from fwman.host.isolate import CRASHED, HUNG, OK, Isolated, run_isolated
from fwman.p2p.device import DeviceLayer, Gpu

MIB = 1024 * 1024
#: the small message of the latency measurement, and how many synchronous copies of it are averaged
LATENCY_BYTES = 4
LATENCY_REPEATS = 100
#: untimed full-size copies before the clock starts (the GPUs leave their idle power state)
DEFAULT_WARMUP = 3
#: the hard deadline of one pair's child (open the driver, warm up, copy, verify), in seconds
DEFAULT_PAIR_TIMEOUT = 60.0
#: the fill pattern repeats with this period: a prime, so no power-of-two offset error can line up with it
PATTERN_PERIOD = 1_000_003


def pattern(size: int, seed: int) -> bytes:
    """Return ``size`` bytes of a pseudo-random pattern determined by ``seed`` (a different seed per copy)."""
    block = random.Random(seed).randbytes(min(size, PATTERN_PERIOD))
    reps = -(-size // len(block)) if block else 0
    return (block * reps)[:size]


def compare(expected: bytes, got: bytes, chunk: int = 16 * MIB) -> tuple[int, int | None]:
    """Return (number of bytes that differ, offset of the first one, None when none); a short or long read counts
    its missing or extra bytes as wrong. Works in chunks so memory stays bounded for large buffers."""
    if expected == got:
        return 0, None
    n = min(len(expected), len(got))
    wrong = 0
    first: int | None = None
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        a, b = expected[start:stop], got[start:stop]
        if a == b:
            continue
        xor = (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(len(a), "little")
        wrong += len(a) - xor.count(0)
        if first is None:
            first = start + len(xor) - len(xor.lstrip(b"\x00"))
    missing = abs(len(expected) - len(got))
    if missing and first is None:
        first = n
    return wrong + missing, first


@dataclass(frozen=True)
class PairResult:
    """One copy from ``src`` to ``dst`` (GPU indexes; equal for the on-device copy)."""

    src: int
    dst: int
    size_bytes: int
    repeats: int
    seconds: float | None = None  # wall time of the timed copies
    peer_access: bool | None = None  # cuDeviceCanAccessPeer(dst, src) and (src, dst); None on the diagonal
    direct: bool = False  # peer access enabled both ways (or the same device): no staging through host memory
    corrupted_bytes: int = 0
    first_bad_offset: int | None = None
    error: str | None = None
    warmup: int = 1  # untimed copies before the timed ones
    latency_us: float | None = None  # mean wall time of one synchronous LATENCY_BYTES copy, microseconds
    hung: str | None = None  # the step the pair's child was in when its deadline passed (BLOCK)

    @property
    def gbps(self) -> float | None:
        """Return the bandwidth in GB/s (10^9 bytes per second), None when not measured."""
        if self.seconds is None or self.seconds <= 0 or self.error:
            return None
        return self.size_bytes * self.repeats / self.seconds / 1e9

    @property
    def ok(self) -> bool:
        """Return True when the copy ran and every byte matched."""
        return self.error is None and self.corrupted_bytes == 0 and self.hung is None

    @property
    def label(self) -> str:
        """Return ``GPU0 -> GPU1``."""
        return f"GPU{self.src} -> GPU{self.dst}"


def _bandwidth_cell(p: PairResult | None) -> str:
    """Return the bandwidth cell of pair ``p`` (see :meth:`CopyReport.matrix`)."""
    if p is None:
        return "-"
    if p.hung:
        return "HUNG"
    if p.error:
        return "ERR"
    if p.corrupted_bytes:
        return "BAD"
    value = p.gbps
    return ("?" if value is None else f"{value:.1f}") + ("" if p.direct else "*")


def _latency_cell(p: PairResult | None) -> str:
    """Return the latency cell of pair ``p`` in microseconds (``-`` where not measured)."""
    return "-" if p is None or p.latency_us is None or not p.ok else f"{p.latency_us:.2f}"


@dataclass
class CopyReport:
    """All pairs of one run."""

    gpus: list[Gpu]
    size_bytes: int
    repeats: int
    driver_version: str | None = None
    pairs: list[PairResult] = field(default_factory=list)
    hung: str | None = None  # what hung before any pair ran (opening the driver), when it did
    timeout: float | None = None  # each pair's hard deadline, seconds (None: run in this process)

    def pair(self, src: int, dst: int) -> PairResult | None:
        """Return the result for ``src -> dst``, None when it was not run."""
        return next((p for p in self.pairs if p.src == src and p.dst == dst), None)

    @property
    def corrupted(self) -> list[PairResult]:
        """Return the copies that read back different bytes."""
        return [p for p in self.pairs if p.corrupted_bytes]

    @property
    def failed(self) -> list[PairResult]:
        """Return the copies a CUDA call failed in (not the ones that hung)."""
        return [p for p in self.pairs if p.error and not p.hung]

    @property
    def blocked(self) -> list[PairResult]:
        """Return the copies whose child hung past its deadline and was killed."""
        return [p for p in self.pairs if p.hung]

    @property
    def ok(self) -> bool:
        """Return True when every copy ran and verified."""
        return self.hung is None and bool(self.pairs) and all(p.ok for p in self.pairs)

    def matrix(self) -> list[list[str]]:
        """Return the bandwidth matrix as text cells (row: from, column: to).

        ``24.6`` GB/s over direct peer access; ``24.6*`` staged through host memory; ``BAD`` corrupted bytes;
        ``HUNG`` the pair's child passed its deadline; ``ERR`` a CUDA call failed; ``-`` not run.
        """
        return self._cells(_bandwidth_cell)

    def latency_matrix(self) -> list[list[str]]:
        """Return the latency matrix as text cells in microseconds (``-`` where not measured)."""
        return self._cells(_latency_cell)

    def _cells(self, cell: Callable[[PairResult | None], str]) -> list[list[str]]:
        """Return ``cell`` of each pair (None: not run) in a square, row: from, column: to."""
        n = len(self.gpus)
        return [[cell(self.pair(src, dst)) for dst in range(n)] for src in range(n)]

    def verdict(self) -> str:
        """Return one line: BLOCK with what hung, every byte verified, or what failed first."""
        if self.hung:
            return f"BLOCK: {self.hung}"
        if self.blocked:
            first = self.blocked[0]
            others = len(self.pairs) - len(self.blocked)
            return (
                f"BLOCK: {_copies(self.blocked)} hung (first: {first.label} in {first.hung}, killed after "
                f"{self.timeout or 0:g} s); {others} other pair(s) measured"
            )
        if self.ok:
            staged = [p for p in self.pairs if not p.direct]
            note = f"; {len(staged)} staged through host memory (no direct peer access)" if staged else ""
            return f"every byte verified: {_copies(self.pairs)} of {_size(self.size_bytes)}{note}"
        problems = []
        if self.corrupted:
            first = self.corrupted[0]
            problems.append(
                f"{_copies(self.corrupted)} corrupted data (first: {first.label}, {first.corrupted_bytes} bytes "
                f"wrong from offset 0x{first.first_bad_offset or 0:x})"
            )
        if self.failed:
            first = self.failed[0]
            problems.append(f"{_copies(self.failed)} failed (first: {first.label}: {first.error})")
        return "FAILED: " + "; ".join(problems)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload of ``fwman p2p --json``."""
        return {
            "cuda_driver": self.driver_version,
            "size_bytes": self.size_bytes,
            "repeats": self.repeats,
            "gpus": [asdict(g) for g in self.gpus],
            "pairs": [{**asdict(p), "gbps": None if p.gbps is None else round(p.gbps, 3)} for p in self.pairs],
            "matrix_gbps": self.matrix(),
            "matrix_latency_us": self.latency_matrix(),
            "pair_timeout_s": self.timeout,
            "hung": self.hung,
            "blocked": [{"src": p.src, "dst": p.dst, "step": p.hung} for p in self.blocked],
            "ok": self.ok,
            "verdict": self.verdict(),
        }


def _copies(pairs: list[PairResult]) -> str:
    return f"{len(pairs)} cop{'ies' if len(pairs) != 1 else 'y'}"


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} bytes"


def _no_step(name: str) -> None:
    """The step callback of a pair run in this process: nothing to announce."""


def _copy_pair(
    layer: DeviceLayer,
    src: int,
    dst: int,
    size: int,
    repeats: int,
    seed: int,
    clock: Callable[[], float],
    *,
    warmup: int = 1,
    step: Callable[[str], None] = _no_step,
) -> PairResult:
    """Run one copy and return its result; a CUDA error becomes the result's ``error``.

    ``step(name)`` is called before each call that may block, so a parent watching the child knows where it hung.
    """
    peer_access: bool | None = None
    direct = src == dst
    buffers: list[tuple[int, int]] = []
    latency: float | None = None
    try:
        if src != dst:
            step("cuDeviceCanAccessPeer")
            peer_access = layer.can_access_peer(dst, src) and layer.can_access_peer(src, dst)
            if peer_access:
                step("cuCtxEnablePeerAccess")
                layer.enable_peer_access(dst, src)
                layer.enable_peer_access(src, dst)
                direct = True
        expected = pattern(size, seed)
        step("allocate and fill the buffers")
        a = layer.alloc(src, size)
        buffers.append((src, a))
        b = layer.alloc(dst, size)
        buffers.append((dst, b))
        layer.upload(src, a, expected)
        # fill the target with other bytes, so a copy that does nothing cannot pass on leftovers
        layer.upload(dst, b, pattern(size, seed ^ 0x5A5A5A5A))
        step("warm-up copies")
        for _ in range(max(warmup, 1)):  # first-touch, peer mappings and idle clocks are not timed
            layer.copy(dst, b, src, a, size)
        layer.synchronize(src)
        layer.synchronize(dst)
        step("timed copies")
        start = clock()
        for _ in range(repeats):
            layer.copy(dst, b, src, a, size)
        layer.synchronize(src)
        layer.synchronize(dst)
        seconds = clock() - start
        step("read back and compare")
        wrong, first = compare(expected, layer.download(dst, b, size))
        small_wrong: str | None = None  # the latency copies' bytes came back wrong: that is the pair's error
        if not wrong:
            step("latency copies")
            latency, small_wrong = _latency(layer, src, dst, seed, clock, buffers)
        return PairResult(src, dst, size, repeats, seconds, peer_access, direct, wrong, first, small_wrong, warmup,
                          None if small_wrong else latency)  # fmt: skip
    except FwmanError as e:
        return PairResult(src, dst, size, repeats, None, peer_access, direct, error=e.message, warmup=warmup)
    finally:
        for device, ptr in reversed(buffers):
            # the copy's own error (if any) is what the user needs to see, not a failed free after it
            with contextlib.suppress(FwmanError):
                layer.free(device, ptr)


def _latency(
    layer: DeviceLayer,
    src: int,
    dst: int,
    seed: int,
    clock: Callable[[], float],
    buffers: list[tuple[int, int]],
) -> tuple[float, str | None]:
    """Return (mean microseconds of one synchronous LATENCY_BYTES copy, an error when its bytes came back wrong).

    The buffers it allocates are appended to ``buffers`` (the caller frees them).
    """
    expected = pattern(LATENCY_BYTES, seed ^ 0x1234)
    a = layer.alloc(src, LATENCY_BYTES)
    buffers.append((src, a))
    b = layer.alloc(dst, LATENCY_BYTES)
    buffers.append((dst, b))
    layer.upload(src, a, expected)
    layer.upload(dst, b, bytes(LATENCY_BYTES))
    for _ in range(10):  # warm-up of the small-message path
        layer.copy(dst, b, src, a, LATENCY_BYTES)
    layer.synchronize(dst)
    start = clock()
    for _ in range(LATENCY_REPEATS):
        layer.copy(dst, b, src, a, LATENCY_BYTES)
        layer.synchronize(dst)  # one copy at a time: the time to deliver a small message, not a queue
    micros = (clock() - start) / LATENCY_REPEATS * 1e6
    got = layer.download(dst, b, LATENCY_BYTES)
    wrong, _ = compare(expected, got)
    return micros, (f"the {LATENCY_BYTES}-byte copies read back {wrong} wrong bytes" if wrong else None)


def run_copy_test(
    layer: DeviceLayer,
    size: int,
    repeats: int = 5,
    *,
    warmup: int = 1,
    clock: Callable[[], float] = clocks.monotonic,
    progress: Callable[[int], None] = lambda n: None,
) -> CopyReport:
    """Copy ``size`` bytes for every ordered pair of GPUs on ``layer`` (diagonal included) and verify each.

    ``progress(1)`` is called after each pair. A CUDA error in one pair is recorded and the next pair runs.
    Never raises for a pair's failure; the caller decides the exit status from the report.
    """
    gpus = layer.gpus()
    report = CopyReport(gpus=gpus, size_bytes=size, repeats=repeats, driver_version=layer.driver_version)
    for src in range(len(gpus)):
        for dst in range(len(gpus)):
            report.pairs.append(_copy_pair(layer, src, dst, size, repeats, _seed(src, dst), clock, warmup=warmup))
            progress(1)
    return report


def _seed(src: int, dst: int) -> int:
    return (src << 16) | (dst << 8) | 0xA5


def _raise_missing(outcome: Isolated[Any]) -> None:
    """Raise MissingError in this process when the child found no usable driver or GPU (exit 5 stays exit 5)."""
    if outcome.status == "error" and outcome.error_kind == "MissingError":
        raise MissingError(outcome.error or "no usable CUDA driver", hint=outcome.hint)


def run_isolated_copy_test(
    open_layer: Callable[[], DeviceLayer],
    size: int,
    repeats: int = 5,
    *,
    warmup: int = DEFAULT_WARMUP,
    timeout: float = DEFAULT_PAIR_TIMEOUT,
    clock: Callable[[], float] = clocks.monotonic,
    progress: Callable[[int], None] = lambda n: None,
) -> CopyReport:
    """Run the copy test with every CUDA step in a child process: one to list the GPUs, then one per pair.

    ``open_layer()`` is called in each child (this process never initialises CUDA, so forking stays safe); each
    child has ``timeout`` seconds (opening the driver, warm-up, copies, read-back, latency). A pair whose child
    hangs is recorded with the step it hung in (BLOCK) and the next pair runs; one that crashes or raises is an
    error of that pair. Raises MissingError when the driver or the GPUs are not usable (as the first child
    found); never raises for a pair's failure.
    """

    def enumerate_gpus(step: Callable[[str], None]) -> tuple[list[Gpu], str | None]:
        step("cuInit and device enumeration")
        layer = open_layer()
        try:
            return layer.gpus(), layer.driver_version
        finally:
            layer.close()

    listing = run_isolated(enumerate_gpus, timeout)
    _raise_missing(listing)
    if listing.status == HUNG:
        report = CopyReport(gpus=[], size_bytes=size, repeats=repeats, timeout=timeout)
        report.hung = f"{listing.step or 'opening the CUDA driver'} hung: no answer within {timeout:g} s (killed)"
        return report
    if listing.status != OK or listing.value is None:
        # a CUDA error or a crash while opening the driver: no pair can run (exit 4, as an in-process error was)
        raise VerificationError(
            f"{listing.step or 'opening the CUDA driver'} failed: {listing.error}",
            hint=listing.hint or "check `nvidia-smi` and `fwman audit` (driver and user space versions)",
        )
    gpus, version = listing.value
    report = CopyReport(gpus=gpus, size_bytes=size, repeats=repeats, driver_version=version, timeout=timeout)
    for src in range(len(gpus)):
        for dst in range(len(gpus)):
            report.pairs.append(_isolated_pair(open_layer, src, dst, size, repeats, warmup, timeout, clock))
            progress(1)
    return report


def _isolated_pair(
    open_layer: Callable[[], DeviceLayer],
    src: int,
    dst: int,
    size: int,
    repeats: int,
    warmup: int,
    timeout: float,
    clock: Callable[[], float],
) -> PairResult:
    """Return one pair's result from its own child process (HUNG, a crash or an error folded into the result)."""

    def one_pair(step: Callable[[str], None]) -> PairResult:
        step("cuInit and primary contexts")
        layer = open_layer()
        try:
            return _copy_pair(layer, src, dst, size, repeats, _seed(src, dst), clock, warmup=warmup, step=step)
        finally:
            step("release the contexts")
            layer.close()

    outcome = run_isolated(one_pair, timeout)
    if outcome.status == OK and outcome.value is not None:
        return outcome.value
    where = outcome.step or "starting"
    if outcome.status == HUNG:
        return PairResult(src, dst, size, repeats, warmup=warmup, hung=where,
                          error=f"hung in {where}: no answer within {timeout:g} s ({outcome.error})")  # fmt: skip
    if outcome.status == CRASHED:
        return PairResult(src, dst, size, repeats, warmup=warmup, error=f"{outcome.error} in {where}")
    return PairResult(src, dst, size, repeats, warmup=warmup, error=outcome.error or "the child failed")
