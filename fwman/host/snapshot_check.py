"""The snapshot-format validator: a snapshot is data from a stranger, never a pointer into this machine.

:func:`check_meta` checks the shape of ``snapshot.json`` (every key, every entry) and returns the problems;
:func:`check_tree` also walks ``files/`` and ``commands/`` on disk (no symbolic links, no special files, no
file larger than a capture records, every command output named in ``snapshot.json`` present).
:func:`confined` resolves one recorded host path to the file inside ``files/`` without following any link on
disk, and :func:`read_recorded` is the one way a snapshot's bytes are read (never more than
:data:`MAX_RECORDED_FILE`). ``SnapshotHost`` loads through these, and ``fwman capture --check DIR`` prints every
problem they find.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from pathlib import Path
from typing import Any

from fwman.core.errors import ParseError, UsageError
from fwman.core.jsontext import parse_json

FORMAT = "fwman-snapshot"
VERSION = 1
#: command outputs are plain file names directly under commands/ (capture writes 000.stdout, 001.stderr, ...)
_OUTPUT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_PATH_KEYS = ("links", "dirs", "sizes")
#: what ``overlay`` records of a path (Host.overlay_marker)
OVERLAY_MARKERS = ("whiteout", "opaque")
#: the most bytes one file of a snapshot may hold (a recorded file, a command output, snapshot.json itself).
#: A capture records a larger file by its size only (``sizes``) and leaves out a command whose output is
#: larger, so nothing bigger is ever written by ``fwman capture``; a replay refuses it instead of reading a
#: stranger's sparse file of gigabytes (a few KB in a tar) whole into memory
MAX_RECORDED_FILE = 16 << 20


class SnapshotFormatError(UsageError):
    """A snapshot that is malformed or reaches outside its directory (exit 2: the input is bad, not missing)."""


def _host_path_problem(path: object) -> str | None:
    """Return why ``path`` is not a clean absolute host path, or None."""
    if not isinstance(path, str):
        return f"{path!r} is not a string"
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    if "\x00" in path:
        return f"{path!r} contains a NUL byte"
    if any(part in (".", "..") for part in path.split("/")):
        return f"{path!r} contains '.' or '..'"
    return None


def link_leaves_root(path: str, target: str) -> bool:
    """Return True when link ``path`` -> ``target`` climbs above ``/`` (``..`` past the top)."""
    parts = [] if target.startswith("/") else [p for p in posixpath.dirname(path).split("/") if p]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return True
            parts.pop()
        else:
            parts.append(part)
    return False


def check_meta(meta: object) -> list[str]:
    """Return every problem with the shape of a parsed ``snapshot.json`` (empty when it is well formed)."""
    if not isinstance(meta, dict):
        return [f"snapshot.json: the top level is a {type(meta).__name__}, not an object"]
    problems: list[str] = []
    if meta.get("format") != FORMAT:
        problems.append(f"snapshot.json: format is {meta.get('format')!r}, not {FORMAT!r}")
        return problems
    if meta.get("version") != VERSION:
        problems.append(f"snapshot.json: version {meta.get('version')!r} is not supported (this fwman reads {VERSION})")
        return problems
    for key in (*_PATH_KEYS, "tools", "overlay"):
        value = meta.get(key, {})
        if not isinstance(value, dict):
            problems.append(f"snapshot.json: {key} is a {type(value).__name__}, not an object")
    for key in ("absent", "commands"):
        value = meta.get(key, [])
        if not isinstance(value, list):
            problems.append(f"snapshot.json: {key} is a {type(value).__name__}, not a list")
    if problems:
        return problems
    for key in _PATH_KEYS:
        for path, value in meta.get(key, {}).items():
            bad = _host_path_problem(path)
            if bad:
                problems.append(f"snapshot.json: {key} entry {bad}")
                continue
            if key == "links":
                if not isinstance(value, str) or not value or "\x00" in value:
                    problems.append(f"snapshot.json: link {path}: target {value!r} is not a path")
                elif link_leaves_root(path, value):
                    problems.append(f"snapshot.json: link {path} -> {value} leaves the snapshot (climbs above /)")
            elif key == "dirs":
                if not isinstance(value, list) or not all(
                    isinstance(n, str) and n not in ("", ".", "..") and "/" not in n and "\x00" not in n for n in value
                ):
                    problems.append(f"snapshot.json: dirs {path}: the listing is not a list of plain names")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(f"snapshot.json: sizes {path}: {value!r} is not a size in bytes")
    for path, marker in meta.get("overlay", {}).items():
        bad = _host_path_problem(path)
        if bad:
            problems.append(f"snapshot.json: overlay entry {bad}")
        elif marker not in OVERLAY_MARKERS:
            problems.append(f"snapshot.json: overlay {path}: {marker!r} is not one of {', '.join(OVERLAY_MARKERS)}")
    for path in meta.get("absent", []):
        bad = _host_path_problem(path)
        if bad:
            problems.append(f"snapshot.json: absent entry {bad}")
    for name, where in meta.get("tools", {}).items():
        if not isinstance(name, str) or not (where is None or isinstance(where, str)):
            problems.append(f"snapshot.json: tools {name!r}: expected a path or null")
    for i, cmd in enumerate(meta.get("commands", [])):
        problems.extend(_command_problems(i, cmd))
    return problems


def _command_problems(i: int, cmd: object) -> list[str]:
    where = f"snapshot.json: commands[{i}]"
    if not isinstance(cmd, dict):
        return [f"{where} is a {type(cmd).__name__}, not an object"]
    argv = cmd.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return [f"{where}: argv is not a non-empty list of strings"]
    problems = []
    rc = cmd.get("rc", 0)
    if isinstance(rc, bool) or not isinstance(rc, int):
        problems.append(f"{where} ({argv[0]}): rc {rc!r} is not an integer")
    if not isinstance(cmd.get("missing", False), bool):
        problems.append(f"{where} ({argv[0]}): missing is not true/false")
    for stream in ("stdout", "stderr"):
        name = cmd.get(stream)
        if name is None or name == "":
            continue
        if not isinstance(name, str) or not _OUTPUT_NAME.fullmatch(name) or name.startswith(".."):
            problems.append(
                f"{where} ({argv[0]}): {stream} {name!r} is not a file name under commands/ "
                "(no '/', no '..', no absolute path)"
            )
    return problems


def _no_link_below(base: Path, relative: str) -> Path:
    """Return ``base/relative`` when no component of ``relative`` (nor ``base``) is a symbolic link on disk.

    Raises SnapshotFormatError naming the link. A component that does not exist ends the walk: the caller sees
    a path that does not exist.
    """
    if base.is_symlink():
        raise SnapshotFormatError(f"snapshot {base.parent}: {base.name}/ is a symbolic link (a snapshot is data)")
    current = base
    for part in [p for p in relative.split("/") if p]:
        if part in (".", ".."):
            raise SnapshotFormatError(f"snapshot {base.parent}: entry {relative!r} contains '.' or '..'")
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return current
        except OSError as e:
            raise SnapshotFormatError(f"snapshot {base.parent}: cannot read {current}: {e.strerror}") from e
        if stat.S_ISLNK(st.st_mode):
            raise SnapshotFormatError(
                f"snapshot {base.parent}: {current.relative_to(base.parent)} is a symbolic link on disk; a snapshot "
                "records links in snapshot.json, never as links that could point into this machine",
                hint="check the snapshot with `fwman capture --check DIR`; ask its sender for a fresh capture",
            )
    return current


def confined(files_root: Path, host_path: str, *, tree_checked: bool = False) -> Path:
    """Return the file under ``files_root`` that records ``host_path``; no link on disk is followed.

    ``tree_checked``: :func:`check_tree` found no link anywhere under ``files_root`` when the replay opened,
    so only the name itself is checked (no ``.`` or ``..`` component) and no component is stat'ed again: a replay
    reads a hundred files or more, and a stat per component of each was a fifth of ``scan --snapshot``.
    Raises SnapshotFormatError when a component is ``.``/``..`` or a symbolic link.
    """
    if not tree_checked:
        return _no_link_below(files_root, host_path)
    parts = [p for p in host_path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise SnapshotFormatError(f"snapshot {files_root.parent}: entry {host_path!r} contains '.' or '..'")
    return files_root.joinpath(*parts)


def command_output(directory: Path, name: str) -> Path:
    """Return ``directory/commands/name``, a regular file not behind any link. Raises SnapshotFormatError."""
    if not _OUTPUT_NAME.fullmatch(name) or name.startswith(".."):
        raise SnapshotFormatError(f"snapshot {directory}: command output {name!r} is not a file under commands/")
    path = _no_link_below(directory / "commands", name)
    if not path.is_file():
        raise SnapshotFormatError(
            f"snapshot {directory}: commands/{name} is named in snapshot.json but missing",
            hint="the snapshot is incomplete; ask its sender for a fresh capture",
        )
    return path


def oversize(name: str | Path, size: int) -> str:
    """Return the problem line for snapshot file ``name`` (relative to the snapshot) of ``size`` bytes."""
    return (
        f"{name} is {size} bytes, more than the {MAX_RECORDED_FILE} ({MAX_RECORDED_FILE >> 20} MiB) a capture "
        "records (a larger file is recorded by its size only)"
    )


def read_recorded(path: Path, directory: Path, limit: int | None = None) -> bytes:
    """Return the bytes of ``path``, a regular file of the snapshot at ``directory`` (at most ``limit`` bytes).

    Opened without following a link and without blocking, and checked on the open descriptor, so what is read
    is the file that was checked. Raises SnapshotFormatError when it is not a regular file or holds more than
    :data:`MAX_RECORDED_FILE` bytes (nothing is read then); FileNotFoundError when it is absent.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as e:
        raise SnapshotFormatError(
            f"snapshot {directory}: cannot read {path.relative_to(directory)}: {e.strerror}",
            hint=f"`fwman capture --check {directory}` lists every problem",
        ) from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotFormatError(f"snapshot {directory}: {path.relative_to(directory)} is not a regular file")
        if st.st_size > MAX_RECORDED_FILE:
            raise SnapshotFormatError(
                f"snapshot {directory}: {oversize(path.relative_to(directory), st.st_size)}",
                hint=f"a snapshot from `fwman capture` never holds one; `fwman capture --check {directory}` lists "
                "every problem",
            )
        # the size was checked on this descriptor, but a file may grow while it is read: read one byte past
        data = f.read(MAX_RECORDED_FILE + 1 if limit is None else min(limit, MAX_RECORDED_FILE + 1))
    if len(data) > MAX_RECORDED_FILE:
        raise SnapshotFormatError(f"snapshot {directory}: {oversize(path.relative_to(directory), len(data))}")
    return data


def _walk(top: Path, directory: Path, problems: list[str]) -> None:
    """Append to ``problems`` every link, special file or file too large for a capture below ``top``.

    os.scandir's entries carry the file type from the directory listing, so a replay pays one listing per
    directory and one stat per regular file (its size: a few microseconds each) before it starts (this runs
    at every ``--snapshot`` command).
    """
    pending = [str(top)]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_symlink():
                    rel = Path(entry.path).relative_to(directory)
                    problems.append(f"{rel} is a symbolic link (to {os.readlink(entry.path)})")
                elif entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    problems.append(f"{Path(entry.path).relative_to(directory)} is not a regular file or directory")
                elif (size := entry.stat(follow_symlinks=False).st_size) > MAX_RECORDED_FILE:
                    problems.append(oversize(Path(entry.path).relative_to(directory), size))


def check_tree(directory: Path, meta: dict[str, Any]) -> list[str]:
    """Return every problem on disk: links, special files and oversized files under files/ and commands/, and
    missing outputs."""
    problems: list[str] = []
    for sub in ("files", "commands"):
        top = directory / sub
        if top.is_symlink():
            problems.append(f"{sub}/ is a symbolic link")
            continue
        if not top.exists():
            continue
        _walk(top, directory, problems)
    for i, cmd in enumerate(meta.get("commands", [])):
        for stream in ("stdout", "stderr"):
            name = cmd.get(stream)
            if name and not (directory / "commands" / name).is_file():
                problems.append(f"commands[{i}] ({cmd['argv'][0]}): commands/{name} is missing")
    return problems


def check_snapshot(directory: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[str]]:
    """Return the parsed ``snapshot.json`` (None when unusable) and every problem of the snapshot at ``directory``."""
    base = Path(directory)
    meta_path = base / "snapshot.json"
    if not base.is_dir():
        return None, [f"{base} is not a directory"]
    if meta_path.is_symlink():
        return None, ["snapshot.json is a symbolic link"]
    try:
        meta = parse_json(read_recorded(meta_path, base), "snapshot", "snapshot.json")
    except FileNotFoundError:
        return None, ["no snapshot.json (not a snapshot directory)"]
    except SnapshotFormatError as e:
        return None, [e.message.removeprefix(f"snapshot {base}: ")]
    except ParseError as e:
        return None, [f"snapshot.json is not readable JSON: {e.detail}"]
    except OSError as e:
        return None, [f"snapshot.json is not readable JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}"]
    problems = check_meta(meta)
    if problems:
        return None, problems
    assert isinstance(meta, dict)
    return meta, check_tree(base, meta)
