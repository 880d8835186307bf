"""What an unpacker lists of an archive (``7zz l -slt -ba``, ``bsdtar -tvf``), and the check made on that listing before
anything is unpacked.

Pure: text in, members out, never an exception for any text (the parsers are lenient; a line they do not know is
skipped). :func:`check_listing` refuses what no update package holds: FIFOs, device nodes, sockets, links out of the
tree, too many members, a stated total over the limit. The unpacker itself is run by :mod:`fwman.firmware.ops.unpack`.
The formats: 7-Zip's technical listing (``-slt``) is blocks of ``Key = value`` lines, each opening with ``Path``;
bsdtar's verbose listing is ``ls -l`` lines (libarchive's ``bsdtar(1)``: ``-v`` "produce output similar to that of
ls(1)")."""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core import bounded
from fwman.core.errors import VerificationError

# the limits are fwman.core.bounded's (the one place that owns decompression limits): the most bytes an archive
# may unpack to (enforced while unpacking as well), the most members an archive may list (an archive of millions
# of tiny files is not an update package)
MAX_UNPACKED = bounded.PACKAGE.output
MAX_MEMBERS = bounded.PACKAGE_MAX_MEMBERS
#: the listing types that may be unpacked: regular files, directories, symbolic and hard links (links only when
#: their target stays inside the archive's tree); FIFOs, devices and sockets are refused before unpacking
_SAFE_KINDS = frozenset("-dlh")
_KIND_NAMES = {"p": "a FIFO", "c": "a character device", "b": "a block device", "s": "a socket"}


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
        why = None
        if member.kind not in _SAFE_KINDS:
            why = f"is {_KIND_NAMES.get(member.kind, f'of type {member.kind!r}')}, not a file"
        elif member.kind in "lh" and not member.targets:
            # 7-Zip lists some formats' links by their mode alone, without a "Symbolic Link" line: a target
            # fwman cannot see is one it cannot check (all() of nothing would have passed it)
            why = "is a link whose target the listing does not show"
        elif member.kind in "lh" and not all(_in_tree(t) for t in member.targets):
            why = "links outside the archive"
        if why is not None:
            raise VerificationError(
                f"{path}: member {member.name[:80]!r} {why}: refusing to unpack it",
                hint="an update package holds files and directories only",
            )
    total = sum(m.size for m in members)
    if total > max_unpacked:
        raise VerificationError(f"{path}: unpacks to {total:,} bytes, over the {mib(max_unpacked)} limit")


def mib(n: int) -> str:
    """Return ``n`` bytes as people read a limit: ``N MiB`` from 1 MiB up, else ``N bytes``."""
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"
