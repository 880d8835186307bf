"""The Host protocol: every read of sysfs/proc, every command and every write goes through one of these.

Paths given to a Host are always *absolute host paths* (``/sys/bus/pci/devices``); the implementation decides
where they really live (under a root directory, or inside a snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


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

    def readlink(self, path: str) -> str:
        """Return the target of symbolic link ``path`` as stored. Raises MissingError if it is not a link."""
        ...

    def realpath(self, path: str) -> str:
        """Return ``path`` with every symbolic link resolved (an absolute host path)."""
        ...

    def stat_size(self, path: str) -> int:
        """Return the size in bytes of file ``path``. Raises MissingError if absent."""
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

    def local_path(self, path: str) -> str | None:
        """Return the real filesystem path behind host path ``path``, or None where there is none (snapshots).

        Used to hand files to real tools (make, depmod -b, dkms) that need a filesystem path.
        """
        ...


@dataclass
class JournalMixin:
    """Shared journal storage for Host implementations."""

    journal: list[JournalEntry] = field(default_factory=list)

    def _note(self, action: str, path: str, detail: str = "") -> None:
        self.journal.append(JournalEntry(action, path, detail))
