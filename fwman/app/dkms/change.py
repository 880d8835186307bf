"""``fwman dkms block`` and ``unblock``: the use cases (what was done, or would be), whose results own their JSON
shapes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.app.change import ChangeResult, free, plan_text
from fwman.app.text import Out, Result, say
from fwman.core import paths
from fwman.core.jsonout import meta
from fwman.driver import dkms
from fwman.host.actions import pending
from fwman.host.base import Host


@dataclass
class DkmsUnblock(Result):
    """What ``dkms unblock`` did (or, in a dry run, would do)."""

    dry_run: bool = field(metadata=meta(then=("changed",)))
    blocked: bool  # False: fwman had not blocked DKMS (no block record), nothing to undo
    actions: list[str] = field(default_factory=list)  # done, or to do in a dry run; "skip M/V: ..." lines too

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run; an unblock removes the record at least)."""
        return self.blocked and not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return that there was nothing to undo, the plan, or that DKMS builds the stock modules again."""
        if not self.blocked:
            return [say(f"DKMS is not blocked by fwman (no {paths.DKMS_BLOCK_STATE}): nothing to undo")]
        if self.dry_run:
            return plan_text(self.actions, "nothing to undo")
        return [say("DKMS unblocked: `dkms autoinstall` will build NVIDIA's stock modules again")]


def unblock_dkms(
    host: Host, *, dry_run: bool = False, tell: Callable[[str], None] | None = None, permit: Callable[[], None] = free
) -> DkmsUnblock:
    """Undo ``fwman dkms block`` (the apt pin goes, the removed modules are registered again); return what was done.

    Raises what ``permit`` raises, VerificationError for a damaged block record, FwmanError when dkms fails.
    """
    if not dry_run:
        permit()
    planned = dkms.unblock_plan(host)
    if planned is None:
        return DkmsUnblock(dry_run, False)
    actions, left = planned
    if dry_run:
        return DkmsUnblock(True, True, [*(a.describe() for a in pending(host, actions)), *left])
    return DkmsUnblock(False, True, dkms.unblock(host, actions, left, tell))


def block_dkms(
    host: Host, *, dry_run: bool = False, tell: Callable[[str], None] | None = None, permit: Callable[[], None] = free
) -> ChangeResult:
    """Remove NVIDIA's DKMS modules, pin their packages away and record it (``fwman.dkms-block/1``); return what
    was done (or, in a dry run, would be; each step was reported as it was done). Raises what ``permit`` raises,
    FwmanError when dkms fails."""
    if not dry_run:
        permit()
    plan = dkms.block_plan(host)
    if dry_run:
        done = [*(a.describe() for a in pending(host, plan.actions)), *plan.kept()]
    else:
        done = dkms.block(host, plan, tell)
    return ChangeResult(dry_run, done, "DKMS already blocked: nothing to do", "")
