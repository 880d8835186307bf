"""Questions about this machine's own filesystem that the CLI asks before it picks a Host.

Is ``--root`` an existing directory, may this user write under it, how many CPUs a build may use, and where
does stdout go once its reader left: the only file-system effects outside a Host, kept in the door's folder.
"""

from __future__ import annotations

import os
from typing import IO

from fwman.core.errors import UsageError


def existing_root(value: str, option: str = "--root") -> str:
    """Return ``value`` when it names an existing directory. Raises UsageError otherwise (a typo must not make
    a fresh ``etc/`` and ``usr/`` tree somewhere)."""
    if not value or not os.path.isdir(value):
        what = "does not exist" if not os.path.lexists(value) else "is not a directory"
        raise UsageError(
            f"{option} {value}: {what}",
            hint="give an existing directory that holds the host tree (or leave --root out for this machine)",
        )
    return value


def writable_by(path: str, euid: int) -> bool:
    """Return True when user ``euid`` may create entries in directory ``path``.

    ``os.access`` answers for this process; when ``euid`` is another user (tests pretend to be one), the owner
    and mode bits answer instead.
    """
    if not os.path.isdir(path):
        return False
    if euid == os.geteuid():
        return os.access(path, os.W_OK | os.X_OK)
    st = os.stat(path)
    return bool((st.st_uid == euid and st.st_mode & 0o300 == 0o300) or st.st_mode & 0o003 == 0o003)


def cpu_count() -> int:
    """Return how many CPUs this machine has (at least 1): the module build runs ``make -j`` here."""
    return os.cpu_count() or 1


def devnull_text() -> IO[str]:
    """Return a text stream to /dev/null (for a standard stream the process was started without)."""
    return open(os.devnull, "w", encoding="utf-8")  # lives as long as the process


def silence(stream: IO[str]) -> None:
    """Point ``stream``'s file descriptor at /dev/null after a broken pipe, so the final flush at exit cannot
    fail (Python would then exit 1 with nothing on stderr). An in-memory stream (tests) is left alone."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
