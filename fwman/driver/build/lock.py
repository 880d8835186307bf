"""The lock the kernel hook, the boot-time service and manual builds share.

Two kernel packages configured in one apt run, or the hook racing the catch-up service, must not build into
the same directories at once. The lock is ``flock`` on ``/run/lock/fwman.lock`` (as akmods uses ``flock -w``),
taken with a timeout. ``flock`` needs a real file descriptor, so the lock file is opened at the path the Host
maps it to (``Host.local_path``); a snapshot has no such path and nothing to protect, so no lock is taken there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from fwman.core import clock, paths
from fwman.core.errors import BlockedError
from fwman.host.base import Host

#: how long a hook or the service waits for another fwman build (akmods waits 900 s)
DEFAULT_TIMEOUT = 900.0


class LockTimeout(BlockedError):
    """Another fwman process held the module lock for longer than the timeout."""


@contextlib.contextmanager
def module_lock(host: Host, timeout: float = DEFAULT_TIMEOUT, poll: float = 0.2) -> Iterator[None]:
    """Hold the module lock for the ``with`` block.

    Raises LockTimeout when it cannot be taken within ``timeout`` seconds (0 means one try).
    """
    local = host.local_path(paths.LOCK_FILE)
    if local is None:  # a snapshot: nothing runs, nothing to lock
        yield
        return
    os.makedirs(os.path.dirname(local), exist_ok=True)
    fd = os.open(local, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = clock.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock.monotonic() >= deadline:
                    raise LockTimeout(
                        f"another fwman module build holds {paths.LOCK_FILE} (waited {timeout:g}s)",
                        hint="wait for it to finish (see /var/log/fwman/), or check `fwman modules status`",
                    ) from None
                clock.sleep(poll)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
