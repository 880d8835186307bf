"""``fwman userspace status``, ``hold`` and ``release``: the use cases, whose results own their JSON shapes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import ChangeResult, free, plan_or_apply
from fwman.app.text import Out, Result, say, table
from fwman.core.errors import BlockedError, FwmanError
from fwman.core.jsonout import OMIT
from fwman.driver.build.manifest import now_iso
from fwman.driver.userspace_hold import HoldStatus, hold_plan, read_record, read_status, release_actions
from fwman.host.base import Host


@dataclass
class UserspaceStatus(Result):
    """``userspace status``: the installed packages, fwman's hold, the upgrades apt would make now."""

    status: HoldStatus

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.userspace-status/1`` (without the schema key)."""
        payload = self.status.to_dict()
        payload.pop("schema")  # nested (modules status, audit) it names its version; here the envelope does
        return payload

    def text(self, verbose: int = 0) -> Out:
        """Return the package table, the hold and its warnings."""
        st = self.status
        if st.installed is None:
            out: Out = [say("dpkg is not installed here: nothing apt could hold")]
        elif not st.installed:
            out = [say("no NVIDIA user-space package is installed")]
        else:
            held = st.record.packages if st.record else {}
            out = [table(["PACKAGE", "INSTALLED", "HELD AT", "PENDING UPGRADE"], [
                [name, version, held.get(name, "-"), (st.pending or {}).get(name, ("", "-"))[1]]
                for name, version in sorted(st.installed.items())
            ])]  # fmt: skip
        return [*out, say(f"hold: {st.hold_line()}"), *(say(f"WARNING: {w}", "loud") for w in st.warnings())]

    def failure(self) -> FwmanError | None:
        """Return BlockedError (exit 3, after the status was shown) when the hold record is unreadable."""
        if not self.status.record_error:
            return None
        return BlockedError(
            f"unreadable userspace hold record: {self.status.record_error}",
            hint="read it; `fwman userspace hold` writes it again for the installed packages, "
            "`fwman userspace release` removes the hold",
        )


def userspace_status(host: Host, *, simulate: bool = True) -> UserspaceStatus:
    """Return the user-space status (``simulate``: ask ``apt-get -s`` for pending upgrades). Never raises for a
    damaged record (the result's failure says)."""
    return UserspaceStatus(read_status(host, simulate=simulate))


@dataclass
class Release(ChangeResult):
    """What ``userspace release`` (or ``hold``) did, or would do, and the packages the hold names (None: no
    readable record)."""

    packages: dict[str, str] | None = None
    holding: bool = field(default=False, metadata=OMIT)  # True: the result of ``hold``

    def text(self, verbose: int = 0) -> Out:
        """Return the plan, the packages held, or the packages released."""
        if self.dry_run:
            return super().text(verbose)
        if self.holding:
            return [say(f"held {n} {v}") for n, v in sorted((self.packages or {}).items())] + super().text(verbose)
        if not self.changed:
            return [say(self.nothing)]
        names = ", ".join(sorted(self.packages)) if self.packages else "(record unreadable)"
        return [say(f"released: {names}; apt and unattended-upgrades may upgrade them again")]


def release_hold(host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free) -> Release:
    """Remove fwman's apt pin, blacklist entries and hold record; with ``dry_run`` return what would go.

    A damaged record is removed like a readable one (``packages`` is then None). Raises what ``permit`` raises,
    what the host raises on a failed removal.
    """
    if not dry_run:
        permit()
    record = read_record(host)
    todo = plan_or_apply(host, release_actions(), dry_run=dry_run).actions
    packages = None if record is None else dict(record.packages)
    return Release(dry_run, todo, "fwman holds nothing", packages=packages)


def hold_packages(host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free) -> Release:
    """Pin every installed NVIDIA user-space package at its version; return what changed (or would) and the
    packages held (``fwman.userspace-hold/1``: the same shape as a release).

    Raises what ``permit`` raises, MissingError without dpkg-query or when no NVIDIA user-space package is
    installed (exit 5: there is nothing to hold; the message says when NVIDIA's .run installer is the reason).
    """
    if not dry_run:
        permit()
    packages, actions = hold_plan(host, now_iso())
    todo = plan_or_apply(host, actions, dry_run=dry_run).actions
    nothing = "hold already in place and current"
    return Release(dry_run, todo, nothing, "hold written", packages=dict(packages), holding=True)
