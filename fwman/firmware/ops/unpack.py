"""Unpacking a vendor update package through the Host, and the scan of everything it holds.

fwman never runs the package. It unpacks archives with a well-kept unpacker (7-Zip's ``7zz``, or libarchive's
``bsdtar``) run through the Host as a command, then looks for images by structure
(:func:`fwman.firmware.rom.package.scan_blob`, pure) in every unpacked file and in the package bytes themselves.

An archive is never trusted about itself. The unpacker gets a private copy of the bytes fwman read (and its caller
hashed), never the file again; its listing is checked first (:mod:`fwman.firmware.ops.listing`: no FIFO, device node,
socket or link out of the tree; at most MAX_MEMBERS members); and the size limit is the kernel's (``ulimit -f``): one
unpack into a single size-limited file measures the real total, then the real unpack runs under the same per-file limit.
The scratch directory is removed through the Host (``remove_tree``) whatever happens."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from fwman.core import bounded
from fwman.core.errors import FwmanError, MissingError, VerificationError
from fwman.firmware.ops.listing import (
    MAX_MEMBERS,
    MAX_UNPACKED,
    ListedMember,
    check_listing,
    mib,
    parse_7zz_listing,
    parse_bsdtar_listing,
)
from fwman.firmware.rom.package import EmbeddedImage, PackageScan, dedupe_images, scan_blob
from fwman.host.base import CommandResult, Host

# the limits are fwman.core.bounded's: the largest package read (vendor update programs run to tens of MB); the
# most one unpacked file may hold and still be searched
MAX_PACKAGE = bounded.PACKAGE_MAX_INPUT
MAX_MEMBER = bounded.PACKAGE_MAX_MEMBER
UNPACK_TIMEOUT = bounded.PACKAGE.seconds
#: where scratch directories for unpacking go, on the machine the package is on
SCRATCH_PARENT = "/tmp"
#: the shell that puts the file size limit on the unpacker (a POSIX shell: ``ulimit -f`` counts 512-byte blocks)
SHELL = "/bin/sh"
_SIZE_LIMIT_FAILED = 125  # the status the wrapper exits with when it cannot set the limit


@contextmanager
def scratch_dir(host: Host) -> Iterator[str]:
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
        host.remove_tree(path)


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
            f"{path}: unpacks to more than the {mib(max_unpacked)} limit (the archive claims less): "
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
        with scratch_dir(host) as scratch:
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
    scan.images = dedupe_images([*found, *images])
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
        raise VerificationError(f"{path}: unpacked to more than the {mib(max_unpacked)} limit")
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
