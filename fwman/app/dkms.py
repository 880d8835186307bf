"""``fwman dkms block`` and ``unblock``: the use cases (what was done, or would be), whose results own their JSON
shapes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import Change
from fwman.driver import dkms
from fwman.host.base import Host


@dataclass
class DkmsUnblock:
    """What ``dkms unblock`` did (or, in a dry run, would do)."""

    dry_run: bool
    blocked: bool  # False: fwman had not blocked DKMS (no block record), nothing to undo
    actions: list[str] = field(default_factory=list)  # done, or to do in a dry run; "not re-added: ..." notes too

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run; an unblock removes the record at least)."""
        return self.blocked and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.dkms-unblock/1`` (without the schema key)."""
        return {"dry_run": self.dry_run, "changed": self.changed, "blocked": self.blocked, "actions": self.actions}


def unblock_dkms(host: Host, *, dry_run: bool = False, report: Callable[[str], None] | None = None) -> DkmsUnblock:
    """Undo ``fwman dkms block`` (the apt pin goes, the removed modules are registered again); return what was done.

    Raises VerificationError for a damaged block record, FwmanError when dkms fails.
    """
    done = dkms.unblock(host, report=None if dry_run else report, dry_run=dry_run)
    return DkmsUnblock(dry_run, done is not None, done or [])


def block_dkms(host: Host, *, dry_run: bool = False, report: Callable[[str], None] | None = None) -> Change:
    """Remove NVIDIA's DKMS modules, pin their packages away and record it (``fwman.dkms-block/1``); return what
    was done (or, in a dry run, would be). Raises FwmanError when dkms fails."""
    return Change(dry_run, dkms.block(host, dry_run=dry_run, report=None if dry_run else report))
