"""Recording a host into a snapshot: the writer, and a Host wrapper that records every read it serves.

``fwman capture`` runs the same readers as ``scan``, ``audit`` and ``doctor`` through a :class:`RecordingHost`,
so a snapshot holds exactly what those commands read; a replay of them never meets an unrecorded path.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fwman import __version__
from fwman.core import clock
from fwman.core.errors import FwmanError, MissingError, UsageError
from fwman.host.base import CommandResult, Host, PendingCommand, resolve_links
from fwman.host.snapshot_check import FORMAT, MAX_RECORDED_FILE, VERSION

if TYPE_CHECKING:
    from fwman.host.pty import PtyResult

_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_MIG_UUID = re.compile(r"MIG-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SERIAL_XML = re.compile(r"<(serial|board_serial|module_serial)>[^<]*</\1>")
_SERIAL_LINE = re.compile(r"(\[SN\] Serial number:|Serial Number\s*:|Serial number:)[^\n]*")


class Redactor:
    """Replaces GPU UUIDs and serial numbers with stable placeholders (the same UUID gets the same one)."""

    def __init__(self) -> None:
        self.uuids: dict[str, str] = {}

    def _uuid(self, m: re.Match[str]) -> str:
        original = m.group(0).lower()
        if original not in self.uuids:
            n = len(self.uuids) + 1
            prefix = original.split("-", 1)[0].upper()
            self.uuids[original] = f"{prefix}-00000000-0000-0000-0000-{n:012d}"
        return self.uuids[original]

    def text(self, text: str) -> str:
        """Return ``text`` with UUIDs and serial numbers redacted."""
        text = _UUID.sub(self._uuid, text)
        text = _MIG_UUID.sub(self._uuid, text)
        text = _SERIAL_XML.sub(lambda m: f"<{m.group(1)}>REDACTED</{m.group(1)}>", text)
        return _SERIAL_LINE.sub(lambda m: f"{m.group(1)} REDACTED", text)

    def data(self, data: bytes) -> bytes:
        """Return file bytes redacted when they are text; binary data (config space) is kept as is."""
        if b"\0" in data:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        return self.text(text).encode("utf-8")


class SnapshotWriter:
    """Collects files, links, listings, tools and commands, then writes a snapshot directory atomically."""

    def __init__(self, *, redact: bool = True, constructed: bool = False, note: str | None = None) -> None:
        self.redactor = Redactor() if redact else None
        self.constructed = constructed
        self.note = note
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.dirs: dict[str, list[str]] = {}
        self.absent: set[str] = set()
        self.tools: dict[str, str | None] = {}
        self.commands: dict[tuple[str, ...], CommandResult] = {}
        self.sizes: dict[str, int] = {}  # files recorded by size only (over the cap, or only seen to be there)
        self.overlay: dict[str, str] = {}  # overlay whiteouts and opaque directories met

    def _clean(self, data: bytes) -> bytes:
        return self.redactor.data(data) if self.redactor else data

    def add_file(self, path: str, data: bytes | str) -> None:
        """Record file ``path`` with ``data``."""
        raw = data.encode() if isinstance(data, str) else data
        self.files[posixpath.normpath(path)] = self._clean(raw)
        # the content says more than a size recorded when the file was only looked at (exists, is_dir)
        self.sizes.pop(posixpath.normpath(path), None)

    def add_link(self, path: str, target: str) -> None:
        """Record symbolic link ``path`` -> ``target``."""
        self.links[posixpath.normpath(path)] = target

    def add_dir(self, path: str, names: Sequence[str]) -> None:
        """Record the complete listing of directory ``path``."""
        self.dirs[posixpath.normpath(path)] = sorted(set(names))

    def add_size(self, path: str, size: int) -> None:
        """Record the size of ``path`` without its content."""
        self.sizes[posixpath.normpath(path)] = size

    def add_overlay_marker(self, path: str, marker: str) -> None:
        """Record that ``path`` is an overlay ``"whiteout"`` or ``"opaque"`` directory."""
        self.overlay[posixpath.normpath(path)] = marker

    def add_absent(self, path: str) -> None:
        """Record that ``path`` did not exist."""
        self.absent.add(posixpath.normpath(path))

    def add_tool(self, name: str, path: str | None) -> None:
        """Record where tool ``name`` was found (None: not installed)."""
        self.tools[name] = path

    def add_command(self, result: CommandResult) -> None:
        """Record a command's result."""
        if self.redactor:
            result = replace(result, stdout=self.redactor.text(result.stdout), stderr=self.redactor.text(result.stderr))
        self.commands[tuple(result.argv)] = result

    def write(self, directory: str | os.PathLike[str], *, captured_at: str | None = None) -> Path:
        """Write the snapshot to ``directory`` (created; must be absent or empty) and return its path.

        Written into a temp directory beside it and renamed, so an interrupted capture leaves nothing half-made.
        Raises UsageError when ``directory`` exists and is not empty, or cannot be made (a file in its way, no
        permission): the user named it. Raises FwmanError when writing into it fails later (a full disk).
        """
        target = Path(directory)
        try:
            if target.exists() and any(target.iterdir()):
                raise UsageError(f"{target} exists and is not empty", hint="capture into a new directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        except OSError as e:
            raise UsageError(
                f"DIRECTORY {target}: cannot make it: {e.strerror or type(e).__name__}",
                hint="name a new or empty directory whose parents are directories you may write",
            ) from e
        try:
            commands: list[dict[str, Any]] = []
            for i, (argv, res) in enumerate(sorted(self.commands.items())):
                entry: dict[str, Any] = {"argv": list(argv), "rc": res.rc, "missing": res.missing}
                for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
                    if text:
                        name = f"{i:03d}.{stream}"
                        (tmp / "commands").mkdir(exist_ok=True)
                        (tmp / "commands" / name).write_text(text)
                        entry[stream] = name
                commands.append(entry)
            for path, data in sorted(self.files.items()):
                dest = tmp / "files" / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            meta = {
                "format": FORMAT,
                "version": VERSION,
                "captured_at": captured_at or clock.timestamp(),
                "fwman_version": __version__,
                "redacted": self.redactor is not None,
                "constructed": self.constructed,
                "note": self.note,
                "links": dict(sorted(self.links.items())),
                "dirs": dict(sorted(self.dirs.items())),
                "absent": sorted(self.absent),
                "sizes": dict(sorted(self.sizes.items())),
                "tools": dict(sorted(self.tools.items())),
                "commands": commands,
            }
            if self.overlay:  # optional: a snapshot without container layers has none (and stays as it was)
                meta["overlay"] = dict(sorted(self.overlay.items()))
            (tmp / "snapshot.json").write_text(json.dumps(meta, indent=1) + "\n")
            if target.exists():
                target.rmdir()
            tmp.rename(target)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FwmanError(
                f"cannot write the snapshot {target}: {e.strerror or type(e).__name__}",
                hint="free space there (or capture into another directory) and run the capture again",
            ) from e
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target


class RecordingHost:
    """Wraps a live Host for reading and records every answer into a SnapshotWriter. Read-only: writes refuse.

    A capture is one moment: a command asked for twice is run once and answered from the recording after.
    A file larger than ``max_file_bytes`` (MAX_RECORDED_FILE, which the snapshot format owns) is recorded by
    its size only: whole driver modules (60 MiB and more) would bloat a snapshot, and a replay that reads one
    gets a NotRecordedError it reports like any unreadable file. A command whose output is larger is not
    recorded at all. A replay refuses anything larger on disk, so a capture never writes what it would refuse.
    """

    def __init__(self, inner: Host, writer: SnapshotWriter, max_file_bytes: int = MAX_RECORDED_FILE) -> None:
        self.inner = inner
        self.writer = writer
        self.max_file_bytes = max_file_bytes
        self.description = f"recording {inner.description}"
        self.journal = inner.journal

    def realpath(self, path: str) -> str:
        """Return ``path`` resolved, recording every link met on the way (so the replay resolves the same)."""

        def read_link(candidate: str) -> str | None:
            if not self.inner.is_link(candidate):
                return None
            target = self.inner.readlink(candidate)
            self.writer.add_link(candidate, target)
            return target

        return resolve_links(path, read_link)

    def _record_state(self, real: str) -> str:
        """Record what ``real`` is (absent, a directory with its listing, a file by its size); return which:
        "absent", "dir" or "file"."""
        if not self.inner.exists(real):
            self.writer.add_absent(real)
            return "absent"
        if self.inner.is_dir(real):
            self._record_dir(real)
            return "dir"
        self._record_present_file(real)
        return "file"

    def exists(self, path: str) -> bool:
        """Return and record whether ``path`` exists (a directory with its listing, a file by its size)."""
        return self._record_state(self.realpath(path)) != "absent"

    def _record_dir(self, real: str) -> list[str]:
        names = self.inner.listdir(real)
        self.writer.add_dir(real, names)
        return names

    def _record_present_file(self, real: str) -> None:
        """Record that ``real`` is there and is not a directory, without reading it: by its size.

        The replay must answer ``exists`` and ``is_dir`` as this host did. Its parent's listing says only that
        the name is there, not that it is a file, and reading it (modules.alias and the like, megabytes each)
        would bloat the snapshot for a question about its type.
        """
        if real in self.writer.files or real in self.writer.sizes:
            return
        try:
            size = self.inner.stat_size(real)
        except MissingError:  # gone between the two looks: the next question records what it finds
            return
        self.writer.add_size(real, size)

    def is_dir(self, path: str) -> bool:
        """Return and record whether ``path`` is a directory (a directory with its listing, a file by size)."""
        return self._record_state(self.realpath(path)) == "dir"

    def is_link(self, path: str) -> bool:
        """Return and record whether ``path`` is a link."""
        parent = self.realpath(posixpath.dirname(posixpath.normpath(path)))
        full = posixpath.join(parent, posixpath.basename(posixpath.normpath(path)))
        if self.inner.is_link(full):
            self.writer.add_link(full, self.inner.readlink(full))
            return True
        self._record_dir(parent) if self.inner.is_dir(parent) else None
        return False

    def listdir(self, path: str) -> list[str]:
        """Return and record the listing of ``path``."""
        real = self.realpath(path)
        try:
            return self._record_dir(real)
        except MissingError:
            self.writer.add_absent(real)
            raise

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """Return and record the bytes of ``path`` (at most ``limit``).

        A bounded read stays bounded while recording: no more than the larger of ``limit`` and what a capture
        records whole is read (a larger file is recorded by its size, as the replay expects).
        """
        if limit is None:
            return self._record_read(self.realpath(path), self.inner.read_bytes)
        real, cap = self.realpath(path), max(limit, self.max_file_bytes) + 1
        with self._absence_recorded(real):
            data = self.inner.read_bytes(real, cap)
            if len(data) > self.max_file_bytes:
                self.writer.add_size(real, self.inner.stat_size(real))  # recorded by size, as the replay expects
            else:
                self.writer.add_file(real, data)
        return data[:limit]

    def read_text(self, path: str) -> str:
        """Return and record ``path`` as text."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_records(self, path: str, limit: int = 16 << 20) -> bytes:
        """Return and record the records device ``path`` holds now, as a file: a replay answers it from them."""
        return self._record_read(self.realpath(path), lambda real: self.inner.read_records(real, limit))

    @contextlib.contextmanager
    def _absence_recorded(self, real: str) -> Iterator[None]:
        """Run the block; when it raises MissingError and ``real`` is not there (not a path that exists but
        cannot be read as asked), record ``real`` as absent, then raise it again."""
        try:
            yield
        except MissingError:
            if not self.inner.exists(real):
                self.writer.add_absent(real)
            raise

    def _record_read(self, real: str, read: Callable[[str], bytes]) -> bytes:
        """Return ``read(real)`` and record it: the bytes, or the size alone when larger than
        ``max_file_bytes``, or the path's absence. Raises MissingError as ``read`` does."""
        with self._absence_recorded(real):
            data = read(real)
        if len(data) > self.max_file_bytes:
            self.writer.add_size(real, len(data))
        else:
            self.writer.add_file(real, data)
        return data

    def readlink(self, path: str) -> str:
        """Return and record the target of link ``path``."""
        parent = self.realpath(posixpath.dirname(posixpath.normpath(path)))
        full = posixpath.join(parent, posixpath.basename(posixpath.normpath(path)))
        with self._absence_recorded(full):
            target = self.inner.readlink(full)
        self.writer.add_link(full, target)
        return target

    def stat_size(self, path: str) -> int:
        """Return and record the size of ``path`` (without reading its content)."""
        real = self.realpath(path)
        with self._absence_recorded(real):
            size = self.inner.stat_size(real)
        if real not in self.writer.files:
            self.writer.add_size(real, size)
        return size

    def file_mode(self, path: str) -> int | None:
        """Return None, as the replay of this recording will (a snapshot records no permission bits)."""
        self.stat_size(path)
        return None

    def overlay_marker(self, path: str) -> str | None:
        """Return and record (when there is one) the overlay marker of ``path``."""
        parent, name = posixpath.split(posixpath.normpath(path))
        full = posixpath.join(self.realpath(parent), name) if name else "/"
        marker = self.inner.overlay_marker(full)
        if marker is not None:
            self.writer.add_overlay_marker(full, marker)
        return marker

    def which(self, tool: str) -> str | None:
        """Return and record where ``tool`` is."""
        found = self.inner.which(tool)
        self.writer.add_tool(tool, found)
        return found

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` on the inner host and record the result (a plain repeat is answered from the recording)."""
        plain = env is None and cwd is None and input_text is None
        if plain and tuple(argv) in self.writer.commands:
            return self.writer.commands[tuple(argv)]
        return self._record(self.inner.run(argv, timeout=timeout, env=env, cwd=cwd, input_text=input_text))

    def _record(self, result: CommandResult) -> CommandResult:
        """Record ``result`` and return it."""
        if max(len(result.stdout.encode()), len(result.stderr.encode())) <= self.max_file_bytes:
            # an output larger than a replay reads is left out: its replay says "did not record the command"
            # rather than refusing the whole snapshot
            self.writer.add_command(result)
        return result

    def start(self, argv: Sequence[str], *, timeout: float | None = 60.0) -> PendingCommand:
        """Start ``argv`` on the inner host; its result is recorded when it is waited for (as :meth:`run`)."""
        if tuple(argv) in self.writer.commands:
            return PendingCommand.finished(self.writer.commands[tuple(argv)])
        pending = self.inner.start(argv, timeout=timeout)
        return PendingCommand(lambda: self._record(pending.result()), poll=pending.done)

    def local_path(self, path: str) -> str | None:
        """Return the inner host's filesystem path."""
        return self.inner.local_path(path)

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise UsageError("capture is read-only: a reader tried to change the host")

    write_bytes = mkdir = rename = unlink = symlink = remove_tree = _refuse

    def run_interactive(
        self,
        argv: Sequence[str],
        *,
        answers: Sequence[tuple[str, str]],
        on_output: Callable[[str], None] | None = None,
        timeout: float = 600.0,
    ) -> PtyResult:
        """Refuse: capture never runs an interactive (changing) tool."""
        raise UsageError(f"capture is read-only: it does not run {' '.join(argv)}")
