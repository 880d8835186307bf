"""``fwman hooks remove``: the use case (what was removed, or would be), whose result owns its JSON shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.driver.hooks.files import remove as remove_files
from fwman.driver.hooks.files import remove_actions
from fwman.driver.hooks.ownership import package_ownership, refuse_changes
from fwman.host.actions import Report, pending, silent
from fwman.host.base import Host


@dataclass
class HooksChange:
    """What ``hooks remove`` did (or, in a dry run, would do)."""

    dry_run: bool
    actions: list[str] = field(default_factory=list)  # descriptions: done, or to do in a dry run

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run)."""
        return bool(self.actions) and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.hooks-remove/1`` (without the schema key)."""
        return {"dry_run": self.dry_run, "changed": self.changed, "actions": self.actions}


def remove_hooks(host: Host, *, dry_run: bool = False, report: Report = silent) -> HooksChange:
    """Remove the kernel hooks, the boot checks and the catch-up unit fwman installed; return what was done.

    With ``dry_run`` nothing changes and the removals still needed are returned. Raises BlockedError when the
    Debian package owns the hooks (dpkg removes them), FwmanError when a removal fails.
    """
    owner = package_ownership(host)
    if owner is not None:
        refuse_changes(owner, "remove")  # raises for "remove"
    if dry_run:
        return HooksChange(True, [action.describe() for action in pending(host, remove_actions())])
    return HooksChange(False, remove_files(host, report))
