"""``fwman hooks install``, ``remove`` and ``status``: the use cases (what changed, or would:
``fwman.hooks-install/1``, ``fwman.hooks-remove/1``; what is installed: ``fwman.hooks-status/1``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import ChangeResult, change, free
from fwman.app.text import Out, Result, say, table
from fwman.core.jsonout import OMIT, meta
from fwman.driver.hooks.files import HooksStatus, install_actions, left_out, remove_actions
from fwman.driver.hooks.files import install as install_files
from fwman.driver.hooks.files import remove as remove_files
from fwman.driver.hooks.files import status as files_status
from fwman.driver.hooks.ownership import PackageOwnership, package_ownership, refuse_changes
from fwman.host.actions import Tell, pending, silent
from fwman.host.base import Host


def remove_hooks(
    host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent
) -> ChangeResult:
    """Remove the kernel hooks, the boot checks and the catch-up unit fwman installed; return what was done.

    With ``dry_run`` nothing changes and the removals still needed are returned. Raises what ``permit`` raises,
    BlockedError when the Debian package owns the hooks (dpkg removes them), FwmanError when a removal fails.
    """
    if not dry_run:
        permit()
    owner = package_ownership(host)
    if owner is not None:
        refuse_changes(owner, "remove")  # raises for "remove"
    return change(
        dry_run, lambda: [a.describe() for a in pending(host, remove_actions())], lambda: remove_files(host, tell),
        nothing="nothing to remove: the hooks and the service are not installed", done="removed",
    )  # fmt: skip


def _skipped_json(skipped: dict[str, str]) -> list[dict[str, str]]:
    """Return the files left out as the JSON lists them: ``{"path", "reason"}`` each."""
    return [{"path": path, "reason": why} for path, why in skipped.items()]


@dataclass
class HooksInstall(ChangeResult):
    """What ``hooks install`` did (or would do); ``package``: the Debian package that owns the hooks instead."""

    package: str | None = None
    #: what to say when the package owns them (nothing is written then)
    message: str = field(default="", metadata=OMIT)
    #: files not for this host, with why (apt's boot check where there is no apt: see files.left_out); in the JSON
    #: a list of {"path", "reason"}
    skipped: dict[str, str] = field(default_factory=dict, metadata=meta(via=_skipped_json))

    def text(self, verbose: int = 0) -> Out:
        """Return the package's note when it owns the hooks, else what changed (or would) and what was skipped."""
        if self.package is not None:
            return [say(self.message)]
        return [*super().text(verbose), *(say(f"skipped {path}: {why}") for path, why in self.skipped.items())]


def install_hooks(
    host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent
) -> HooksInstall:
    """Install the kernel hooks, the boot checks and the catch-up unit; return what changed (or would).

    When the Debian package owns the hooks nothing is written and ``package`` names it (``permit`` is not asked:
    nothing needs root then); ``skipped`` names the files left out because they are not for this host (apt's
    boot check without apt). Raises BlockedError when a package file is missing or changed, what ``permit``
    raises, FwmanError when a write fails.
    """
    owner = package_ownership(host)
    if owner is not None:  # dpkg's files: never written over
        return HooksInstall(dry_run, package=owner.package, message=refuse_changes(owner, "install"))
    skip = left_out(host)
    done = change(
        dry_run, lambda: [a.describe() for a in pending(host, install_actions(skip=skip))],
        lambda: install_files(host, tell, skip),
        permit=permit, nothing="hook and service already installed and current", done="installed",
    )  # fmt: skip
    return HooksInstall(done.dry_run, done.actions, done.nothing, done.done, skipped=skip)


@dataclass
class Hooks(Result):
    """``hooks status``: the files and the unit as fwman installed them, or as the Debian package owns them."""

    status: HooksStatus
    owner: PackageOwnership | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.hooks-status/1`` (without the schema key)."""
        owner = self.owner
        if owner is None:
            return {**self.status.to_json(), "package": None}
        return {
            "installed": owner.intact,
            "enabled": owner.unit_enabled,
            "files": [{"path": f.path, "present": f.present, "current": f.present and not f.modified, "note": f.note}
                      for f in owner.files],
            "order": self.status.order,
            "package": {"name": owner.package, "leftovers": owner.leftovers},
        }  # fmt: skip

    def text(self, verbose: int = 0) -> Out:
        """Return the file table, the unit, the hook order and what to do about it."""
        st, owner = self.status, self.owner
        if owner is None:
            rows = [[f.path, f.note if f.note else "ok"] for f in st.files]  # a current file's note: why it was skipped
        else:
            rows = [[f.path, f.note] for f in owner.files]
        enabled = st.enabled if owner is None else owner.unit_enabled
        out: Out = [table(["FILE", "STATE"], rows), say(f"catch-up service enabled: {'yes' if enabled else 'no'}")]
        out += [say(f"{directory}: {' '.join(names) or '(empty)'}") for directory, names in st.order.items()]
        if owner is None:
            return out + ([] if st.installed else [say("run `fwman hooks install` to install or update them")])
        out += [say(f"left over from `fwman hooks install`, shadows the package's file: {path} (delete it)")
                for path in owner.leftovers]  # fmt: skip
        package = f"owned by the Debian package {owner.package}: dpkg installs, upgrades and removes these files"
        return [*out, say(package)]


def hooks_status(host: Host) -> Hooks:
    """Return the state of the hook files and the unit on ``host``, and the Debian package that owns them."""
    return Hooks(files_status(host), package_ownership(host))
