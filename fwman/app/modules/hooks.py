"""What the kernel hooks and the boot service run: ``modules hook`` (one kernel was installed), ``modules catchup``
(every kernel, at boot) and ``modules forget`` (a kernel was removed). The work is :mod:`fwman.driver.hooks`';
this module decides what a run tells and how it ends: the hook never fails a kernel install unless ``strict =
true``, the catch-up ends partial when a build failed, ``forget`` always succeeds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwman.app.change import free, plan_text
from fwman.app.text import Out, Result, say
from fwman.core.errors import BlockedError, FwmanError, PartialError
from fwman.core.jsonout import meta
from fwman.driver.hooks.run import RunSummary
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

if TYPE_CHECKING:  # the boot-time catch-up's fast path must not load the build (pydantic, the pipeline)
    from fwman.driver.boot.pin import BootCheck


def boot_text(check: BootCheck | None) -> Out:
    """Return what a boot check did (:func:`fwman.app.modules.build.boot_text`, imported only when there is one)."""
    if check is None:
        return []
    from fwman.app.modules.build import boot_text as text_of

    return text_of(check)


def boot_json(check: BootCheck | None) -> dict[str, Any] | None:
    """Return a boot check as JSON (:func:`fwman.app.modules.build.boot_json`, imported only when there is one)."""
    if check is None:
        return None
    from fwman.app.modules.build import boot_json as json_of

    return json_of(check)


@dataclass
class KernelRun(Result):
    """What a hook or catch-up run did (``summary``), or, in a dry run, would do (``plan``)."""

    dry_run: bool
    summary: RunSummary = field(default_factory=RunSummary)
    plan: list[str] = field(default_factory=list)
    #: the failure reports of the builds that failed, with the newer cached branches (kernel -> branches)
    newer: dict[str, list[str]] = field(default_factory=dict)

    @property
    def actions(self) -> list[str]:
        """Return the steps of the lifecycle's plan the run applied, or (dry run) would apply: the same list."""
        return self.plan if self.dry_run else self.summary.applied

    def to_json(self) -> dict[str, Any]:
        """Return the part of the payload a hook run and a catch-up share (without the schema key); ``changed``:
        the host was changed (a repair, an install, a boot pin made or released)."""
        from fwman.app.modules.build import outcome_json

        s = self.summary
        return {
            "dry_run": self.dry_run,
            "changed": bool(s.changed) and not self.dry_run,
            "actions": self.actions,
            "kernels": [outcome_json(o, self.newer.get(o.kver)) for o in s.outcomes],
            "repaired": s.repaired,
            "waiting": s.waiting,
            "no_source": s.no_source,
            "source_problem": s.source_problem,
            "boot": boot_json(s.boot),
        }

    def failures(self, *, err: bool) -> Out:
        """Return the failure report of every build that failed."""
        from fwman.app.modules.build import failure_text

        failed = [o for o in self.summary.outcomes if o.status == "failed"]
        return [ln for o in failed for ln in failure_text(o, self.newer.get(o.kver, []), err=err)]


def _newer(host: Host, summary: RunSummary) -> dict[str, list[str]]:
    """Return, per failed build, the newer cached P2P branches that may build (read only when one failed)."""
    failed = [o for o in summary.outcomes if o.status == "failed" and o.source]
    if not failed:
        return {}
    from fwman.driver.build.source import newer_branches

    return {o.kver: newer_branches(host, o.source) for o in failed if o.source}


@dataclass
class Catchup(KernelRun):
    """``modules catchup``: every kernel that lacks working modules built, the next boot kept safe; after a driver
    move whose new module is not the one loaded, ``move_note`` names the rollback (``fwman driver move``)."""

    move_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-catchup/2`` (without the schema key)."""
        return {**super().to_json(), "move_note": self.move_note}

    def text(self, verbose: int = 0) -> Out:
        """Return the plan, what still waits (nothing to build), or the failed builds and the boot check; the
        driver move's note first."""
        if self.dry_run:
            return plan_text(self.plan, "every kernel has current patched modules")
        if self.move_note:
            return [say(f"WARNING: {self.move_note}", err=True), *self._text()]
        return self._text()

    def _text(self) -> Out:
        s = self.summary
        if not s.fast_path:
            return self.failures(err=True) + boot_text(s.boot)
        if not s.waiting:
            return [say("every kernel has current patched modules")]
        out: Out = [say(f"{kver}: NO current patched modules (pending: {why}); booting it comes up without the patched "
                   "driver") for kver, why in s.waiting.items()]  # fmt: skip
        out.append(say("nothing to build until the headers are installed; the next catch-up builds them "
                       "(`fwman modules status`)"))  # fmt: skip
        if s.source_problem is not None:
            out.append(say(f"WARNING: {s.source_problem}: that build will fail", err=True))
        elif s.no_source:
            out.append(say("WARNING: no module source configured: `fwman plan` names the fork and branch for this "
                           "box, and `sudo fwman apply` builds them", err=True))  # fmt: skip
        return out

    def failure(self) -> FwmanError | None:
        """Return PartialError (exit 6) when a build failed; kernels that wait for headers are no failure."""
        failed = [o.kver for o in self.summary.outcomes if o.status == "failed"]
        if not failed:
            return None
        hint = "see `fwman modules status` and /var/log/fwman/"
        return PartialError(f"build failed for {', '.join(failed)}", hint=hint)


def catchup(
    host: Host, *, force: bool = False, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent
) -> Catchup:
    """Build for every installed kernel with headers that lacks working modules, and keep the boot safe; with
    ``dry_run`` return what would be done. Raises what ``permit`` raises, LockTimeout when a build holds the lock."""
    from fwman.driver.hooks.run import catchup as run_catchup
    from fwman.driver.hooks.run import catchup_plan
    from fwman.driver.lifecycle import still_needed

    if dry_run:
        return Catchup(True, plan=still_needed(host, catchup_plan(host, force=force)))
    from fwman.driver.move.record import boot_note

    permit()
    summary = run_catchup(host, tell, force=force)
    return Catchup(False, summary, newer=_newer(host, summary), move_note=boot_note(host))


@dataclass
class HookRun(KernelRun):
    """``modules hook``: what the kernel hook did for one kernel; ``strict``: ``[modules] strict = true``."""

    kver: str = ""
    origin: str = "manual"
    strict: bool = False

    @property
    def in_place(self) -> bool:
        """Return True when the kernel has its patched modules after the run (or would, in a dry run)."""
        return self.dry_run or not (self.summary.failed or self.summary.no_source)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-hook/2`` (without the schema key)."""
        return {"kernel": self.kver, "origin": self.origin, **super().to_json(), "in_place": self.in_place}

    def text(self, verbose: int = 0) -> Out:
        """Return each kernel's outcome (on stderr: the hook's output goes to the package manager's log), the
        boot check, and the note that the kernel install goes on."""
        if self.dry_run:
            return plan_text(self.plan, f"{self.kver}: patched modules already current")
        from fwman.app.modules.build import failure_text

        out: Out = []
        for o in self.summary.outcomes:
            if o.status == "failed":
                out += failure_text(o, self.newer.get(o.kver, []), err=True)
            else:
                out.append(say(o.message, err=True))
        out += boot_text(self.summary.boot)
        if not self.in_place and not self.strict:
            out.append(say(f"{self._missing}; the kernel install goes on (see `fwman modules status`)", err=True))
        return out

    @property
    def _missing(self) -> str:
        return f"patched NVIDIA modules are NOT in place for {self.kver}"

    def failure(self) -> FwmanError | None:
        """Return BlockedError (exit 3: the kernel install stops) when the modules are not in place and
        ``strict = true``; None otherwise (exit 0: a hook never fails a kernel install by default)."""
        if self.in_place or not self.strict:
            return None
        return BlockedError(self._missing, hint="strict = true in /etc/fwman/config.toml: the kernel install stops")


def hook(
    host: Host,
    kver: str,
    origin: str,
    *,
    dry_run: bool = False,
    permit: Callable[[], None] = free,
    tell: Tell = silent,
    under_apt: bool = False,
) -> HookRun:
    """Do what the kernel hook does for ``kver`` (build unless current, repair, keep the boot safe); with
    ``dry_run`` return what it would do. Raises what ``permit`` raises, LockTimeout when a build holds the lock."""
    from fwman.driver.build.source import strict_mode
    from fwman.driver.hooks.run import hook_plan, run_hook
    from fwman.driver.lifecycle import still_needed

    defer = under_apt and origin != "manual"
    if dry_run:
        return HookRun(
            True, plan=still_needed(host, hook_plan(host, kver, origin, defer=defer)), kver=kver, origin=origin
        )
    permit()
    summary = run_hook(host, kver, origin, tell, defer=defer)
    run = HookRun(False, summary, newer=_newer(host, summary), kver=kver, origin=origin)
    run.strict = not run.in_place and strict_mode(host)
    return run


@dataclass
class Forget(Result):
    """``modules forget``: what was dropped for a removed kernel (or, in a dry run, would be), and the boot."""

    kver: str = field(metadata=meta(key="kernel"))
    dry_run: bool = field(metadata=meta(then=("changed",)))
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pin_released: bool = False
    boot: BootCheck | None = field(default=None, metadata=meta(via=boot_json))

    @property
    def changed(self) -> bool:
        """Return True when fwman's state was dropped (never in a dry run)."""
        return bool(self.actions) and not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return the plan, or the boot check (each removal was said as it happened)."""
        if self.dry_run:
            return plan_text(self.actions, f"fwman has no state for {self.kver}")
        out: Out = [] if self.actions or self.problems else [say(f"fwman had no state for {self.kver}", err=True)]
        return out + boot_text(self.boot)


def forget(
    host: Host, kver: str, *, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent
) -> Forget:
    """Drop fwman's state for the removed kernel ``kver`` and keep the next boot safe; with ``dry_run`` return
    what would go. Never raises for a host problem (a kernel removal must not fail over it): the result's
    ``problems`` say; raises what ``permit`` raises."""
    from fwman.driver.boot.pin import BootCheck
    from fwman.driver.hooks.removal import forget_kernel, forget_plan

    if dry_run:
        return Forget(kver, True, forget_plan(host, kver))
    permit()
    s = forget_kernel(host, kver, tell)
    boot = s.boot if isinstance(s.boot, BootCheck) else None
    return Forget(kver, False, s.removed, s.problems, s.pin_released, boot)
