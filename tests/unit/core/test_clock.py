"""The one timestamp format fwman writes (core/clock.format_timestamp), on the installed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from fwman.core import clock
from fwman.firmware.catalog.schema import parse_timestamp


def test_every_time_is_written_in_utc_seconds_with_a_z() -> None:
    at = datetime(2026, 11, 29, 8, 30, 0, 999_999, tzinfo=UTC)
    assert clock.format_timestamp(at) == "2026-11-29T08:30:00Z"  # whole seconds: the fraction is dropped
    # an aware time in another zone is converted, a naive one is taken as UTC
    assert clock.format_timestamp(at.astimezone(timezone(timedelta(hours=-5)))) == "2026-11-29T08:30:00Z"
    assert clock.format_timestamp(datetime(2026, 11, 29, 8, 30)) == "2026-11-29T08:30:00Z"
    # the catalog reads what everyone writes
    assert parse_timestamp(clock.format_timestamp(at)) == at.replace(microsecond=0)


def test_timestamp_is_the_installed_clocks_now() -> None:
    with clock.using(clock.FixedClock(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))):
        assert clock.timestamp() == "2030-01-02T03:04:05Z"
