"""SnapshotHost: replay a captured host. Anything not recorded raises NotRecordedError; never the real machine.

Format (``docs/snapshot-format.md``), a directory:

- ``snapshot.json``: ``{"format": "fwman-snapshot", "version": 1, "captured_at", "fwman_version", "redacted",
  "constructed", "links": {path: target}, "dirs": {path: [names]}, "absent": [paths], "sizes": {path: bytes},
  "tools": {name: path|null}, "overlay": {path: "whiteout"|"opaque"},
  "commands": [{"argv": [...], "rc", "stdout", "stderr", "missing"}]}`` where ``stdout``/``stderr`` name files
  under ``commands/``.
- ``files/<absolute path>``: the bytes of every recorded file.

Writes are journaled and kept in memory (later reads see them); the snapshot directory is never modified.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError
from fwman.core.jsontext import parse_json
from fwman.host.base import CommandResult, JournalMixin, PendingCommand, removable_path, resolve_links
from fwman.host.snapshot_check import (
    MAX_RECORDED_FILE,
    SnapshotFormatError,
    check_meta,
    check_tree,
    command_output,
    confined,
    read_recorded,
)

if TYPE_CHECKING:
    from fwman.host.pty import PtyResult


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path != "/" else "/"


def _refuse(what: str, problems: list[str], hint: str) -> None:
    """Raise SnapshotFormatError naming the first of ``problems`` (and how many more) when there is one."""
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SnapshotFormatError(f"{what}: {problems[0]}{more}", hint=hint)


class SnapshotHost(JournalMixin):
    """A recorded host replayed from a snapshot directory."""

    #: the HTTP door (fwman.host.http) refuses every request made for a replay
    network = False

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__()
        self.directory = Path(directory)
        meta_path = self.directory / "snapshot.json"
        if meta_path.is_symlink():
            raise SnapshotFormatError(f"{meta_path} is a symbolic link (a snapshot is data, never a pointer)")
        try:
            meta: Any = parse_json(read_recorded(meta_path, self.directory), "snapshot", "snapshot.json")
        except FileNotFoundError as e:
            raise UsageError(
                f"not a snapshot directory: {self.directory} (no snapshot.json)",
                hint="make one with `fwman capture DIR` on the machine to record",
            ) from e
        except ParseError as e:
            raise UsageError(f"unreadable snapshot {meta_path}: {e.detail}") from e
        except OSError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UsageError(f"unreadable snapshot {meta_path}: {first}") from e
        check = f"`fwman capture --check {self.directory}` lists every problem"
        problems = [p.removeprefix("snapshot.json: ") for p in check_meta(meta)]
        _refuse(f"malformed snapshot {self.directory}", problems, check)
        # the whole tree on disk, up front (a few ms): a link or a missing output is refused whatever the command
        # reads, never degraded into "unreadable" by a command that tolerates one missing file
        data = "a snapshot is data: it records links in snapshot.json, never as links on disk; "
        _refuse(f"unsafe snapshot {self.directory}", check_tree(self.directory, meta), data + check)
        self.meta = meta
        self.description = f"snapshot {self.directory}"
        self.links: dict[str, str] = {_norm(k): v for k, v in meta.get("links", {}).items()}
        self.dirs: dict[str, list[str]] = {_norm(k): list(v) for k, v in meta.get("dirs", {}).items()}
        self.absent: set[str] = {_norm(p) for p in meta.get("absent", [])}
        self.sizes: dict[str, int] = {_norm(k): int(v) for k, v in meta.get("sizes", {}).items()}
        self.tools: dict[str, str | None] = dict(meta.get("tools", {}))
        self.markers: dict[str, str] = {_norm(k): v for k, v in meta.get("overlay", {}).items()}
        self.commands: dict[tuple[str, ...], dict[str, Any]] = {tuple(c["argv"]): c for c in meta.get("commands", [])}
        self.overlay: dict[str, bytes | None] = {}  # writes made during this replay (None = deleted)
        self.files_root = self.directory / "files"

    # -- path resolution ---------------------------------------------------------------------------------
    def _file(self, path: str) -> Path:
        """Return the file recording host path ``path``; raises SnapshotFormatError where a link on disk is met."""
        return confined(self.files_root, path, tree_checked=True)

    def realpath(self, path: str) -> str:
        """Return ``path`` with recorded links resolved."""
        return resolve_links(path, self.links.get)

    def _known_absent(self, path: str) -> bool:
        """Return True when the snapshot proves ``path`` did not exist: it, or an ancestor, is listed absent or
        is missing from its parent's complete listing."""
        current = path
        while current not in ("/", ""):
            if current in self.absent:
                return True
            parent, name = posixpath.split(current)
            listing = self.dirs.get(parent)
            if listing is not None and name not in listing:
                return True
            current = parent
        return False

    def _state(self, path: str) -> str:
        """Classify a resolved path: "file", "dir", "absent"; raise NotRecordedError when unknown."""
        if path in self.overlay:
            return "absent" if self.overlay[path] is None else "file"
        if path in self.dirs or path == "/":
            return "dir"
        if self._file(path).is_file() or path in self.sizes:
            return "file"
        if self._known_absent(path):
            return "absent"
        if self._file(path).is_dir():
            return "dir"
        raise NotRecordedError(
            f"snapshot {self.directory} did not record {path}",
            hint="this replay never reads the real machine; capture again with a newer fwman, or run live",
        )

    # -- reads -------------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        """Return True if ``path`` was recorded as present."""
        return self._state(self.realpath(path)) != "absent"

    def is_dir(self, path: str) -> bool:
        """Return True if ``path`` was recorded as a directory."""
        return self._state(self.realpath(path)) == "dir"

    def is_link(self, path: str) -> bool:
        """Return True if ``path`` was recorded as a link."""
        resolved_parent = self.realpath(posixpath.dirname(_norm(path)))
        return posixpath.join(resolved_parent, posixpath.basename(_norm(path))) in self.links

    def listdir(self, path: str) -> list[str]:
        """Return the recorded listing of ``path``. Raises NotRecordedError when the listing was not recorded."""
        real = self.realpath(path)
        if real in self.dirs:
            names = set(self.dirs[real])
        elif self._file(real).is_dir():
            names = {p.name for p in self._file(real).iterdir()}
            names |= {posixpath.basename(k) for k in self.links if posixpath.dirname(k) == real}
        elif self._known_absent(real):
            raise MissingError(f"cannot list {path}: no such directory (in snapshot)")
        else:
            raise NotRecordedError(f"snapshot {self.directory} did not record the listing of {path}")
        for p, data in self.overlay.items():
            if posixpath.dirname(p) == real:
                if data is None:
                    names.discard(posixpath.basename(p))
                else:
                    names.add(posixpath.basename(p))
        return sorted(names)

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """Return the recorded bytes of ``path`` (at most ``limit``).

        Raises MissingError/NotRecordedError, and SnapshotFormatError for a file on disk larger than a capture
        records (:data:`~fwman.host.snapshot_check.MAX_RECORDED_FILE`), which is never read.
        """
        real = self.realpath(path)
        if real in self.overlay:
            data = self.overlay[real]
            if data is None:
                raise MissingError(f"cannot read {path}: deleted during this replay")
            return data if limit is None else data[:limit]
        f = self._file(real)
        if f.is_file():
            return read_recorded(f, self.directory, limit)
        if self._known_absent(real):
            raise MissingError(f"cannot read {path}: not present on the recorded host")
        if real in self.sizes:
            raise NotRecordedError(
                f"snapshot {self.directory} recorded only the size of {path} ({self.sizes[real]} bytes)",
                hint=f"capture keeps a file over {MAX_RECORDED_FILE >> 20} MiB, or one it only saw there, by size "
                "only; run live to read it",
            )
        raise NotRecordedError(
            f"snapshot {self.directory} did not record {path}",
            hint="this replay never reads the real machine; capture again with a newer fwman, or run live",
        )

    def read_text(self, path: str) -> str:
        """Return ``path`` decoded as UTF-8."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_records(self, path: str, limit: int = 16 << 20) -> bytes:
        """Return the records the capture read from device ``path`` (recorded as a file; see read_bytes)."""
        return self.read_bytes(path, limit)

    def readlink(self, path: str) -> str:
        """Return the recorded target of link ``path``."""
        resolved_parent = self.realpath(posixpath.dirname(_norm(path)))
        key = posixpath.join(resolved_parent, posixpath.basename(_norm(path)))
        if key in self.links:
            return self.links[key]
        if self._known_absent(key):
            raise MissingError(f"cannot read link {path}: not present on the recorded host")
        if key in self.dirs or (self.overlay[key] is not None if key in self.overlay else self._file(key).is_file()):
            raise MissingError(f"cannot read link {path}: not a link")
        raise NotRecordedError(f"snapshot {self.directory} did not record the link {path}")

    def stat_size(self, path: str) -> int:
        """Return the recorded size of ``path`` (also for a file recorded by size only)."""
        real = self.realpath(path)
        if real not in self.overlay and real in self.sizes:
            return self.sizes[real]
        if real not in self.overlay and (f := self._file(real)).is_file():
            return f.stat().st_size  # the size without reading the bytes (check_tree bounded it)
        return len(self.read_bytes(path))

    def file_mode(self, path: str) -> int | None:
        """Return None: a snapshot records contents, not permission bits. Raises MissingError when absent."""
        self.stat_size(path)  # absent or unrecorded raises as for a read
        return None

    def overlay_marker(self, path: str) -> str | None:
        """Return the overlay marker the capture recorded for ``path`` (its parent's links resolved), else None."""
        parent, name = posixpath.split(_norm(path))
        return self.markers.get(posixpath.join(self.realpath(parent), name) if name else "/")

    def which(self, tool: str) -> str | None:
        """Return the recorded location of ``tool``. Raises NotRecordedError when the capture did not look."""
        if tool in self.tools:
            return self.tools[tool]
        raise NotRecordedError(f"snapshot {self.directory} did not record whether {tool!r} is installed")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        """Return the recorded result of ``argv``. Raises NotRecordedError for a command not recorded."""
        rec = self.commands.get(tuple(argv))
        if rec is None:
            raise NotRecordedError(
                f"snapshot {self.directory} did not record the command: {' '.join(argv)}",
                hint="a replay never runs commands on this machine",
            )
        stdout = self._command_text(rec.get("stdout"))
        stderr = self._command_text(rec.get("stderr"))
        return CommandResult(tuple(argv), int(rec.get("rc", 0)), stdout, stderr, bool(rec.get("missing", False)))

    def start(self, argv: Sequence[str], *, timeout: float | None = 60.0) -> PendingCommand:
        """Return the recorded result of ``argv`` as a pending command; ``result`` raises NotRecordedError for a
        command not recorded (as :meth:`run` does)."""
        return PendingCommand(lambda: self.run(argv, timeout=timeout))

    def run_interactive(
        self,
        argv: Sequence[str],
        *,
        answers: Sequence[tuple[str, str]],
        on_output: Callable[[str], None] | None = None,
        timeout: float = 600.0,
    ) -> PtyResult:
        """Refuse: an interactive tool (nvflash writing a card) never runs against a replay."""
        raise UsageError(f"a replay does not run interactive tools: {' '.join(argv)}", hint="run on the live host")

    def _command_text(self, name: str | None) -> str:
        if not name:
            return ""
        return read_recorded(command_output(self.directory, name), self.directory).decode("utf-8", errors="replace")

    def local_path(self, path: str) -> str | None:
        """Snapshots have no real filesystem behind them: return None."""
        return None

    # -- writes (journaled, kept in memory) --------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Journal the write and keep the bytes for later reads in this replay."""
        self.overlay[_norm(path)] = bytes(data)
        self._note("write", path, f"{len(data)} bytes")

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """Journal the directory creation."""
        self.dirs.setdefault(_norm(path), [])
        self._note("mkdir", path)

    def rename(self, src: str, dst: str) -> None:
        """Journal the rename and move the bytes in the overlay."""
        data = self.read_bytes(src)
        self.overlay[_norm(dst)] = data
        self.overlay[_norm(src)] = None
        self._note("rename", dst, f"from {src}")

    def unlink(self, path: str) -> None:
        """Journal the removal."""
        self.overlay[_norm(path)] = None
        self._note("unlink", path)

    def remove_tree(self, path: str) -> None:
        """Journal the removal; ``path`` and every recorded path under it read as absent in this replay.

        Raises UnsafeRemovalError for ``/``, an empty or relative path (:func:`~fwman.host.base.removable_path`):
        the same refusal as a live host, so a replayed command cannot pass where the live one would not.
        """
        top = removable_path(path)
        recorded = self._file(top)
        on_disk = ["/" + str(f.relative_to(self.files_root)) for f in recorded.rglob("*")] if recorded.is_dir() else []
        for p in [*self.overlay, *self.dirs, *self.links, *self.sizes, *on_disk]:
            if p == top or p.startswith(top + "/"):
                self.overlay[p] = None
                self.dirs.pop(p, None)
                self.links.pop(p, None)
        self.overlay[top] = None
        self._note("remove_tree", path)

    def symlink(self, target: str, path: str) -> None:
        """Journal the link creation."""
        self.links[_norm(path)] = target
        self._note("symlink", path, target)
