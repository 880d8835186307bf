"""The host-wide flash lock: one flash, restore or upgrade apply at a time (as fwupd serialises device updates).

Two ``fwman flash`` runs at once would both back up every card, the EEPROM being written included, and start two
nvflash writes. The lock is ``flock(2)`` on ``/var/lib/fwman/flash.lock`` (the path the Host maps it to, so a
``--root`` tree has its own lock), and the file records who holds it: pid, command, since when (UTC) and the
boot id (``/proc/sys/kernel/random/boot_id``).

``flock`` belongs to the open file, so the kernel releases it when the holder dies, however it dies: a lock that
can be taken while the file still names a holder is *stale* (that holder was killed, or the machine rebooted),
and is taken over with a line saying whose it was and why it is stale. The pid and boot id are the kernel's
(they describe the process, not the tree), so they are read from this machine's ``/proc`` even under
``--root``. A snapshot has no file behind the path and nothing runs on it: no lock is taken there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fwman.core import clock, paths
from fwman.core.errors import BlockedError, ParseError
from fwman.core.jsonout import fields_of
from fwman.core.jsontext import parse_json
from fwman.host.base import Host

FORMAT = "fwman-lock"
#: the most of the record read back (a record is a few hundred bytes; a huge file is not a record)
MAX_RECORD = 64 * 1024


@dataclass(frozen=True)
class LockHolder:
    """Who a lock record names: the process, its command, when it took the lock and on which boot."""

    pid: int
    command: str
    since: str
    boot_id: str | None

    def describe(self) -> str:
        """Return ``pid 123 (fwman flash --card 41:00.0 ...) since 2026-12-01T10:00:00Z``."""
        return f"pid {self.pid} ({self.command}) since {self.since}"

    def to_dict(self) -> dict[str, object]:
        """Return the JSON form of the record: its format, then its fields."""
        return {"format": FORMAT, **fields_of(self)}


class LockHeld(BlockedError):
    """Another process holds the lock (exit 3); ``holder`` is what its record says (None when unreadable)."""

    def __init__(self, message: str, holder: LockHolder | None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


def boot_id() -> str | None:
    """Return this machine's boot id, or None where the kernel does not expose one."""
    try:
        with open(paths.BOOT_ID_FILE, encoding="ascii") as f:
            return f.read(128).strip() or None  # a UUID and a newline
    except (OSError, UnicodeDecodeError):
        return None


def pid_alive(pid: int) -> bool:
    """Return True when process ``pid`` exists on this machine (the kernel's, not the ``--root`` tree's)."""
    return pid > 0 and os.path.exists(f"/proc/{pid}")


def parse_record(data: bytes) -> LockHolder | None:
    """Return the holder a lock file records, or None when it is empty or not a lock record."""
    if not data.strip():
        return None
    try:
        doc = parse_json(data.decode("utf-8", errors="replace"), "lock", "json")
    except ParseError:  # damage means "no readable record": the lock itself still decides
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    pid, command, since, boot = doc.get("pid"), doc.get("command"), doc.get("since"), doc.get("boot_id")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(command, str) or not isinstance(since, str):
        return None
    return LockHolder(pid, command, since, boot if isinstance(boot, str) else None)


def stale_reason(holder: LockHolder, current_boot: str | None) -> str:
    """Return why the record of a lock nobody holds is stale: another boot, or its holder gone."""
    if holder.boot_id and current_boot and holder.boot_id != current_boot:
        return "taken on another boot"
    if pid_alive(holder.pid):
        return f"pid {holder.pid} is running but no longer holds it"
    return "its holder is gone"


def _read_record(fd: int) -> LockHolder | None:
    os.lseek(fd, 0, os.SEEK_SET)
    return parse_record(os.read(fd, MAX_RECORD))


def _write_record(fd: int, holder: LockHolder | None) -> None:
    data = b"" if holder is None else (json.dumps(holder.to_dict()) + "\n").encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
    os.fsync(fd)


#: tries, and seconds between them, when the lock is held by someone with no record yet: `flash status`'s probe
#: (a shared lock for microseconds) or a holder between its flock and its record; a holder with a record is
#: refused at once
BRIEF_TRIES = 5
BRIEF_WAIT = 0.05


def _take(fd: int) -> tuple[bool, LockHolder | None]:
    """Take the lock on ``fd``: return (True, None) when taken, else (False, who holds it; None: no record)."""
    holder = None
    for attempt in range(BRIEF_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True, None
        except BlockingIOError:
            holder = _read_record(fd)
            if holder is not None:
                break
            if attempt < BRIEF_TRIES - 1:
                clock.sleep(BRIEF_WAIT)
    return False, holder


@contextlib.contextmanager
def exclusive(
    host: Host,
    command: str,
    *,
    path: str = paths.FLASH_LOCK_FILE,
    what: str = "flash",
    say: Callable[[str], None] = lambda text: None,
) -> Iterator[LockHolder | None]:
    """Hold the lock at ``path`` for the ``with`` block; yield this process's record (None on a snapshot).

    Never waits: a second flash must not queue behind a write that may take minutes and then act on cards the
    first one changed. Raises LockHeld (exit 3) naming the holder when another process holds it. A stale
    record (its holder gone, or another boot) is taken over, and ``say`` gets one line saying so.
    """
    local = host.local_path(path)
    if local is None:
        yield None
        return
    os.makedirs(os.path.dirname(local), exist_ok=True)
    fd = os.open(local, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        taken, holder = _take(fd)
        if not taken:
            who = holder.describe() if holder else "a process whose record is unreadable"
            raise LockHeld(
                f"another {what} is running: {who} holds {path}",
                holder,
                hint="one flash, restore or upgrade at a time: wait for it to finish (fwman flash status)",
            ) from None
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            raw = os.read(fd, MAX_RECORD)
            old = parse_record(raw)
            current = boot_id()
            if old is not None:
                say(f"took over a stale {what} lock: {old.describe()}, {stale_reason(old, current)}")
            elif raw.strip():  # a record is evidence: a damaged one is said, never passed over in silence
                say(f"took over a stale {what} lock whose record {path} was unreadable ({len(raw)} bytes)")
            mine = LockHolder(os.getpid(), command, clock.timestamp(), current)
            _write_record(fd, mine)
            try:
                yield mine
            finally:
                _write_record(fd, None)  # a clean release leaves no record: only a killed holder leaves one
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def has_locks(host: Host, path: str = paths.FLASH_LOCK_FILE) -> bool:
    """Return True when ``host`` has a real file behind the lock path (False on a snapshot: nothing runs)."""
    return host.local_path(path) is not None


def holder_now(host: Host, path: str = paths.FLASH_LOCK_FILE) -> LockHolder | None:
    """Return who holds the lock now (their record), or None when nobody does (or on a snapshot: see
    :func:`has_locks`). A held lock whose record is unreadable is a holder of pid 0.

    Probes with a shared, non-blocking ``flock`` released at once, so it never disturbs a flash.
    """
    local = host.local_path(path)
    if local is None:
        return None
    try:
        fd = os.open(local, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_record(fd) or LockHolder(0, "unknown", "unknown", None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
