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

An archive is never trusted about itself. The unpacker gets a private copy of the bytes fwman read (and its
caller hashed), never the file again; its listing is checked first (no FIFO, device node, socket or link out
of the tree; at most MAX_MEMBERS members); and the size limit is the kernel's (``ulimit -f``): one unpack into
a single size-limited file measures the real total, then the real unpack runs under the same per-file limit.

Images with the same option-ROM chain are one image (an archive member and the same bytes found again in the
package); the one with the surest extent is kept. :func:`select_image` takes the single image whose subsystem
(and device, version where given) match the target card, refusing none or more than one.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from fwman.core import bounded
from fwman.core.errors import BlockedError, FwmanError, MissingError, ParseError, VerificationError
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.rom.parse import parse_rom
from fwman.host.base import CommandResult, Host

# the limits are fwman.core.bounded's (the one place that owns decompression limits): the largest package read
# (vendor update programs run to tens of MB); the most bytes an archive may unpack to (enforced while
# unpacking), and the most one unpacked file may hold and still be searched; the most members an archive may
# list (an archive of millions of tiny files is not an update package)
MAX_PACKAGE = bounded.PACKAGE_MAX_INPUT
MAX_UNPACKED = bounded.PACKAGE.output
MAX_MEMBER = bounded.PACKAGE_MAX_MEMBER
MAX_MEMBERS = bounded.PACKAGE_MAX_MEMBERS
#: raw candidates tried per blob (each is bounded work; real packages hold a handful of images)
MAX_CANDIDATES = 256
#: raw ``55 AA`` / ``NVGI`` hits looked at per blob (a few million cheap checks; filler beyond is noted, not read)
MAX_MARKER_HITS = 1 << 20
UNPACK_TIMEOUT = bounded.PACKAGE.seconds
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
    try:
        whole: RomImage | None = parse_rom(data)
    except ParseError:
        whole = None
    if whole is not None and whole.kind in NOT_A_FILE_IMAGE:
        whole = None  # an archive whose member is a ROM parses as a container: look inside it instead
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
            try:
                rom = parse_rom(data[off:limit])
            except ParseError:
                continue
            if rom.kind in NOT_A_FILE_IMAGE:
                continue
            images.append(EmbeddedImage(origin, off, "unknown", data[off:limit], rom))
            covered_until = off + rom.chain_offset + rom.chain_length
            continue
        try:
            rom = parse_rom(data[off:limit])
        except ParseError:
            continue
        if rom.kind in NOT_A_FILE_IMAGE:
            continue  # cut off by the next candidate (or lying about its length): not an image of this package
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
#: the shell that puts the file size limit on the unpacker (a POSIX shell: ``ulimit -f`` counts 512-byte blocks)
SHELL = "/bin/sh"
#: the listing types that may be unpacked: regular files, directories, symbolic and hard links (links only when
#: their target stays inside the archive's tree); FIFOs, devices and sockets are refused before unpacking
_SAFE_KINDS = frozenset("-dlh")
_KIND_NAMES = {"p": "a FIFO", "c": "a character device", "b": "a block device", "s": "a socket"}
_SIZE_LIMIT_FAILED = 125  # the status the wrapper exits with when it cannot set the limit


@dataclass(frozen=True)
class ListedMember:
    """One member as the unpacker lists it, before anything is unpacked."""

    name: str
    #: the type character ``ls -l`` would show: ``-`` file, ``d`` directory, ``l`` symbolic link, ``h`` hard
    #: link, ``p`` FIFO, ``c``/``b`` device, ``s`` socket
    kind: str
    #: the size the archive states (a claim: a gzip states its size modulo 2**32)
    size: int
    #: the link's target as listed; for bsdtar every reading its line allows (a name may hold " -> " too)
    targets: tuple[str, ...] = ()


def parse_7zz_listing(text: str) -> list[ListedMember]:
    """Return the members of ``7zz l -slt -ba`` output (blocks of ``Key = value`` lines, each from ``Path``).

    Pure and lenient: a line it does not know is skipped, so any text gives a list (never raises).
    """
    members: list[ListedMember] = []
    fields: dict[str, str] = {}

    def close() -> None:
        if "Path" not in fields:
            return
        size = fields.get("Size", "")
        mode = fields.get("Mode", "")
        attributes = fields.get("Attributes", "").split()
        # the unix mode string is "Mode = -rw-r--r--" (tar) or the last word of "Attributes = A -rw-r--r--"
        if not mode and attributes and len(attributes[-1]) == 10:
            mode = attributes[-1]
        kind = mode[:1] if mode[:1] in "-dlpcbs" and mode else ("d" if fields.get("Folder") == "+" else "-")
        targets: tuple[str, ...] = ()
        if fields.get("Symbolic Link"):
            kind, targets = "l", (fields["Symbolic Link"],)
        elif fields.get("Hard Link"):
            kind, targets = "h", (fields["Hard Link"],)
        members.append(ListedMember(fields["Path"], kind, int(size) if size.isdigit() else 0, targets))

    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if not sep:
            continue
        if key == "Path":
            close()
            fields = {}
        fields[key] = value
    close()
    return members


def parse_bsdtar_listing(text: str) -> list[ListedMember]:
    """Return the members of ``bsdtar -tvf`` output (``ls -l`` lines; bsdtar escapes control characters).

    A line whose name holds `` -> `` (symbolic link) or `` link to `` (hard link) lists every target the line
    could mean, since a name may hold the same words. Pure and lenient: never raises.
    """
    members: list[ListedMember] = []
    for line in text.splitlines():
        parts = line.split(None, 8)
        if len(parts) < 9 or not parts[0]:
            continue
        kind, name = parts[0][0], parts[8]
        size = int(parts[4]) if parts[4].isdigit() else 0
        marker = {"l": " -> ", "h": " link to "}.get(kind)
        targets: tuple[str, ...] = ()
        if marker is not None:
            pieces = name.split(marker)
            targets = tuple(marker.join(pieces[i:]) for i in range(1, len(pieces))) or ("",)
        members.append(ListedMember(name, kind, size, targets))
    return members


def _in_tree(target: str) -> bool:
    """Return True when link target ``target`` stays inside the unpacked tree (relative, no ``..``)."""
    return bool(target) and not target.startswith("/") and ".." not in target.split("/")


def check_listing(path: str, members: list[ListedMember], max_unpacked: int = MAX_UNPACKED) -> None:
    """Refuse, before anything is unpacked, what no update package holds.

    Raises VerificationError for more than MAX_MEMBERS members, a FIFO, device node or socket (an unpacker
    running as root would create it, and reading it could hang or read a disk), a link whose target leaves the
    tree, or a stated total over ``max_unpacked`` (the real total is enforced while unpacking as well).
    """
    if len(members) > MAX_MEMBERS:
        raise VerificationError(f"{path}: more than {MAX_MEMBERS} members: not an update package")
    for member in members:
        shown = member.name[:80]
        if member.kind not in _SAFE_KINDS:
            what = _KIND_NAMES.get(member.kind, f"of type {member.kind!r}")
            raise VerificationError(
                f"{path}: member {shown!r} is {what}, not a file: refusing to unpack it",
                hint="an update package holds files and directories only",
            )
        if member.kind in "lh" and not member.targets:
            # 7-Zip lists some formats' links by their mode alone, without a "Symbolic Link" line: a target
            # fwman cannot see is one it cannot check (all() of nothing would have passed it)
            raise VerificationError(
                f"{path}: member {shown!r} is a link whose target the listing does not show: refusing to unpack it",
                hint="an update package holds files and directories only",
            )
        if member.kind in "lh" and not all(_in_tree(t) for t in member.targets):
            raise VerificationError(
                f"{path}: member {shown!r} links outside the archive: refusing to unpack it",
                hint="an update package holds files and directories only",
            )
    total = sum(m.size for m in members)
    if total > max_unpacked:
        raise VerificationError(f"{path}: unpacks to {total:,} bytes, over the {_mib(max_unpacked)} limit")


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


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


def _unpacker(host: Host) -> tuple[str, str] | None:
    """Return (the unpacker's name, its absolute path) on ``host``, or None when neither is installed."""
    for tool in ("7zz", "bsdtar"):
        found = host.which(tool)
        if found:
            return tool, found
    return None


def _listing(host: Host, tool: str, exe: str, copy: str) -> list[ListedMember] | None:
    """Return the members ``tool`` lists in the archive ``copy``, or None when it does not open it."""
    if tool == "7zz":
        listing = host.run([exe, "l", "-slt", "-ba", "--", copy], timeout=UNPACK_TIMEOUT)
        return parse_7zz_listing(listing.stdout) if listing.ok else None
    listing = host.run([exe, "-tvf", copy], timeout=UNPACK_TIMEOUT)
    return parse_bsdtar_listing(listing.stdout) if listing.ok else None


def _size_limited(limit: int, argv: list[str], stdout_to: str | None = None) -> list[str]:
    """Return ``argv`` run under a file size limit (RLIMIT_FSIZE) of a little over ``limit`` bytes.

    The kernel stops every write past the limit (the unpacker is killed by SIGXFSZ or fails with EFBIG), so no
    file it writes can grow beyond it, whatever the archive claims. ``stdout_to`` sends its standard output to
    that file, under the same limit.
    """
    blocks = str(limit // 512 + 1)  # POSIX ulimit -f counts 512-byte blocks; one more tells "over" from "at"
    redirect = ' > "$out"' if stdout_to is not None else ""
    script = f'ulimit -f "$1" || exit {_SIZE_LIMIT_FAILED}; out=$2; shift 2; exec "$@"{redirect}'
    return [SHELL, "-c", script, "sh", blocks, stdout_to or "-", *argv]


def _failed(tool: str, path: str, result: CommandResult) -> FwmanError:
    """Return the error for an unpacker that could not unpack ``path``: a corrupt or hostile package (exit 4).

    Only a shell that cannot set the size limit is fwman's own trouble (exit 1): nothing was unpacked then.
    """
    if result.rc == _SIZE_LIMIT_FAILED:
        return FwmanError(f"cannot limit what {tool} may write: {result.stderr.strip() or 'ulimit -f failed'}")
    detail = (result.stderr or result.stdout).strip().splitlines()
    return VerificationError(
        f"{tool} could not unpack {path}: {detail[-1] if detail else f'exit status {result.rc}'}",
        hint="unpack it by hand and give fwman the .rom file",
    )


def _measure(host: Host, tool: str, exe: str, copy: str, scratch: str, path: str, max_unpacked: int) -> None:
    """Unpack ``copy`` once into a single size-limited file and refuse it when that is over ``max_unpacked``.

    Every member's content goes to standard output (``7zz x -so``, ``bsdtar -xO``) and into one file under the
    kernel's file size limit, so the real total is known without trusting the listing and without ever writing
    more than the limit. The unpack that follows reads the same private bytes with the same tool. Raises
    VerificationError when it is over the limit or the tool fails on the package.
    """
    sink = f"{scratch}/measure"
    argv = [exe, "x", "-so", "-bd", "-bsp0", "--", copy] if tool == "7zz" else [exe, "-x", "-O", "-f", copy]
    result = host.run(_size_limited(max_unpacked, argv, sink), timeout=UNPACK_TIMEOUT)
    try:
        written = host.stat_size(sink)
    except MissingError:
        written = 0
    host.unlink(sink)
    if written > max_unpacked:
        raise VerificationError(
            f"{path}: unpacks to more than the {_mib(max_unpacked)} limit (the archive claims less): "
            "not an update package",
            hint="stopped at the limit while unpacking; nothing over it was written",
        )
    if not result.ok:
        raise _failed(tool, path, result)


def _unpack(host: Host, tool: str, exe: str, copy: str, into: str, path: str, max_unpacked: int) -> None:
    """Unpack archive ``copy`` into directory ``into``, no file over ``max_unpacked`` bytes.

    Raises VerificationError with the tool's message on failure (``path`` is the name the user knows).
    """
    if tool == "7zz":
        # -snl- (the default) stores links as files; -y answers overwrite prompts; stdin is closed: an
        # encrypted archive fails instead of waiting for a password
        argv = [exe, "x", "-y", "-bd", "-bso0", "-bsp0", f"-o{into}", "--", copy]
    else:
        argv = [exe, "-x", "--no-same-owner", "--no-same-permissions", "-C", into, "-f", copy]
    result = host.run(_size_limited(max_unpacked, argv), timeout=UNPACK_TIMEOUT)
    if not result.ok:
        raise _failed(tool, path, result)


def _members(host: Host, root: str) -> list[str]:
    """Return the files under ``root`` (links are never followed, nor listed), at most MAX_MEMBERS."""
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


def _copy_name(path: str) -> str:
    """Return a file name for the private copy of ``path``: its base name, reduced to harmless characters.

    The name is kept (an unpacker names a gzip's member after it, and may pick a format by its extension).
    """
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", os.path.basename(path)).lstrip(".-")[-100:]
    return name or "package"


def scan_package(host: Host, path: str, data: bytes | None = None, *, max_unpacked: int = MAX_UNPACKED) -> PackageScan:
    """Return every VBIOS image in the file ``path`` on ``host``: the file itself, its unpacked members, or both.

    ``host`` is the machine the file is on and runs the unpacker (the CLI passes the local machine for a file the
    user names); ``data`` is the file's content when the caller has read it already (through the user-file
    door, and checked its hash), else it is read through ``host``. Only those bytes are searched and unpacked:
    the unpacker is given a private copy fwman writes into its scratch directory, never ``path`` again, so a
    file rewritten after it was read (and hashed) cannot put other images in. Nothing in the package is
    executed: archives are opened by ``7zz`` or ``bsdtar``, under a file size limit (``max_unpacked``, enforced
    by the kernel while unpacking, not taken from the listing). Raises MissingError when the file is absent,
    VerificationError when it or its unpacked contents are over the size limits, when it lists a member that
    is not a file, directory or in-tree link, or when the unpacker fails on a file it recognised as an archive.
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
    unpacker = _unpacker(host)
    found: list[EmbeddedImage] = []
    if unpacker is None:
        scan.notes.append("no unpacker installed (7zz from Debian's 7zip, or bsdtar): only the raw bytes were searched")
    else:
        tool, exe = unpacker
        # fwman's own scratch space on the machine the package is on (0700); removed before returning
        with _scratch(host) as scratch:
            copy = f"{scratch}/{_copy_name(path)}"
            host.write_bytes(copy, data, mode=0o600)
            listed = _listing(host, tool, exe, copy)
            if listed is None:
                scan.notes.append(f"{tool} does not open it as an archive: only the raw bytes were searched")
            else:
                check_listing(path, listed, max_unpacked)
                _measure(host, tool, exe, copy, scratch, path, max_unpacked)
                scan.unpacker = tool
                into = f"{scratch}/unpacked"
                host.mkdir(into, mode=0o700)
                _unpack(host, tool, exe, copy, into, path, max_unpacked)
                found = _search_members(host, into, path, scan, max_unpacked)
    scan.images = _dedupe([*found, *images])
    return scan


def _search_members(host: Host, into: str, path: str, scan: PackageScan, max_unpacked: int) -> list[EmbeddedImage]:
    """Return the images in the files unpacked under ``into``; note the ones too large to search in ``scan``.

    Raises VerificationError when the files add up to more than ``max_unpacked`` (never expected after the
    measured unpack; checked again on what is really there).
    """
    members = _members(host, into)
    scan.members = len(members)
    sizes = {member: host.stat_size(member) for member in members}
    if sum(sizes.values()) > max_unpacked:
        raise VerificationError(f"{path}: unpacked to more than the {_mib(max_unpacked)} limit")
    found: list[EmbeddedImage] = []
    for member in members:
        shown = member[len(into) + 1 :]
        if sizes[member] > MAX_MEMBER:
            scan.notes.append(f"{shown}: over {MAX_MEMBER} bytes: not searched")
            continue
        blob = host.read_bytes(member, limit=MAX_MEMBER)
        more, more_notes = scan_blob(blob, shown)
        found.extend(more)
        scan.notes.extend(more_notes)
    return found


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
