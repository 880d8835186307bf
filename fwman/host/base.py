"""The Host protocol: every read of sysfs/proc, every command and every write goes through one of these.

Paths given to a Host are always *absolute host paths* (``/sys/bus/pci/devices``); the implementation decides
where they really live (under a root directory, or inside a snapshot).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fwman.core.errors import FwmanError, MissingError

if TYPE_CHECKING:
    from fwman.host.pty import PtyResult


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its argv, exit status and output (stdout/stderr as text, undecodable bytes replaced).

    ``missing`` is True when the executable was not found; ``rc`` is then 127 and stdout empty.
    """

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    missing: bool = False

    @property
    def ok(self) -> bool:
        """Return True when the command ran and exited 0."""
        return not self.missing and self.rc == 0


class PendingCommand:
    """A command :meth:`Host.start` started: :meth:`result` waits for it and returns its CommandResult.

    The command runs while the caller reads other things (fwman audit lists the container engines while it reads
    the host's modules and libraries). The result is computed once; waiting again returns it again.
    """

    def __init__(self, wait: Callable[[], CommandResult], poll: Callable[[], bool] | None = None) -> None:
        self._wait = wait
        self._poll = poll
        self._result: CommandResult | None = None
        self._error: Exception | None = None

    @classmethod
    def finished(cls, result: CommandResult) -> PendingCommand:
        """Return a pending command that is already done (a missing executable, a recorded answer)."""
        pending = cls(lambda: result)
        pending._result = result
        return pending

    def done(self) -> bool:
        """Return True when the command has exited (waiting for it would not block). Never raises."""
        return self._result is not None or self._error is not None or self._poll is None or self._poll()

    def result(self) -> CommandResult:
        """Wait for the command and return what it did. Raises what :meth:`Host.run` raises (FwmanError on a
        timeout, NotRecordedError on a snapshot that did not record it), and the same again when asked again."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            try:
                self._result = self._wait()
            except Exception as e:
                self._error = e
                raise
        return self._result


@dataclass(frozen=True)
class JournalEntry:
    """One change a Host made (or, on a snapshot, would have made)."""

    action: str  # "write", "mkdir", "rename", "unlink", "symlink", "run"
    path: str
    detail: str = ""


@runtime_checkable
class Host(Protocol):
    """The door to a machine. Implemented by LiveHost (a real filesystem under a root) and SnapshotHost."""

    #: human-readable description, e.g. "live host /" or "snapshot fixtures/hosts/rig-4x3090"
    description: str
    #: changes made through this host, in order
    journal: list[JournalEntry]

    def exists(self, path: str) -> bool:
        """Return True if ``path`` exists (following links)."""
        ...

    def is_dir(self, path: str) -> bool:
        """Return True if ``path`` is a directory (following links)."""
        ...

    def is_link(self, path: str) -> bool:
        """Return True if ``path`` itself is a symbolic link."""
        ...

    def listdir(self, path: str) -> list[str]:
        """Return the sorted entry names of directory ``path``. Raises MissingError/NotRecordedError if absent."""
        ...

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """Return the content of ``path`` (at most ``limit`` bytes). Raises MissingError if it cannot be read."""
        ...

    def read_text(self, path: str) -> str:
        """Return the content of ``path`` decoded as UTF-8 (errors replaced). Raises MissingError if absent."""
        ...

    def read_records(self, path: str, limit: int = 16 << 20) -> bytes:
        """Return what a record device (``/dev/kmsg``) holds now, without waiting for more: opened non-blocking,
        read one record per read() until the device has none left (EAGAIN), concatenated, at most ``limit``
        bytes. A regular file (a test tree, a replay) gives its bytes. Raises MissingError when it cannot be
        opened or read (absent, not a device or file, EPERM without CAP_SYSLOG)."""
        ...

    def readlink(self, path: str) -> str:
        """Return the target of symbolic link ``path`` as stored. Raises MissingError if it is not a link."""
        ...

    def realpath(self, path: str) -> str:
        """Return ``path`` with every symbolic link resolved (an absolute host path)."""
        ...

    def stat_size(self, path: str) -> int:
        """Return the size in bytes of file ``path``. Raises MissingError if absent."""
        ...

    def file_mode(self, path: str) -> int | None:
        """Return the permission bits of file ``path`` (``0o755``), or None when this host cannot tell (a
        replay records contents, not modes). Raises MissingError if absent."""
        ...

    def overlay_marker(self, path: str) -> str | None:
        """Return ``"whiteout"`` when ``path`` itself (not followed) is an overlay whiteout, a character device
        0/0; ``"opaque"`` when it is a directory an overlay marks opaque (xattr ``trusted.overlay.opaque`` or
        ``user.overlay.opaque`` set to ``y``); None otherwise, also when absent (the kernel's
        Documentation/filesystems/overlayfs.rst, "whiteouts and opaque directories"). A replay answers what the
        capture saw and None for a path it never asked about."""
        ...

    def which(self, tool: str) -> str | None:
        """Return the absolute path of executable ``tool`` on this host, or None."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run a command and return its result; a missing executable gives ``missing=True``, never raises.

        Raises NotRecordedError on a snapshot that did not record this argv, FwmanError on a timeout.
        """
        ...

    def start(self, argv: Sequence[str], *, timeout: float | None = 60.0) -> PendingCommand:
        """Start a read-only command and return at once; its result is :meth:`PendingCommand.result`, the same
        CommandResult :meth:`run` gives (``timeout`` counts from when the result is first waited for)."""
        ...

    def run_interactive(
        self,
        argv: Sequence[str],
        *,
        answers: Sequence[tuple[str, str]],
        on_output: Callable[[str], None] | None = None,
        timeout: float = 600.0,
    ) -> PtyResult:
        """Run a tool that reads its confirmation from a terminal (nvflash) on a pseudo-terminal.

        ``answers`` pairs each expected prompt with the reply typed (once, in order); Ctrl-C is deferred until
        the tool exits. Raises FwmanError when it cannot start, UsageError on a snapshot or recording.
        """
        ...

    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename)."""
        ...

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """Create directory ``path`` and its parents (no error if it exists)."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` atomically (same filesystem)."""
        ...

    def unlink(self, path: str) -> None:
        """Remove file or link ``path`` (no error if absent)."""
        ...

    def symlink(self, target: str, path: str) -> None:
        """Create (or replace) symbolic link ``path`` pointing to ``target``."""
        ...

    def remove_tree(self, path: str) -> None:
        """Remove directory ``path`` with everything under it, or the file or link ``path`` (no error if absent).

        Links inside are removed, never followed. Raises HostChangeError when the filesystem refuses,
        UnsafeRemovalError (:func:`removable_path`) for ``/``, an empty or relative path, or one outside the host.
        """
        ...

    def local_path(self, path: str) -> str | None:
        """Return the real filesystem path behind host path ``path``, or None where there is none (snapshots).

        Used to hand files to real tools (make, depmod -b, dkms) that need a filesystem path.
        """
        ...


MAX_LINKS = 40
#: the extended attributes an overlay reads to call a directory opaque: trusted.* for a mount by root, user.*
#: for one with the ``userxattr`` option (rootless engines); the value is ``y``
OVERLAY_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


class UnsafeRemovalError(FwmanError):
    """A tree removal was asked for a path no caller may remove: ``/``, an empty or relative path, one outside
    the host's root. Always a bug in the caller (exit 1), never something the user typed."""


def removable_path(path: str) -> str:
    """Return host path ``path`` normalised for :meth:`Host.remove_tree`, when it is one a tree removal may take.

    The one rule every Host applies before removing a tree. ``//`` and ``/./`` are ``/`` (POSIX keeps a
    leading ``//`` in ``normpath``, and ``rmtree("//")`` is the whole machine); ``..`` never climbs above
    ``/``. Raises UnsafeRemovalError for an empty path, a relative one (it would be relative to the working
    directory, not to the host), and ``/`` itself.
    """
    if not isinstance(path, str) or not path.strip():
        raise UnsafeRemovalError(f"internal: refusing to remove an empty path ({path!r})")
    if not path.startswith("/"):
        raise UnsafeRemovalError(f"internal: refusing to remove {path!r}: host paths are absolute")
    normal = "/" + posixpath.normpath(path).lstrip("/")
    if normal == "/":
        raise UnsafeRemovalError(f"internal: refusing to remove the whole host ({path!r} is /)")
    return normal


def is_this_machine(host: Host) -> bool:
    """Return True when ``host`` is the machine fwman runs on, its real root (not ``--root DIR``, not a replay).

    Tools that act on the running system itself (systemctl, logger, mokutil) only make sense there: on a temp
    root they would answer for, or write to, another machine than the tree's.
    """
    return host.local_path("/") == "/"


def resolve_links(path: str, read_link: Callable[[str], str | None]) -> str:
    """Return absolute host path ``path`` with every symbolic link resolved, component by component.

    ``read_link(p)`` returns the stored target of ``p`` when it is a link, else None. Absolute targets restart
    from ``/`` (of the host, so a root-mapped host stays inside its root). One algorithm for every Host, so a
    live root, a recording and its replay resolve a path the same way. Raises MissingError after 40 links.
    """
    parts = [p for p in posixpath.normpath(path).split("/") if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == "..":
            if resolved:
                resolved.pop()
            continue
        if name == ".":
            continue
        candidate = "/" + "/".join([*resolved, name])
        target = read_link(candidate)
        if target is not None:
            hops += 1
            if hops > MAX_LINKS:
                raise MissingError(f"too many levels of symbolic links: {path}")
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        resolved.append(name)
    return "/" + "/".join(resolved)


@dataclass
class JournalMixin:
    """Shared journal storage for Host implementations."""

    journal: list[JournalEntry] = field(default_factory=list)

    def _note(self, action: str, path: str, detail: str = "") -> None:
        self.journal.append(JournalEntry(action, path, detail))
