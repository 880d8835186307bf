"""VBIOS images inside vendor update packages: find every one by its structure, pick the one for a card.

Card makers ship Resizable BAR firmware inside Windows update programs (a PE file with the images as
resources, a self-extracting 7-Zip or ZIP archive), not as ``.rom`` files. fwman never runs such a program.
It unpacks archives with a well-kept unpacker (7-Zip's ``7zz``, or libarchive's ``bsdtar``) run through the
Host as a command, then looks for images by structure in every unpacked file and in the package bytes
themselves:

* a file that parses as a whole is one image, extent = the file (a stripped or truncated file stays what it
  is: never taken, never cut down to a chain);
* inside a larger blob, an x86 option-ROM image (``55 AA``, a PCIR of vendor 10DE, code type 0) opens a chain;
  the chain walk (:func:`fwman.firmware.rom.parse.parse_rom`) gives its end; when padding (all 0xFF or all
  0x00) after it reaches a multiple of 64 KiB (vendor images are padded, typically to 1 MiB), chain plus
  padding is the image: extent = structure; a chain followed by anything else may have been cut from a dump,
  so it is listed but not taken;
* an ``NVGI`` header inside a blob starts a full dump whose end nothing in the bytes states: it is listed, but
  never taken (the bytes after its chain could be anything).

Images with the same option-ROM chain are one image (an archive member and the same bytes found again in the
package); the one with the surest extent is kept. :func:`select_image` takes the single image whose subsystem
(and device, version where given) match the target card, refusing none or more than one.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from fwman.core.errors import BlockedError, FwmanError, ParseError, VerificationError
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.host.base import Host

#: the largest package read (vendor update programs run to tens of MB)
MAX_PACKAGE = 256 * 1024 * 1024
#: the most bytes an archive may unpack to, and the most one unpacked file may hold
MAX_UNPACKED = 512 * 1024 * 1024
MAX_MEMBER = 64 * 1024 * 1024
#: the most unpacked files looked at (an archive of millions of tiny files is not an update package)
MAX_MEMBERS = 4096
#: raw candidates tried per blob (each is bounded work; real packages hold a handful of images)
MAX_CANDIDATES = 256
UNPACK_TIMEOUT = 120.0
#: a raw option ROM counts as a whole vendor image only when padding takes it to a multiple of this
PADDED_TO = 64 * 1024
_SIZE_LINE = re.compile(r"^Size = (\d+)$", re.M)

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


def _candidates(data: bytes, marker: bytes, limit: int = MAX_CANDIDATES) -> list[int]:
    out: list[int] = []
    at = data.find(marker)
    while at != -1 and len(out) < limit * 64:  # bounded: hostile input cannot make the scan quadratic
        out.append(at)
        at = data.find(marker, at + 1)
    return out


def scan_blob(data: bytes, origin: str) -> tuple[list[EmbeddedImage], list[str]]:
    """Return (images, notes): every VBIOS image found by structure in ``data`` (see the module doc).

    Never raises for bad input: bytes that do not parse are simply not an image.
    """
    notes: list[str] = []
    try:
        whole = parse_rom(data)
    except ParseError:
        whole = None
    if whole is not None:
        # the file is a ROM (flashable or not): never cut a chain out of it (a stripped dump would become a
        # "clean" option ROM that way)
        return [EmbeddedImage(origin, 0, "file", data, whole)], notes

    images: list[EmbeddedImage] = []
    found_nvgi = _candidates(data, b"NVGI")
    seen = set(found_nvgi)
    # the Ampere copy of the header at +0x2000 belongs to the dump that starts 0x2000 earlier
    nvgi = {o for o in found_nvgi if o - 0x2000 not in seen} if len(found_nvgi) <= MAX_CANDIDATES else set()
    x86 = [o for o in _candidates(data, b"\x55\xaa") if _x86_start(data, o)][:MAX_CANDIDATES]
    starts = sorted(nvgi | set(x86))
    covered_until = -1
    for i, off in enumerate(starts):
        if off < covered_until:
            continue  # the x86 image of a chain already found
        limit = starts[i + 1] if i + 1 < len(starts) else len(data)
        if off in nvgi:
            limit = next((s for s in starts[i + 1 :] if s in nvgi), len(data))
            try:
                rom = parse_rom(data[off:limit])
            except ParseError:
                continue
            images.append(EmbeddedImage(origin, off, "unknown", data[off:limit], rom))
            covered_until = off + rom.chain_offset + rom.chain_length
            continue
        try:
            rom = parse_rom(data[off:limit])
        except ParseError:
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
    if len(found_nvgi) > MAX_CANDIDATES:
        notes.append(f"{origin}: more than {MAX_CANDIDATES} NVGI headers: none examined (not an update package)")
    if len(x86) >= MAX_CANDIDATES:
        notes.append(f"{origin}: more than {MAX_CANDIDATES} option-ROM candidates: the rest were not examined")
    return images, notes


def _dedupe(images: Iterable[EmbeddedImage]) -> list[EmbeddedImage]:
    """Return one image per option-ROM chain, the surest extent first (file, then structure, then unknown)."""
    rank = {"file": 0, "structure": 1, "unknown": 2}
    best: dict[str, EmbeddedImage] = {}
    order: list[str] = []
    for image in images:
        key = image.rom.chain_sha256
        if key not in best:
            order.append(key)
            best[key] = image
        elif rank[image.extent] < rank[best[key].extent]:
            best[key] = image
    return [best[k] for k in order]


#: where scratch directories for unpacking go, on the machine the package is on
SCRATCH_PARENT = "/tmp"


@contextmanager
def _scratch(host: Host) -> Iterator[str]:
    """Yield a fresh private directory (0700, unguessable name) on ``host``; remove it and its contents after.

    Made and removed through the Host like every other file and command, so the package's contents never
    outlive the scan.
    """
    path = f"{SCRATCH_PARENT}/fwman-unpack-{secrets.token_hex(8)}"
    if host.exists(path):  # pragma: no cover - 64 random bits
        raise FwmanError(f"{path} exists: refusing to unpack into a directory fwman did not make")
    host.mkdir(path, mode=0o700)
    try:
        yield path
    finally:
        host.run(["rm", "-rf", "--", path], timeout=UNPACK_TIMEOUT)


def _unpacker(host: Host) -> str | None:
    for tool in ("7zz", "bsdtar"):
        if host.which(tool):
            return tool
    return None


def _unpacked_size(host: Host, tool: str, path: str) -> int | None:
    """Return the total size the archive says it unpacks to, or None when ``tool`` does not open it."""
    if tool == "7zz":
        listing = host.run(["7zz", "l", "-slt", "-ba", "--", path], timeout=UNPACK_TIMEOUT)
        if not listing.ok:
            return None
        return sum(int(m) for m in _SIZE_LINE.findall(listing.stdout))
    listing = host.run(["bsdtar", "-tvf", path], timeout=UNPACK_TIMEOUT)
    if not listing.ok:
        return None
    total = 0
    for line in listing.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[4].isdigit():
            total += int(parts[4])
    return total


def _unpack(host: Host, tool: str, path: str, into: str) -> None:
    """Unpack archive ``path`` into directory ``into``. Raises FwmanError with the tool's message on failure."""
    if tool == "7zz":
        # -snl- (the default) stores links as files; -y answers overwrite prompts; stdin is closed: an
        # encrypted archive fails instead of waiting for a password
        argv = ["7zz", "x", "-y", "-bd", "-bso0", "-bsp0", f"-o{into}", "--", path]
    else:
        argv = ["bsdtar", "-x", "--no-same-owner", "--no-same-permissions", "-C", into, "-f", path]
    result = host.run(argv, timeout=UNPACK_TIMEOUT)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise FwmanError(
            f"{tool} could not unpack {path}: {detail[-1] if detail else f'exit status {result.rc}'}",
            hint="unpack it by hand and give fwman the .rom file",
        )


def _members(host: Host, root: str) -> list[str]:
    """Return the regular files under ``root`` (links are never followed), at most MAX_MEMBERS."""
    out: list[str] = []
    stack = [root]
    while stack and len(out) < MAX_MEMBERS:
        here = stack.pop()
        for name in sorted(host.listdir(here)):
            p = f"{here}/{name}"
            if host.is_link(p):
                continue
            if host.is_dir(p):
                stack.append(p)
            else:
                out.append(p)
    return sorted(out)


def scan_package(host: Host, path: str, data: bytes | None = None) -> PackageScan:
    """Return every VBIOS image in the file ``path`` on ``host``: the file itself, its unpacked members, or both.

    ``host`` is the machine the file is on and runs the unpacker (the CLI passes the local machine for a file the
    user names); ``data`` is the file's content when the caller has read it already (through the user-file
    door), else it is read through ``host``. Nothing in the package is executed: archives are opened by ``7zz``
    or ``bsdtar``. Raises MissingError when the file is absent, VerificationError when it or its unpacked
    contents are over the size limits, FwmanError when the unpacker fails on a file it recognised as an archive.
    """
    if data is None:
        data = host.read_bytes(path, limit=MAX_PACKAGE + 1)
    if len(data) > MAX_PACKAGE:
        raise VerificationError(f"{path}: larger than {MAX_PACKAGE // (1024 * 1024)} MiB: not an update package")
    images, notes = scan_blob(data, os.path.basename(path))
    scan = PackageScan(path, len(data), None, 0, [], notes)
    if images and images[0].extent == "file":
        scan.images = images
        return scan  # a plain .rom: nothing to unpack
    tool = _unpacker(host)
    found: list[EmbeddedImage] = []
    if tool is None:
        scan.notes.append("no unpacker installed (7zz from Debian's 7zip, or bsdtar): only the raw bytes were searched")
    else:
        total = _unpacked_size(host, tool, path)
        if total is None:
            scan.notes.append(f"{tool} does not open it as an archive: only the raw bytes were searched")
        elif total > MAX_UNPACKED:
            raise VerificationError(
                f"{path}: unpacks to {total:,} bytes, over the {MAX_UNPACKED // (1024 * 1024)} MiB limit"
            )
        else:
            scan.unpacker = tool
            # fwman's own scratch space on the machine the package is on; removed before returning
            with _scratch(host) as scratch:
                _unpack(host, tool, path, scratch)
                members = _members(host, scratch)
                scan.members = len(members)
                for member in members:
                    if host.stat_size(member) > MAX_MEMBER:
                        scan.notes.append(f"{member[len(scratch) + 1 :]}: over {MAX_MEMBER} bytes: not searched")
                        continue
                    blob = host.read_bytes(member, limit=MAX_MEMBER)
                    more, more_notes = scan_blob(blob, member[len(scratch) + 1 :])
                    found.extend(more)
                    scan.notes.extend(more_notes)
    scan.images = _dedupe([*found, *images])
    return scan


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
