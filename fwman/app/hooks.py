"""``fwman hooks remove``: the use case (what was removed, or would be: a Change, ``fwman.hooks-remove/1``)."""

from __future__ import annotations

from fwman.app.change import Change
from fwman.driver.hooks.files import remove as remove_files
from fwman.driver.hooks.files import remove_actions
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
