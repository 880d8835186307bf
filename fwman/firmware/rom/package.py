"""VBIOS images inside vendor update packages, found by structure in bytes, and the one for a card.

Card makers ship Resizable BAR firmware inside Windows update programs (a PE file with the images as resources, a
self-extracting 7-Zip or ZIP archive), not as ``.rom`` files. This module is pure: it looks for images by structure in
bytes it is given (the package itself, or a file unpacked from it by :mod:`fwman.firmware.ops.unpack`, which owns
running the unpacker):

* a file that parses as a whole is one image, extent = the file (a stripped or truncated file stays what it
  is: never taken, never cut down to a chain);
* inside a larger blob, an x86 option-ROM image (``55 AA``, a PCIR of vendor 10DE, code type 0) opens a chain;
  the chain walk (:func:`fwman.firmware.rom.parse.parse_rom`) gives its end; when padding (all 0xFF or all
  0x00) after it reaches a multiple of 64 KiB (vendor images are padded, typically to 1 MiB), chain plus
  padding is the image: extent = structure; a chain followed by anything else may have been cut from a dump,
  so it is listed but not taken;
* an ``NVGI`` header inside a blob starts a full dump whose end nothing in the bytes states: it is listed, but
  never taken (the bytes after its chain could be anything).

Images with the same option-ROM chain are one image (an archive member and the same bytes found again in the package);
the one with the surest extent is kept (:func:`dedupe_images`). :func:`select_image` takes the single image whose
subsystem (and device, version where given) match the target card, refusing none or more than one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from fwman.core.errors import BlockedError, ParseError, VerificationError
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.rom.parse import parse_rom

#: raw candidates tried per blob (each is bounded work; real packages hold a handful of images)
MAX_CANDIDATES = 256
#: raw ``55 AA`` / ``NVGI`` hits looked at per blob (a few million cheap checks; filler beyond is noted, not read)
MAX_MARKER_HITS = 1 << 20
#: a raw option ROM counts as a whole vendor image only when padding takes it to a multiple of this
PADDED_TO = 64 * 1024
#: parses that are not an image to take from a package: a container (an archive whose member is a ROM parses
#: as one) and a truncated chain (cut off by the next candidate)
NOT_A_FILE_IMAGE = (RomKind.CONTAINER, RomKind.TRUNCATED)

Extent = Literal["file", "structure", "unknown"]


@dataclass(frozen=True)
class EmbeddedImage:
    """One VBIOS image found in a package: where, how sure its extent is, its bytes and parsed model."""

    origin: str  # "<package>", or the unpacked member's path inside the archive
    offset: int  # inside ``origin``
    extent: Extent
    data: bytes
    rom: RomImage

    @property
    def takeable(self) -> bool:
        """Return True when the image may be taken as a flash source: known extent, flashable kind."""
        return self.extent != "unknown" and self.rom.flashable

    def describe(self) -> str:
        """Return one line naming the image: where, subsystem, version, kind."""
        where = self.origin if self.offset == 0 else f"{self.origin} @0x{self.offset:X}"
        sub = self.rom.subsystem or self.rom.nvgi_subsystem or "no subsystem"
        version = self.rom.version or "no version"
        why = "" if self.takeable else (" (end unknown: not taken)" if self.extent == "unknown" else " (not flashable)")
        return f"{where}: {self.rom.vendor_id}:{self.rom.device_id} {sub} {version} {self.rom.kind.value}{why}"


@dataclass
class PackageScan:
    """Every image found in a package, and how it was opened."""

    path: str
    size: int
    unpacker: str | None  # "7zz", "bsdtar", or None when the package was not an archive (or is a ROM)
    members: int  # files unpacked
    images: list[EmbeddedImage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _file_image(data: bytes) -> RomImage | None:
    """Return the parse of ``data`` when it is an image a file can hold, None when it does not parse or is of a
    kind no file is (:data:`NOT_A_FILE_IMAGE`)."""
    try:
        rom = parse_rom(data)
    except ParseError:
        return None
    return None if rom.kind in NOT_A_FILE_IMAGE else rom


def _clean_slice(data: bytes, start: int, limit: int) -> int:
    """Return the end of the padding run (all 0x00 or all 0xFF) starting at ``start``, at most ``limit``."""
    if start >= limit:
        return start
    pad = data[start]
    if pad not in (0x00, 0xFF):
        return start
    # lstrip finds the first non-padding byte in C (bytes has no negated find)
    run = data[start:limit]
    return start + len(run) - len(run.lstrip(bytes([pad])))


def _x86_start(data: bytes, off: int) -> bool:
    """Return True when ``off`` holds ``55 AA`` with a PCIR (vendor 10DE, code type 0x00) where +0x18 points."""
    if off + 0x1A > len(data):
        return False
    ptr = int.from_bytes(data[off + 0x18 : off + 0x1A], "little")
    p = off + ptr
    if ptr < 0x1A or p + 0x18 > len(data) or data[p : p + 4] not in (b"PCIR", b"NPDS", b"RGIS"):
        return False
    return data[p + 4 : p + 6] == b"\xde\x10" and data[p + 0x14] == 0x00


def _candidates(
    data: bytes, marker: bytes, keep: Callable[[bytes, int], bool] | None = None, limit: int = MAX_CANDIDATES
) -> tuple[list[int], int | None]:
    """Return (the offsets of ``marker`` in ``data`` that ``keep`` accepts, where the search stopped or None).

    At most ``limit`` offsets are kept; the search stops at the next accepted one past them, or after
    MAX_MARKER_HITS raw hits (filler such as ``55 AA 55 AA ...``), and returns where: a search is never cut
    silently (it was: rejected filler counted toward the limit, and a real image further on was never seen,
    with no note). Only accepted offsets count toward ``limit``; the bounded work is the parse of each.
    """
    out: list[int] = []
    at, hits = data.find(marker), 0
    while at != -1:
        hits += 1
        if hits > MAX_MARKER_HITS:
            return out, at
        if keep is None or keep(data, at):
            if len(out) == limit:
                return out, at
            out.append(at)
        at = data.find(marker, at + 1)
    return out, None


def scan_blob(data: bytes, origin: str) -> tuple[list[EmbeddedImage], list[str]]:
    """Return (images, notes): every VBIOS image found by structure in ``data`` (see the module doc).

    Never raises for bad input: bytes that do not parse are simply not an image.
    """
    notes: list[str] = []
    whole = _file_image(data)  # an archive whose member is a ROM parses as a container: look inside it instead
    if whole is not None:
        # the file is a ROM (flashable or not): never cut a chain out of it (a stripped dump would become a
        # "clean" option ROM that way)
        return [EmbeddedImage(origin, 0, "file", data, whole)], notes

    images: list[EmbeddedImage] = []
    found_nvgi, nvgi_stopped = _candidates(data, b"NVGI")
    seen = set(found_nvgi)
    # the Ampere copy of the header at +0x2000 belongs to the dump that starts 0x2000 earlier
    nvgi = {o for o in found_nvgi if o - 0x2000 not in seen} if nvgi_stopped is None else set()
    x86, x86_stopped = _candidates(data, b"\x55\xaa", _x86_start)
    starts = sorted(nvgi | set(x86))
    covered_until = -1
    for i, off in enumerate(starts):
        if off < covered_until:
            continue  # the x86 image of a chain already found
        limit = starts[i + 1] if i + 1 < len(starts) else len(data)
        if off in nvgi:
            limit = next((s for s in starts[i + 1 :] if s in nvgi), len(data))
        # None: not a ROM, or cut off by the next candidate (or lying about its length): not an image of this package
        rom = _file_image(data[off:limit])
        if rom is None:
            continue
        if off in nvgi:
            images.append(EmbeddedImage(origin, off, "unknown", data[off:limit], rom))
            covered_until = off + rom.chain_offset + rom.chain_length
            continue
        run = _clean_slice(data, off + rom.chain_length, limit) - off
        aligned = run - run % PADDED_TO
        # a vendor image is its chain padded to a flash-sized boundary; a chain followed by anything else may
        # have been cut from a dump (card data after it), so its end is not known
        extent: Extent = "structure" if aligned >= rom.chain_length else "unknown"
        piece = data[off : off + (aligned if extent == "structure" else rom.chain_length)]
        try:
            rom = parse_rom(piece)
        except ParseError:  # pragma: no cover - the same chain parsed a moment ago
            continue
        images.append(EmbeddedImage(origin, off, extent, piece, rom))
        covered_until = off + rom.chain_length
    if nvgi_stopped is not None:
        notes.append(f"{origin}: more than {MAX_CANDIDATES} NVGI headers: none examined (not an update package)")
    if x86_stopped is not None:
        notes.append(
            f"{origin}: the search for option ROMs stopped at offset 0x{x86_stopped:X} (over {MAX_CANDIDATES} "
            f"candidates or {MAX_MARKER_HITS:,} 55 AA markers): the rest were not examined"
        )
    return images, notes


def dedupe_images(images: Iterable[EmbeddedImage]) -> list[EmbeddedImage]:
    """Return one image per option-ROM chain, the surest extent first (file, then structure, then unknown)."""
    rank = {"file": 0, "structure": 1, "unknown": 2}
    best: dict[str, EmbeddedImage] = {}  # a replaced value keeps its key's place: first-seen order
    for image in images:
        key = image.rom.chain_sha256
        if key not in best or rank[image.extent] < rank[best[key].extent]:
            best[key] = image
    return list(best.values())


def matches(image: EmbeddedImage, subsystem: str, device: str | None = None, version: str | None = None) -> bool:
    """Return True when ``image`` is for ``subsystem`` (``vvvv:dddd``), and ``device`` / ``version`` if given."""
    sub = image.rom.subsystem or image.rom.nvgi_subsystem
    if sub != subsystem.lower():
        return False
    if device is not None and image.rom.device_id != device.lower():
        return False
    return version is None or (image.rom.version or "").upper() == version.upper()


def select_image(
    scan: PackageScan, subsystem: str, device: str | None = None, version: str | None = None
) -> EmbeddedImage:
    """Return the one image in ``scan`` for the card (``subsystem``, and ``device``/``version`` when given).

    Raises VerificationError when the file holds no VBIOS image or none for the card; BlockedError when more
    than one matches (fwman does not pick) or the one that matches cannot be taken (end unknown, not flashable).
    """
    if not scan.images:
        raise VerificationError(
            f"{scan.path}: no VBIOS image found in it"
            + (f" ({scan.members} file(s) unpacked)" if scan.members else ""),
            hint="; ".join(scan.notes) or "is this the card maker's firmware update for this board?",
        )
    listing = "; ".join(i.describe() for i in scan.images)
    want = f"{subsystem}" + (f" device {device}" if device else "") + (f" version {version}" if version else "")
    hits = [i for i in scan.images if matches(i, subsystem, device, version)]
    if not hits:
        raise VerificationError(f"{scan.path}: no image for {want}", hint=f"the package holds: {listing}")
    if len(hits) > 1:
        raise BlockedError(
            f"{scan.path}: {len(hits)} different images for {want}: fwman does not pick one",
            hint="name the version (BOARD/VERSION); the package holds: " + "; ".join(i.describe() for i in hits),
        )
    hit = hits[0]
    if not hit.takeable:
        raise BlockedError(
            f"{scan.path}: the image for {want} cannot be taken: {hit.describe()}",
            hint="unpack the package by hand and give fwman the image file itself",
        )
    return hit
