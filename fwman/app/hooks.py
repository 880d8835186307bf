"""``fwman hooks install`` and ``remove``: the use cases (what changed, or would: ``fwman.hooks-install/1``,
``fwman.hooks-remove/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import Change
from fwman.driver.hooks.files import install as install_files
from fwman.driver.hooks.files import install_actions, left_out, remove_actions
from fwman.driver.hooks.files import remove as remove_files
from fwman.driver.hooks.ownership import package_ownership, refuse_changes
from fwman.host.actions import Report, pending, silent
from fwman.host.base import Host


def remove_hooks(host: Host, *, dry_run: bool = False, report: Report = silent) -> Change:
    """Remove the kernel hooks, the boot checks and the catch-up unit fwman installed; return what was done.

    With ``dry_run`` nothing changes and the removals still needed are returned. Raises BlockedError when the
    Debian package owns the hooks (dpkg removes them), FwmanError when a removal fails.
    """
    owner = package_ownership(host)
    if owner is not None:
        refuse_changes(owner, "remove")  # raises for "remove"
    if dry_run:
        return Change(True, [action.describe() for action in pending(host, remove_actions())])
    return Change(False, remove_files(host, report))


@dataclass
class HooksInstall(Change):
    """What ``hooks install`` did (or would do); ``package``: the Debian package that owns the hooks instead."""

    package: str | None = None
    message: str = ""  # what to say when the package owns them (nothing is written then)
    #: files not for this host, with why (apt's boot check where there is no apt: see files.left_out)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.hooks-install/1`` (without the schema key)."""
        skipped = [{"path": path, "reason": why} for path, why in self.skipped.items()]
        return {**super().to_json(), "package": self.package, "skipped": skipped}


def install_hooks(host: Host, *, dry_run: bool = False, report: Report = silent) -> HooksInstall:
    """Install the kernel hooks, the boot checks and the catch-up unit; return what changed (or would).

    When the Debian package owns the hooks nothing is written and ``package`` names it; ``skipped`` names the
    files left out because they are not for this host (apt's boot check without apt). Raises BlockedError when
    a package file is missing or changed, FwmanError when a write fails.
    """
    owner = package_ownership(host)
    if owner is not None:  # dpkg's files: never written over
        return HooksInstall(dry_run, [], owner.package, refuse_changes(owner, "install"))
    skip = left_out(host)
    if dry_run:
        todo = pending(host, install_actions(skip=skip))
        return HooksInstall(True, [action.describe() for action in todo], skipped=skip)
    return HooksInstall(False, install_files(host, report, skip), skipped=skip)
