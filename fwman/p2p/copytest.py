"""The P2P copy test: every ordered pair of GPUs (and each GPU with itself), every byte compared.

:func:`run_copy_test` drives a :class:`~fwman.p2p.device.DeviceLayer` (real CUDA, or the tests' in-memory
one); :class:`CopyReport` holds the results and the verdict, and is pure. Bad P2P setups are known to corrupt
data silently, so a copy counts only when the bytes read back are exactly the bytes written.

Bandwidth is bytes copied per second of wall clock, in GB/s (10^9 bytes), over ``repeats`` copies after one
untimed warm-up copy, with the context synchronised before the clock starts and before it stops.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fwman.core import clock as clocks
from fwman.core.errors import FwmanError
from fwman.p2p.device import DeviceLayer, Gpu

MIB = 1024 * 1024
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

    @property
    def gbps(self) -> float | None:
        """Return the bandwidth in GB/s (10^9 bytes per second), None when not measured."""
        if self.seconds is None or self.seconds <= 0 or self.error:
            return None
        return self.size_bytes * self.repeats / self.seconds / 1e9

    @property
    def ok(self) -> bool:
        """Return True when the copy ran and every byte matched."""
        return self.error is None and self.corrupted_bytes == 0

    @property
    def label(self) -> str:
        """Return ``GPU0 -> GPU1``."""
        return f"GPU{self.src} -> GPU{self.dst}"


@dataclass
class CopyReport:
    """All pairs of one run."""

    gpus: list[Gpu]
    size_bytes: int
    repeats: int
    driver_version: str | None = None
    pairs: list[PairResult] = field(default_factory=list)

    def pair(self, src: int, dst: int) -> PairResult | None:
        """Return the result for ``src -> dst``, None when it was not run."""
        return next((p for p in self.pairs if p.src == src and p.dst == dst), None)

    @property
    def corrupted(self) -> list[PairResult]:
        """Return the copies that read back different bytes."""
        return [p for p in self.pairs if p.corrupted_bytes]

    @property
    def failed(self) -> list[PairResult]:
        """Return the copies a CUDA call failed in."""
        return [p for p in self.pairs if p.error]

    @property
    def ok(self) -> bool:
        """Return True when every copy ran and verified."""
        return bool(self.pairs) and all(p.ok for p in self.pairs)

    def matrix(self) -> list[list[str]]:
        """Return the bandwidth matrix as text cells (row: from, column: to).

        ``24.6`` GB/s over direct peer access; ``24.6*`` staged through host memory; ``BAD`` corrupted bytes;
        ``ERR`` a CUDA call failed; ``-`` not run.
        """
        n = len(self.gpus)
        rows = []
        for src in range(n):
            row = []
            for dst in range(n):
                p = self.pair(src, dst)
                if p is None:
                    row.append("-")
                elif p.error:
                    row.append("ERR")
                elif p.corrupted_bytes:
                    row.append("BAD")
                else:
                    value = p.gbps
                    row.append(("?" if value is None else f"{value:.1f}") + ("" if p.direct else "*"))
            rows.append(row)
        return rows

    def verdict(self) -> str:
        """Return one line: every byte verified, or what failed first."""
        if self.ok:
            staged = [p for p in self.pairs if not p.direct]
            note = f"; {len(staged)} staged through host memory (no direct peer access)" if staged else ""
            copies = f"{len(self.pairs)} cop{'ies' if len(self.pairs) != 1 else 'y'}"
            return f"every byte verified: {copies} of {_size(self.size_bytes)}{note}"
        problems = []
        if self.corrupted:
            first = self.corrupted[0]
            problems.append(
                f"{len(self.corrupted)} cop{'ies' if len(self.corrupted) > 1 else 'y'} corrupted data "
                f"(first: {first.label}, {first.corrupted_bytes} bytes wrong from offset "
                f"0x{first.first_bad_offset or 0:x})"
            )
        if self.failed:
            first = self.failed[0]
            problems.append(
                f"{len(self.failed)} cop{'ies' if len(self.failed) > 1 else 'y'} failed (first: {first.label}: "
                f"{first.error})"
            )
        return "FAILED: " + "; ".join(problems)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload of ``fwman p2p test --json``."""
        return {
            "cuda_driver": self.driver_version,
            "size_bytes": self.size_bytes,
            "repeats": self.repeats,
            "gpus": [asdict(g) for g in self.gpus],
            "pairs": [{**asdict(p), "gbps": None if p.gbps is None else round(p.gbps, 3)} for p in self.pairs],
            "matrix_gbps": self.matrix(),
            "ok": self.ok,
            "verdict": self.verdict(),
        }


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} bytes"


def _copy_pair(
    layer: DeviceLayer, src: int, dst: int, size: int, repeats: int, seed: int, clock: Callable[[], float]
) -> PairResult:
    """Run one copy and return its result; a CUDA error becomes the result's ``error``."""
    peer_access: bool | None = None
    direct = src == dst
    buffers: list[tuple[int, int]] = []
    try:
        if src != dst:
            peer_access = layer.can_access_peer(dst, src) and layer.can_access_peer(src, dst)
            if peer_access:
                layer.enable_peer_access(dst, src)
                layer.enable_peer_access(src, dst)
                direct = True
        expected = pattern(size, seed)
        a = layer.alloc(src, size)
        buffers.append((src, a))
        b = layer.alloc(dst, size)
        buffers.append((dst, b))
        layer.upload(src, a, expected)
        # fill the target with other bytes, so a copy that does nothing cannot pass on leftovers
        layer.upload(dst, b, pattern(size, seed ^ 0x5A5A5A5A))
        layer.copy(dst, b, src, a, size)  # warm-up: first-touch and peer mappings are not timed
        layer.synchronize(src)
        layer.synchronize(dst)
        start = clock()
        for _ in range(repeats):
            layer.copy(dst, b, src, a, size)
        layer.synchronize(src)
        layer.synchronize(dst)
        seconds = clock() - start
        wrong, first = compare(expected, layer.download(dst, b, size))
        return PairResult(src, dst, size, repeats, seconds, peer_access, direct, wrong, first)
    except FwmanError as e:
        return PairResult(src, dst, size, repeats, None, peer_access, direct, error=e.message)
    finally:
        for device, ptr in reversed(buffers):
            # the copy's own error (if any) is what the user needs to see, not a failed free after it
            with contextlib.suppress(FwmanError):
                layer.free(device, ptr)


def run_copy_test(
    layer: DeviceLayer,
    size: int,
    repeats: int = 5,
    *,
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
            seed = (src << 16) | (dst << 8) | 0xA5
            report.pairs.append(_copy_pair(layer, src, dst, size, repeats, seed, clock))
            progress(1)
    return report
