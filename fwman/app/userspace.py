"""``fwman userspace hold`` and ``release``: the use cases, whose results own their JSON shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.app.change import Change
from fwman.driver.build.manifest import now_iso
from fwman.driver.userspace_hold import hold, hold_plan, read_record, release, release_actions
from fwman.host.actions import pending
from fwman.host.base import Host


@dataclass
class Release(Change):
    """What ``userspace release`` did (or would do), and the packages the hold named (None: no readable record)."""

    packages: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.userspace-release/1`` (without the schema key)."""
        return {**super().to_json(), "packages": self.packages}


def release_hold(host: Host, *, dry_run: bool = False) -> Release:
    """Remove fwman's apt pin, blacklist entries and hold record; with ``dry_run`` return what would go.

    A damaged record is removed like a readable one (``packages`` is then None). Raises what the host raises on
    a failed removal.
    """
    if dry_run:
        record = read_record(host)
        todo = [a.describe() for a in pending(host, release_actions())]
        return Release(True, todo, None if record is None else dict(record.packages))
    record, done = release(host)
    return Release(False, done, None if record is None else dict(record.packages))


def hold_packages(host: Host, *, dry_run: bool = False) -> Release:
    """Pin every installed NVIDIA user-space package at its version; return what changed (or would) and the
    packages held (``fwman.userspace-hold/1``: the same shape as a release).

    Raises MissingError without dpkg-query, UsageError when no NVIDIA user-space package is installed.
    """
    if dry_run:
        packages, todo = hold_plan(host, now_iso())
        return Release(True, todo, dict(packages))
    packages, done = hold(host, now_iso())
    return Release(False, done, dict(packages))
