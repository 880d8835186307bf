"""Pure parsers for what NCCL prints: ``NCCL_DEBUG=INFO`` transport lines and nccl-tests' ``all_reduce_perf``.

Formats, as printed by real runs (public issue threads, quoted there in full):

- NCCL 2.19+ (``P2P/CUMEM``), e.g. NVIDIA/nccl#1189, NVIDIA/nccl-tests#252::

    H20-GPU-05:1789225:1789736 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM
    H20-GPU-06:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA

- one process per GPU (``P2P/IPC``, ``P2P/IPC/read``), NVIDIA/nccl#607, #952, #527 (``Channel 04 :`` without
  the ``/0``, devices named by bus id ``25[101d0]``); one process for all GPUs ``P2P/direct pointer``
  (NVIDIA/nccl-tests#213, tinygrad/open-gpu-kernel-modules#22);
- through host memory ``SHM/direct/direct`` (NVIDIA/nccl#1609, #1817, nccl-tests#166); before NCCL 2.5 the
  same lines said ``Ring 00 : 4[4] -> 3[3] via direct shared memory`` and ``via P2P/IPC`` (pytorch/pytorch#23534);
- network ``NET/Socket/0``, ``NET/IB/0/GDRDMA``;
- ``NCCL version 2.5.6+cuda10.2`` (NVIDIA/nccl#300), also as ``NCCL INFO NCCL version ...`` in newer releases.

``all_reduce_perf`` (nccl-tests): ``#``-comment header, then per size ``size count type redop root`` and, out of
place and in place, ``time algbw busbw #wrong``; it ends with ``# Out of bounds values : 0 OK`` and
``# Avg bus bandwidth    : 70.742`` (a real run: lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result).
``#wrong`` is ``N/A`` when the check is off (``-c 0``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from fwman.core.errors import ParseError

#: the transport is the rest of the line, trailing blanks stripped in code (see _WARN)
_CHANNEL = re.compile(
    r"NCCL INFO (?P<what>Channel|Ring) (?P<channel>\d+)(?:/(?P<sub>\d+))? : "
    r"(?P<src>\d+)(?:\[(?P<srcdev>[0-9a-fA-F]+)\])? -> (?P<dst>\d+)(?:\[(?P<dstdev>[0-9a-fA-F]+)\])? "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<transport>\S.*)$"
)
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
#: the rest of the line, trailing blanks stripped in code: ``(.*?)\s*$`` retried the lazy group against every
#: run of blanks, quadratic in the line's length (a 16 MiB line would take days)
_WARN = re.compile(r"NCCL WARN (.*)$")

P2P = "P2P"
SHM = "SHM"
NET = "NET"
OTHER = "other"
#: why the transport matters, for the verdict
MEANING = {
    P2P: "GPU to GPU directly over PCIe/NVLink",
    SHM: "staged through host memory (two copies, CPU memory bandwidth): what NCCL falls back to when it "
    "declines P2P for a pair",
    NET: "over the network stack (sockets or InfiniBand), even between GPUs of one host",
    OTHER: "a transport fwman does not classify",
}


def transport_class(transport: str) -> str:
    """Return P2P, SHM, NET or other for a transport as NCCL prints it (``P2P/CUMEM``, ``SHM/direct/direct``)."""
    t = transport.strip()
    if t.startswith("P2P"):
        return P2P
    if t.startswith("SHM") or t == "direct shared memory":
        return SHM
    if t.startswith(("NET", "CollNet", "COLLNET")):
        return NET
    return OTHER


@dataclass(frozen=True)
class ChannelLine:
    """One connection NCCL set up: ``channel`` from rank ``src`` to rank ``dst`` over ``transport``."""

    channel: int
    src: int
    dst: int
    transport: str  # as printed: "P2P/CUMEM", "SHM/direct/direct", "NET/IB/0/GDRDMA"
    direction: str | None = None  # "send" / "receive" on network connections

    @property
    def kind(self) -> str:
        """Return the transport class (P2P, SHM, NET, other)."""
        return transport_class(self.transport)


@dataclass
class NcclLog:
    """What an NCCL_DEBUG=INFO log says: version, connections, warnings."""

    version: str | None = None
    channels: list[ChannelLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def transports(self) -> dict[str, int]:
        """Return {transport as printed: number of connections}, sorted by transport."""
        return dict(sorted(Counter(c.transport for c in self.channels).items()))

    def classes(self) -> dict[str, int]:
        """Return {P2P/SHM/NET/other: number of connections}."""
        return dict(sorted(Counter(c.kind for c in self.channels).items()))

    def summary(self) -> str | None:
        """Return the transport classes used, ``P2P`` or ``P2P+SHM``; None when no connection was made."""
        kinds = self.classes()
        return "+".join(k for k in (P2P, SHM, NET, OTHER) if k in kinds) or None


def parse_nccl_log(text: str) -> NcclLog:
    """Return what ``text`` (any mix of program output and NCCL_DEBUG=INFO lines) says about NCCL.

    Never raises: lines that are not NCCL's are ignored, so any output can be given.
    """
    log = NcclLog()
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        if log.version is None:
            m = _VERSION.search(line)
            if m:
                log.version = m.group(1)
                continue
        m = _CHANNEL.search(line)
        if m:
            log.channels.append(
                ChannelLine(int(m["channel"]), int(m["src"]), int(m["dst"]), m["transport"].rstrip(), m["dir"])
            )
            continue
        w = _WARN.search(line)
        if w:
            log.warnings.append(w.group(1).rstrip())
    return log


@dataclass(frozen=True)
class PerfRow:
    """One message size of ``all_reduce_perf``: out-of-place and in-place results (``wrong`` None for N/A)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None


@dataclass
class PerfReport:
    """A whole ``all_reduce_perf`` run."""

    rows: list[PerfRow] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None
    devices: list[str] = field(default_factory=list)  # the "#  Rank  0 ... device  0 [0000:04:00] NAME" lines

    @property
    def wrong(self) -> int | None:
        """Return the total of the #wrong columns; None when the run did not check (N/A everywhere)."""
        values = [v for r in self.rows for v in (r.oop_wrong, r.ip_wrong) if v is not None]
        return sum(values) if values else None

    @property
    def peak_busbw(self) -> float | None:
        """Return the highest bus bandwidth of any row (GB/s), None without rows."""
        return max((max(r.oop_busbw, r.ip_busbw) for r in self.rows), default=None)


_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
#: one blank after the rank number, then anything: ``\s+.*`` split a run of blanks every possible way
_RANK = re.compile(r"^#\s+Rank\s+\d+\s.*device\s+\d+\s+\[[0-9a-fA-F:.]+\]")


def _wrong(text: str, lineno: int) -> int | None:
    if text == "N/A":
        return None
    if not text.isdigit():
        raise ParseError("all_reduce_perf", f"line {lineno}", f"#wrong is {text[:12]!r}", lineno)
    return int(text)


def _float(text: str, lineno: int) -> float:
    try:
        return float(text)
    except ValueError as e:
        raise ParseError("all_reduce_perf", f"line {lineno}", f"not a number: {text[:12]!r}", lineno) from e


def _half(cols: list[str], lineno: int) -> tuple[float, float, float, int | None]:
    """Return ``time algbw busbw #wrong`` of one half (out of place, in place) of a data row. Raises ParseError."""
    return _float(cols[0], lineno), _float(cols[1], lineno), _float(cols[2], lineno), _wrong(cols[3], lineno)


def parse_all_reduce_perf(text: str) -> PerfReport:
    """Return the rows and summary of nccl-tests' ``all_reduce_perf`` output (NCCL_DEBUG lines may be mixed in).

    Raises ParseError for a data row of the wrong shape, or output with neither a data row nor the summary.
    """
    report = PerfReport()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        if line.startswith("#"):
            if m := _OOB.match(line):
                report.out_of_bounds = int(m.group(1))
            elif m := _AVG.match(line):
                report.avg_busbw = float(m.group(1))
            elif _RANK.match(line):
                report.devices.append(line.lstrip("#").strip())
            continue
        fields = line.split()
        if not fields[0].isdigit():
            continue  # other program output
        if len(fields) != 13:
            raise ParseError("all_reduce_perf", f"line {lineno}", f"{len(fields)} columns, expected 13", lineno)
        size, count = int(fields[0]), fields[1]
        if not count.isdigit():
            raise ParseError("all_reduce_perf", f"line {lineno}", "element count is not a number", lineno)
        report.rows.append(
            PerfRow(size, int(count), fields[2], fields[3], *_half(fields[5:9], lineno), *_half(fields[9:13], lineno))
        )
    if not report.rows and report.avg_busbw is None:
        raise ParseError("all_reduce_perf", "output", "no result rows and no 'Avg bus bandwidth' line")
    return report
