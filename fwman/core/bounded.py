"""Bounded decompression: the one place that owns how much fwman will inflate, and how deep, and for how long.

Compressed input comes from outside (a stranger's snapshot, an initramfs, a ``.ko.xz``, a vendor package): 3 MB
of concatenated gzip members inflate to gigabytes, and a gzip inside a gzip 1,500 times deep exhausted the
interpreter's recursion. Every decompression in fwman goes through :func:`decompress` (the standard library's
gzip, xz, lzma and bzip2 decoders, streamed with ``max_length`` so no more than the limit is ever held), or,
for formats that need the host's tool (zstd, lz4) and for package unpackers, is held to the same
:class:`Limits` by the caller through the kernel's file size limit. Four limits, each refused as
:class:`OverLimit` ("over N"), a ParseError, so callers that report unreadable input report this too:

- **output**: the bytes one stream may inflate to;
- **ratio**: output over input, past a floor (a small stream may legitimately inflate a lot, a large one not);
- **depth**: compressed streams nested inside each other (an initramfs has one; the kernel reads no deeper);
- **seconds**: time spent inflating one stream (monotonic clock, checked between chunks).
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from dataclasses import dataclass
from typing import Protocol

from fwman.core import clock
from fwman.core.errors import ParseError

MiB = 1024 * 1024
GiB = 1024 * MiB
#: input handed to a decoder per call, and output asked of it per call (small enough to stop early)
IN_CHUNK = 16 * MiB
OUT_CHUNK = 64 * MiB


@dataclass(frozen=True)
class Limits:
    """How far one decompression may go; see the module docstring."""

    output: int
    ratio: int
    ratio_floor: int
    depth: int
    seconds: float

    def allowed(self, input_size: int) -> int:
        """Return the most bytes a stream of ``input_size`` compressed bytes may inflate to."""
        return min(self.output, max(self.ratio_floor, self.ratio * input_size))


#: an initramfs: Debian's are tens to a few hundred MB unpacked (firmware included); 1 GiB leaves room, and
#: ratio 20 is above what real archives reach (modules and firmware compress 3 to 10 times); the kernel reads
#: one compressed stream holding cpio archives, never a compressed stream inside another
INITRAMFS = Limits(output=1 * GiB, ratio=20, ratio_floor=64 * MiB, depth=1, seconds=120.0)
#: one kernel module (.ko.xz, .ko.gz, .ko.zst): nvidia.ko is under 100 MB
MODULE = Limits(output=256 * MiB, ratio=20, ratio_floor=64 * MiB, depth=1, seconds=60.0)
#: a vendor update package and what its unpacker may write (firmware/ops/listing.py and ops/unpack.py enforce these)
PACKAGE = Limits(output=512 * MiB, ratio=1000, ratio_floor=512 * MiB, depth=1, seconds=120.0)
PACKAGE_MAX_INPUT = 256 * MiB
PACKAGE_MAX_MEMBER = 64 * MiB
PACKAGE_MAX_MEMBERS = 4096


def size_text(n: int) -> str:
    """Return ``n`` bytes as people read it: ``1 GiB``, ``64 MiB``, ``512 bytes``."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


class OverLimit(ParseError):
    """Input past one of the limits: its message reads ``over N ...`` (a ParseError, exit 4)."""

    def __init__(self, what: str, field: str, over: str) -> None:
        super().__init__(what, field, over)
        self.message = f"over {over} ({field} of {what})"
        self.args = (self.message,)


class _Decoder(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: memoryview, max_length: int = ...) -> bytes: ...


def _decoder(kind: str) -> _Decoder:
    if kind == "gzip":
        return _Zlib(zlib.decompressobj(wbits=31))
    if kind in ("xz", "lzma"):
        return lzma.LZMADecompressor()
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    raise ParseError("compressed stream", "format", f"{kind} has no decoder here")


class _Zlib:
    """zlib's decompressobj with the LZMA/BZ2 interface (``needs_input``: no unconsumed input is left)."""

    def __init__(self, d: zlib._Decompress) -> None:
        self.d = d
        self.pending = b""

    @property
    def eof(self) -> bool:
        return self.d.eof

    @property
    def unused_data(self) -> bytes:
        return self.d.unused_data

    @property
    def needs_input(self) -> bool:
        return not self.d.unconsumed_tail

    def decompress(self, data: memoryview, max_length: int = 0) -> bytes:
        return self.d.decompress(self.d.unconsumed_tail + data if self.d.unconsumed_tail else data, max_length)


_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError)


def decompress(kind: str, data: bytes, limits: Limits, what: str) -> bytes:
    """Return ``data`` (one or more concatenated ``kind`` streams, zero padding between them allowed)
    inflated, never more than ``limits`` allow.

    ``kind`` is "gzip", "xz", "lzma" or "bzip2". Raises OverLimit past the output size, ratio or time limit,
    ParseError for corrupt or truncated data.
    """
    allowed = limits.allowed(len(data))
    deadline = clock.monotonic() + limits.seconds
    out: list[bytes] = []
    total = 0
    view = memoryview(data)
    pos = 0
    field = f"{kind} stream"
    try:
        while pos < len(data):
            d = _decoder(kind)
            while not d.eof:
                if getattr(d, "needs_input", True):
                    if pos >= len(data):
                        raise ParseError(what, field, "compressed data ends before the end of its stream")
                    chunk = view[pos : pos + IN_CHUNK]  # a view: the input is not copied
                    pos += len(chunk)
                else:
                    chunk = memoryview(b"")
                piece = d.decompress(chunk, min(OUT_CHUNK, allowed - total + 1))
                total += len(piece)
                if total > allowed:
                    raise OverLimit(what, field, _over(allowed, limits, len(data)))
                out.append(piece)
                if clock.monotonic() > deadline:
                    raise OverLimit(what, field, f"{limits.seconds:g} s of decompression")
            pos -= len(d.unused_data)
            while pos < len(data) and data[pos] == 0:  # zero padding after a stream (gzip, dracut, the kernel)
                pos += 1
    except _ERRORS as e:
        raise ParseError(what, field, str(e) or type(e).__name__) from e
    return b"".join(out)


def _over(allowed: int, limits: Limits, input_size: int) -> str:
    """Return what was exceeded: the output limit, or the ratio for an input this size."""
    if allowed in (limits.output, limits.ratio_floor):
        return f"{size_text(allowed)} uncompressed"
    return f"{size_text(allowed)} uncompressed ({limits.ratio}:1 of {size_text(input_size)} compressed)"


def check_depth(depth: int, limits: Limits, what: str) -> None:
    """Raise OverLimit when a stream nested ``depth`` deep (1: the outermost) is past ``limits.depth``."""
    if depth > limits.depth:
        raise OverLimit(
            what, "compressed stream", f"{limits.depth} level{'s' if limits.depth > 1 else ''} of compression"
        )
