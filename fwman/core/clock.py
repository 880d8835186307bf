"""The clock door: the only code in fwman that reads the time of day or the monotonic clock.

Everything else calls :func:`now_utc` / :func:`monotonic` (or :func:`sleep`). The CLI installs the clock of its
:class:`~fwman.cli.context.Environment` for one invocation (:func:`using`), so a test passes a
:class:`FixedClock` through the environment object instead of monkeypatching ``datetime``. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of time: wall-clock UTC for timestamps people read, monotonic seconds for durations."""

    def now_utc(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fixed clock advances instead)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now_utc(self) -> datetime:
        """Return ``datetime.now(UTC)``."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        time.sleep(seconds)


@dataclass
class FixedClock:
    """A clock for tests: ``at`` is the wall time; :meth:`sleep` and :meth:`advance` move both clocks."""

    at: datetime = field(default_factory=lambda: datetime(2025, 1, 1, tzinfo=UTC))
    ticks: float = 0.0

    def now_utc(self) -> datetime:
        """Return ``at`` (UTC)."""
        return self.at.astimezone(UTC)

    def monotonic(self) -> float:
        """Return the seconds advanced so far."""
        return self.ticks

    def sleep(self, seconds: float) -> None:
        """Advance instead of waiting."""
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        self.ticks += seconds
        self.at += timedelta(seconds=seconds)


_current: Clock = SystemClock()


def now_utc() -> datetime:
    """Return the current UTC time of the installed clock (timezone-aware)."""
    return _current.now_utc()


#: the one timestamp format fwman writes: UTC, whole seconds, ``Z`` (``2026-11-29T08:30:00Z``: TUF's metadata
#: form, used by the catalog, the journal, backups, history, captures, the flash lock)
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_timestamp(when: datetime) -> str:
    """Return ``when`` as ``YYYY-MM-DDTHH:MM:SSZ`` (an aware time converted to UTC; a naive one taken as UTC)."""
    return (when.astimezone(UTC) if when.tzinfo is not None else when).strftime(TIMESTAMP_FORMAT)


def timestamp() -> str:
    """Return the installed clock's current time as ``YYYY-MM-DDTHH:MM:SSZ`` (:func:`format_timestamp`)."""
    return format_timestamp(now_utc())


def monotonic() -> float:
    """Return the installed clock's monotonic seconds."""
    return _current.monotonic()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` on the installed clock."""
    _current.sleep(seconds)


def current() -> Clock:
    """Return the installed clock."""
    return _current


@contextmanager
def using(clock: Clock | None) -> Iterator[Clock]:
    """Install ``clock`` (None: keep the current one) until the block ends; yield the clock in force."""
    global _current
    previous = _current
    if clock is not None:
        _current = clock
    try:
        yield _current
    finally:
        _current = previous
