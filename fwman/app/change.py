"""What a changing command did (or, in a dry run, would do): the result the changing commands share, and the one
"dry run -> plan, else apply" flow they all take (:func:`plan_or_apply`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fwman.app.text import Out, Result, say
from fwman.core.jsonout import OMIT, meta
from fwman.host.actions import Action, Tell, apply_all, pending, silent
from fwman.host.base import Host


@dataclass
class ChangeResult(Result):
    """The steps of one change: done, or (``dry_run``) still needed; ``changed`` is never true in a dry run.

    ``nothing`` and ``done`` are what a person reads when there was nothing to do, and after a change (``""``:
    nothing more, the steps were said as they were done). The JSON payload (the encoder's, without the schema
    key) is ``{"dry_run", "changed", "actions"}``, a subclass's own fields after them.
    """

    dry_run: bool = field(metadata=meta(then=("changed",)))
    actions: list[str] = field(default_factory=list)  # descriptions: done, or to do in a dry run
    nothing: str = field(default="nothing to do", repr=False, compare=False, metadata=OMIT)
    done: str = field(default="done", repr=False, compare=False, metadata=OMIT)

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run)."""
        return bool(self.actions) and not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return the dry run's ``would ...`` lines, else ``done``; ``nothing`` when there was nothing to do."""
        if self.dry_run:
            return plan_text(self.actions, self.nothing)
        if self.changed:
            return [say(self.done)] if self.done else []  # "": the steps were said as they were done
        return [say(self.nothing)]


def plan_text(todo: Sequence[str], current: str) -> Out:
    """Return what a ``--dry-run`` would do, one ``would ...`` line each, or ``current`` when nothing."""
    return [say(f"would {step}") for step in todo] or [say(current)]


def free() -> None:
    """Permit a change (the default ``permit``: a caller that has checked already, or a test)."""


def change(
    dry_run: bool,
    plan: Callable[[], list[str]],
    apply: Callable[[], list[str]],
    *,
    permit: Callable[[], None] = free,
    nothing: str = "nothing to do",
    done: str = "done",
) -> ChangeResult:
    """The flow of every changing command: in a dry run return ``plan()`` (what would change; nothing is
    written); else call ``permit()`` (the CLI's root and ``--snapshot`` check, which raises to refuse), then
    return what ``apply()`` changed. Raises what ``permit`` or ``apply`` raise."""
    if dry_run:
        return ChangeResult(True, plan(), nothing, done)
    permit()
    return ChangeResult(False, apply(), nothing, done)


def plan_or_apply(
    host: Host,
    actions: Sequence[Action],
    *,
    dry_run: bool,
    permit: Callable[[], None] = free,
    tell: Tell = silent,
    nothing: str = "nothing to do",
    done: str = "done",
) -> ChangeResult:
    """:func:`change` over a list of actions: what they would change (``dry_run``), else what applying them
    changed. Raises what an action raises (the actions before it stay applied; running again continues)."""
    return change(
        dry_run,
        lambda: [a.describe() for a in pending(host, list(actions))],
        lambda: apply_all(host, list(actions), tell),
        permit=permit,
        nothing=nothing,
        done=done,
    )
