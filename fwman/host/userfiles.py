"""The user-file door: a file the user named on the command line (an image to flash, a ROM to inspect).

Such a path is relative to the real working directory of the process and is never mapped under ``--root`` or
into a snapshot: the user means a file on the machine in front of them, not a path of the host being managed.
"""

from __future__ import annotations

import os

from fwman.core.errors import MissingError, UsageError


def read_user_file(path: str, *, max_bytes: int | None = None) -> bytes:
    """Return the bytes of the file at ``path`` (relative to the real cwd), at most ``max_bytes`` of them.

    Raises MissingError when the file does not exist or cannot be read, UsageError when it is a directory or
    larger than ``max_bytes``.
    """
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory, not a file")
    try:
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except FileNotFoundError as e:
        raise MissingError(f"{path}: no such file") from e
    except OSError as e:
        raise MissingError(f"{path}: cannot read: {e.strerror or e}") from e
    if max_bytes is not None and len(data) > max_bytes:
        raise UsageError(f"{path} is larger than {max_bytes} bytes: not the file meant here")
    return data


def user_path(path: str) -> str:
    """Return the absolute path of the file or directory the user named (``~`` expanded, relative to the real cwd).

    The path is not checked: callers that need it to exist ask :func:`is_user_file` or the Host.
    """
    return os.path.abspath(os.path.expanduser(path))


def is_user_file(path: str) -> bool:
    """Return True when ``path`` (relative to the real cwd) names a regular file on this machine."""
    return os.path.isfile(path)


def write_user_file(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to the file at ``path`` (relative to the real cwd) atomically: a temporary file, a rename.

    For a file the user names as output (``fwman modules export -o FILE``). Raises UsageError when the
    directory does not exist or the file cannot be written.
    """
    from fwman.host.live import write_atomically  # the process door: doctor and audit read user files only

    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {path}: {directory} is not a directory")
    try:
        write_atomically(path, data, mode, prefix=f".{os.path.basename(path)}.")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e


def is_user_dir(path: str) -> bool:
    """Return True when ``path`` (relative to the real cwd) names a directory on this machine."""
    return os.path.isdir(path)


def list_user_dir(directory: str) -> list[str]:
    """Return the names of the entries of the user-named ``directory``, sorted (empty when it is not one)."""
    try:
        return sorted(os.listdir(directory))
    except OSError:  # not a directory, gone, unreadable: nothing listed; callers ask is_user_dir first
        return []
