"""The NVIDIA modules inside each kernel's initramfs, compared with fwman's manifest.

When an initramfs carries ``nvidia*.ko`` (early KMS, ``nvidia-drm.modeset=1``, a hook that adds them), those
copies load at boot before the root filesystem is mounted: if they are the stock modules, the patch is lost even
though ``/lib/modules`` holds fwman's. This module reads the initramfs itself (no extraction to disk):

- the **newc cpio** format (magic ``070701``, or ``070702`` with a checksum): a 110-byte ASCII header (6-byte
  magic, then 13 fields of 8 hex digits: ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
  rdevmajor, rdevminor, namesize, check), the NUL-terminated name padded so header + name is a multiple of 4,
  the data padded to a multiple of 4; the entry named ``TRAILER!!!`` ends one archive;
- an initramfs is several archives back to back: initramfs-tools and dracut put an uncompressed one first (CPU
  microcode, ``early_cpio``) and then the compressed main one (gzip, xz, lzma, bzip2, zstd or lz4; zero bytes
  may pad between them);
- zstd and lz4 have no decoder in Python's standard library: the host's ``zstd``/``lz4`` decompresses into a
  temporary file under fwman's cache, read back through the Host.

The generator in use is initramfs-tools (``update-initramfs -u -k KVER``) or dracut (``dracut -f --kver KVER``).
:class:`RegenerateInitramfs` is the action that rebuilds a kernel's initramfs after a build changed modules it
carries, then reads it again; :func:`refresh_initramfs` is the one step every build path (``modules build``, the
kernel hook, the boot-time catch-up) runs after installing a kernel's modules.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.core import bounded, paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError, VerificationError
from fwman.core.jsonout import OMIT, fields_of, meta
from fwman.driver import nova_core
from fwman.host.actions import Tell, apply_all, silent
from fwman.host.base import Host

WHAT = "initramfs"
NEWC_MAGICS = (b"070701", b"070702")
HEADER_LEN = 110
TRAILER = "TRAILER!!!"
#: first bytes of each compressed stream an initramfs may use, and the name of the format
COMPRESSION_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x02\x21\x4c\x18", "lz4"),  # lz4 legacy frame, what the kernel's lz4 initramfs decoder reads
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"BZh", "bzip2"),
    (b"\x5d\x00\x00", "lzma"),
)
_NVIDIA_KO = re.compile(r"(?:^|/)(nvidia(?:-[a-z]+)?)\.ko(?:\.(?:xz|gz|zst))?$")


@dataclass(frozen=True)
class CpioMember:
    """One regular file of an archive: its name (no leading ``./`` or ``/``), mode and content."""

    name: str
    mode: int
    data: bytes


def _field(data: bytes, pos: int, index: int) -> int:
    start = pos + 6 + 8 * index
    text = data[start : start + 8]
    try:
        return int(text, 16)
    except ValueError:
        raise ParseError(WHAT, "cpio header", f"field {index} is not hex: {text!r}", start) from None


def _clean(name: str) -> str:
    """Return an archive name without its leading ``./`` or ``/`` (cpio writes either)."""
    while name.startswith(("./", "/")):
        name = name[2:] if name.startswith("./") else name[1:]
    return name


def parse_cpio(data: bytes, offset: int = 0) -> tuple[list[CpioMember], int]:
    """Return the regular files of the newc archive starting at ``offset`` and the offset after its trailer.

    Directories, links and device nodes are skipped (a module is always a regular file). Raises ParseError
    for a bad magic, a non-hex field or a member running past the end of ``data``.
    """
    members: list[CpioMember] = []
    pos = offset
    while True:
        if pos + HEADER_LEN > len(data):
            raise ParseError(WHAT, "cpio header", "archive ends before its trailer", pos)
        if data[pos : pos + 6] not in NEWC_MAGICS:
            raise ParseError(WHAT, "cpio magic", f"expected 070701 or 070702, found {data[pos : pos + 6]!r}", pos)
        mode = _field(data, pos, 1)
        filesize = _field(data, pos, 6)
        namesize = _field(data, pos, 11)
        if namesize == 0:
            raise ParseError(WHAT, "cpio name size", "zero", pos)
        name_start = pos + HEADER_LEN
        name_end = name_start + namesize
        data_start = (name_end + 3) & ~3
        data_end = data_start + filesize
        if data_end > len(data):
            raise ParseError(WHAT, "cpio member", "runs past the end of the archive", pos)
        name = data[name_start : name_end - 1].decode("utf-8", errors="replace")
        pos = (data_end + 3) & ~3
        if name == TRAILER:
            return members, min(pos, len(data))
        if mode & 0o170000 == 0o100000:
            members.append(CpioMember(_clean(name), mode, data[data_start:data_end]))


def compression_of(data: bytes, offset: int = 0) -> str | None:
    """Return the compression format of the stream starting at ``offset`` ("gzip", "zstd", ...), or None."""
    for magic, name in COMPRESSION_MAGICS:
        if data.startswith(magic, offset):
            return name
    return None


Decompressor = Callable[[str, bytes], bytes]


def stdlib_decompress(kind: str, data: bytes) -> bytes:
    """Return ``data`` decompressed with Python's own decoders (gzip, xz, lzma, bzip2), within
    :data:`fwman.core.bounded.INITRAMFS` (concatenated gzip members are legal: all are read).

    Raises OverLimit (a ParseError) past a limit, ParseError for corrupt data, MissingError for zstd/lz4
    (they need the host's tool).
    """
    if kind in ("gzip", "xz", "lzma", "bzip2"):
        return bounded.decompress(kind, data, bounded.INITRAMFS, WHAT)
    raise MissingError(f"a {kind} initramfs needs the {kind} tool to read")


def read_archives(data: bytes, decompress: Decompressor = stdlib_decompress, depth: int = 0) -> list[CpioMember]:
    """Return every regular file of an initramfs image: its uncompressed archives, then the compressed one.

    Raises ParseError when the image is neither cpio nor a known compressed stream, or is corrupt; OverLimit
    (a ParseError) for streams nested deeper than the limits allow; the decompressor's MissingError when it
    cannot decode the stream.
    """
    members: list[CpioMember] = []
    pos = 0
    while pos < len(data):
        while pos < len(data) and data[pos] == 0:  # padding between archives
            pos += 1
        if pos >= len(data):
            break
        if data[pos : pos + 6] in NEWC_MAGICS:
            found, pos = parse_cpio(data, pos)
            members += found
            continue
        kind = compression_of(data, pos)
        if kind is None:
            raise ParseError(WHAT, "image", "neither a newc cpio archive nor a known compressed stream", pos)
        bounded.check_depth(depth + 1, bounded.INITRAMFS, WHAT)  # gzip-in-gzip x1500 is not an initramfs
        inner = decompress(kind, data[pos:])
        # the compressed stream is the last part (the kernel reads to the end); it may hold several archives
        members += read_archives(inner, decompress, depth + 1) if inner else []
        break
    return members


# -- per kernel ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InitramfsModule:
    """One NVIDIA module found in an initramfs and how it compares with fwman's manifest."""

    name: str  # "nvidia", "nvidia-drm", ...
    path: str  # inside the image
    sha256: str
    version: str | None  # the module's version= tag (None when it could not be read)
    matches_manifest: bool = field(metadata=meta(key="ours"))


@dataclass
class InitramfsState:
    """What one kernel's initramfs carries of the NVIDIA modules (the ``initramfs`` key of status JSON)."""

    kver: str = field(metadata=OMIT)
    path: str | None  # the image, None when the kernel has none
    generator: str  # "initramfs-tools" | "dracut" | "unknown"
    error: str | None = field(default=None, metadata=meta(then=("problem",)))  # why the image could not be read
    modules: list[InitramfsModule] = field(default_factory=list)
    #: the image carries nova_core without a blacklist (fwman.driver.nova_core.initramfs_problem), else None
    nova_core: str | None = field(default=None, metadata=OMIT)

    @property
    def stale(self) -> list[InitramfsModule]:
        """Return the NVIDIA modules in the image that are not the ones fwman installed."""
        return [m for m in self.modules if not m.matches_manifest]

    @property
    def problem(self) -> str | None:
        """Return the one line that says why the initramfs loses the patch at boot, or None when it does not."""
        if not self.stale:
            return self.nova_core
        first = self.stale[0]
        kind = "stock" if first.version else "foreign"
        version = f" {first.version}" if first.version else ""
        more = f" (and {len(self.stale) - 1} more)" if len(self.stale) > 1 else ""
        return f"initramfs has {kind} {first.name}.ko{version}{more}: the patch is lost at boot"

    def summary(self) -> str:
        """Return one line for the status table."""
        if self.path is None:
            return "none"
        if self.error:
            return f"unreadable: {self.error}"
        if not self.modules:
            return self.nova_core or "no nvidia modules"
        return self.problem or f"carries fwman's {len(self.modules)} modules"

    def to_dict(self) -> dict[str, object]:
        """Return the JSON form (key ``initramfs``, schema version in :data:`SCHEMA`)."""
        return {"schema": SCHEMA, **fields_of(self)}


SCHEMA = "fwman.initramfs/1"


def generator(host: Host) -> str:
    """Return the initramfs generator the host uses: "initramfs-tools", "dracut" or "unknown"."""
    try:
        if host.exists("/etc/initramfs-tools/initramfs.conf") or host.which("update-initramfs"):
            return "initramfs-tools"
        if host.exists("/etc/dracut.conf") or host.which("dracut"):
            return "dracut"
    except NotRecordedError:
        pass
    return "unknown"


def image_path(host: Host, kver: str) -> str | None:
    """Return the initramfs image of ``kver`` (Debian's ``initrd.img-KVER``, dracut's ``initramfs-KVER.img``)."""
    for candidate in (f"/boot/initrd.img-{kver}", f"/boot/initramfs-{kver}.img"):
        try:
            if host.exists(candidate):
                return candidate
        except NotRecordedError:
            return None
    return None


def host_decompressor(host: Host) -> Decompressor:
    """Return a decompressor that uses the standard library, and the host's ``zstd``/``lz4`` for those formats."""

    def run(kind: str, data: bytes) -> bytes:
        if kind not in ("zstd", "lz4"):
            return stdlib_decompress(kind, data)
        if host.which(kind) is None:
            raise MissingError(f"a {kind} initramfs needs the {kind} tool (Debian package {kind})")
        scratch = f"{paths.CACHE_DIR}/initramfs"
        host.mkdir(scratch)
        # names of this call only: the boot service, the metrics timer and a person may read images at once
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        src, dst = f"{scratch}/stream-{token}.{kind}", f"{scratch}/stream-{token}"
        host.write_bytes(src, data, 0o600)
        local_src, local_dst = host.local_path(src), host.local_path(dst)
        if local_src is None or local_dst is None:
            raise MissingError(f"cannot run {kind} here (no file behind {src} on this host)")
        limits = bounded.INITRAMFS
        allowed = limits.allowed(len(data))
        # the kernel's file size limit holds the tool's output to the same bound as Python's decoders
        argv = ["sh", "-c", 'ulimit -f "$1" && shift && exec "$@"', "fwman-limit", str(allowed // 512 + 1)]
        try:
            result = host.run([*argv, kind, "-dqf", local_src, "-o", local_dst], timeout=limits.seconds)
            if host.exists(dst) and host.stat_size(dst) > allowed:
                raise bounded.OverLimit(WHAT, f"{kind} stream", f"{bounded.size_text(allowed)} uncompressed")
            if not result.ok:
                raise ParseError(
                    WHAT, f"{kind} stream", (result.stderr or result.stdout).strip() or f"exit {result.rc}"
                )
            return host.read_bytes(dst)
        finally:
            host.unlink(src)
            host.unlink(dst)

    return run


def nvidia_members(members: list[CpioMember], kver: str) -> list[tuple[str, CpioMember]]:
    """Return (module name, member) for each NVIDIA module of kernel ``kver`` in ``members``."""
    found = []
    for member in members:
        rel = member.name.removeprefix("usr/")  # usr/lib/modules/KVER/... or lib/modules/KVER/...
        m = _NVIDIA_KO.search(rel) if rel.startswith(f"lib/modules/{kver}/") else None
        if m:
            found.append((m.group(1), member))
    return found


def _module_version(member: CpioMember) -> str | None:
    from fwman.driver.kmod.kofile import decompress, read_module

    try:
        return read_module(decompress(member.data, member.name)).version
    except (ParseError, FwmanError):
        return None


def compare(kver: str, members: list[CpioMember], manifest_hashes: dict[str, str]) -> list[InitramfsModule]:
    """Return the NVIDIA modules of ``kver`` in ``members``, each compared with ``manifest_hashes`` (name: sha256)."""
    result = []
    for name, member in nvidia_members(members, kver):
        digest = hashlib.sha256(member.data).hexdigest()
        ours = manifest_hashes.get(name) == digest
        result.append(InitramfsModule(name, member.name, digest, _module_version(member), ours))
    return result


def inspect(host: Host, kver: str) -> InitramfsState:
    """Return what ``kver``'s initramfs carries of the NVIDIA modules. Never raises: errors go in ``error``."""
    from fwman.driver.build.manifest import load_manifest

    state = InitramfsState(kver, image_path(host, kver), generator(host))
    if state.path is None:
        return state
    try:
        manifest = load_manifest(host, kver)
    except ParseError:
        manifest = None
    hashes = {name: e.sha256 for name, e in manifest.modules.items()} if manifest else {}
    try:
        members = read_archives(host.read_bytes(state.path), host_decompressor(host))
    except FwmanError as e:
        state.error = e.message
        return state
    state.modules = compare(kver, members, hashes)
    state.nova_core = nova_core.initramfs_problem(kver, ((m.name, m.data) for m in members))
    return state


def regenerate_argv(gen: str, kver: str) -> list[str]:
    """Return the command that rebuilds ``kver``'s initramfs with generator ``gen``. Raises MissingError."""
    if gen == "initramfs-tools":
        return ["update-initramfs", "-u", "-k", kver]
    if gen == "dracut":
        return ["dracut", "-f", "--kver", kver]
    raise MissingError(f"no initramfs generator found to rebuild the initramfs of {kver}")


@dataclass
class RegenerateInitramfs:
    """Rebuild ``kver``'s initramfs when it carries NVIDIA modules that are not fwman's; then check again."""

    kver: str
    timeout: float = 900.0
    #: the image as the last :meth:`is_needed` read it, and as :meth:`apply` read it after the generator ran
    before: InitramfsState | None = None
    after: InitramfsState | None = None

    def describe(self) -> str:
        """Return the command and why."""
        return f"regenerate the initramfs of {self.kver} (it carries NVIDIA modules that are not fwman's)"

    def is_needed(self, host: Host) -> bool:
        """Return True when the image carries NVIDIA modules that differ from the manifest."""
        self.before = inspect(host, self.kver)
        return bool(self.before.stale)

    def command(self, host: Host) -> list[str]:
        """Return the generator's command line. Raises MissingError when there is no generator."""
        return regenerate_argv(generator(host), self.kver)

    def apply(self, host: Host) -> None:
        """Run the generator and read the image again. Raises FwmanError when it fails or stays stale."""
        argv = self.command(host)
        result = host.run(argv, timeout=self.timeout)
        if result.missing:
            raise MissingError(f"{argv[0]} not found", hint=f"rebuild the initramfs of {self.kver} by hand")
        if not result.ok:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise FwmanError(f"{' '.join(argv)} failed (exit {result.rc}): {tail[-1] if tail else 'no output'}")
        self.after = inspect(host, self.kver)
        if self.after.problem:
            raise VerificationError(
                f"{self.kver}: {self.after.problem} (even after {' '.join(argv)})",
                hint="a hook or /etc/initramfs-tools/modules copies another nvidia.ko: see docs/boot-safety.md",
            )


def refresh_initramfs(host: Host, kver: str, tell: Tell = silent) -> InitramfsState:
    """Regenerate ``kver``'s initramfs when it carries NVIDIA modules other than fwman's just installed ones.

    Returns the image's state afterwards (as read after the generator ran, else as read when nothing was
    needed or the generator failed). A generator that fails or leaves the image stale is reported through
    ``tell`` and shows in the state (the kernel then counts as not safe to boot); never raises: the modules
    themselves are installed, and a kernel hook must not fail over the initramfs.
    """
    action = RegenerateInitramfs(kver)
    try:
        if apply_all(host, [action], tell):
            tell(f"{kver}: initramfs regenerated; it now carries fwman's modules")
    except FwmanError as e:
        tell(f"WARNING: {kver}: {e.message}")
    return action.after or action.before or inspect(host, kver)
