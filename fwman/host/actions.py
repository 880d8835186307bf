"""Host changes as small, re-runnable actions (the pattern of pop-os/system76-driver).

Each action says what it does (:meth:`describe`), whether the host still needs it (:meth:`is_needed`), and
does it (:meth:`apply`). Running a list twice changes nothing the second time, so ``fwman hooks install`` or
``fwman dkms block`` can be re-run after an interruption, and ``--dry-run`` is the list of descriptions of the
actions still needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from fwman.core.errors import FwmanError, MissingError
from fwman.host.base import CommandResult, Host

#: where progress lines go, one line a call (the CLI passes one that writes to stderr). Named ``tell``/``Tell``
#: everywhere, so that ``report`` means a report (the doctor's, the audit's, the owner report) and nothing else
Tell = Callable[[str], None]


def silent(_: str) -> None:
    """Tell nothing (the default ``tell`` of the driver's long-running operations)."""
    return None


class Action(Protocol):
    """One idempotent change to a host."""

    def describe(self) -> str:
        """Return one line saying what the action does."""
        ...

    def is_needed(self, host: Host) -> bool:
        """Return True when the host is not yet in the state this action produces."""
        ...

    def apply(self, host: Host) -> None:
        """Make the change. Raises FwmanError when it cannot."""
        ...


@dataclass
class WriteFile:
    """Make ``path`` hold exactly ``content`` with ``mode`` (atomic write)."""

    path: str
    content: bytes
    mode: int = 0o644

    def describe(self) -> str:
        """Return what is written where."""
        return f"write {self.path} ({len(self.content)} bytes, mode {self.mode:o})"

    def is_needed(self, host: Host) -> bool:
        """Return True when the file is absent, holds other bytes, or has other permission bits.

        The mode counts: a hook that lost its execute bit is skipped by run-parts as surely as a missing one.
        A host that cannot tell modes (a replay) is judged on the content alone.
        """
        if not host.exists(self.path):
            return True
        try:
            if host.read_bytes(self.path) != self.content:
                return True
            mode = host.file_mode(self.path)
        except MissingError:
            return True
        return mode is not None and mode != self.mode

    def apply(self, host: Host) -> None:
        """Write the file (its bytes and its mode)."""
        host.write_bytes(self.path, self.content, self.mode)


@dataclass
class RemoveFile:
    """Make sure ``path`` does not exist (a file or a link); ``what`` names it for people (e.g. "the block
    record")."""

    path: str
    what: str = ""

    def describe(self) -> str:
        """Return what is removed."""
        return f"remove {self.what + ' ' if self.what else ''}{self.path}"

    def is_needed(self, host: Host) -> bool:
        """Return True when the file (or a dangling link) is there."""
        return host.exists(self.path) or host.is_link(self.path)

    def apply(self, host: Host) -> None:
        """Remove it."""
        host.unlink(self.path)


@dataclass
class Symlink:
    """Make ``path`` a symbolic link to ``target``."""

    path: str
    target: str

    def describe(self) -> str:
        """Return the link to create."""
        return f"link {self.path} -> {self.target}"

    def is_needed(self, host: Host) -> bool:
        """Return True when the link is absent or points elsewhere."""
        if not host.is_link(self.path):
            return True
        try:
            return host.readlink(self.path) != self.target
        except MissingError:
            return True

    def apply(self, host: Host) -> None:
        """Create or replace the link."""
        host.symlink(self.target, self.path)


@dataclass
class RunCommand:
    """Run a command while ``needed(host)`` says so; fail with the command's stderr."""

    argv: Sequence[str]
    needed: Callable[[Host], bool]
    reason: str = ""
    timeout: float = 600.0
    results: list[CommandResult] = field(default_factory=list)

    def describe(self) -> str:
        """Return the command line (and why)."""
        text = "run " + " ".join(self.argv)
        return f"{text}  ({self.reason})" if self.reason else text

    def is_needed(self, host: Host) -> bool:
        """Return what the check says."""
        return self.needed(host)

    def command(self, host: Host) -> Sequence[str]:
        """Return the command line it runs."""
        return self.argv

    def apply(self, host: Host) -> None:
        """Run it. Raises FwmanError with the tool's message when it fails."""
        result = host.run(list(self.argv), timeout=self.timeout)
        self.results.append(result)
        if not result.ok:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise FwmanError(
                f"{' '.join(self.argv)} failed (exit {result.rc}): {tail[-1] if tail else 'no output'}",
                hint="run it by hand to see the whole output",
            )


@dataclass
class Tracked:
    """An action that remembers whether it was applied, for a later action that must follow a change.

    ``depmod`` must run after the module files or the override changed, even when its own check (does the
    name resolve to fwman's file) already passes: the aliases and symbols it indexes come from the files.
    """

    action: Action
    applied: bool = False

    def describe(self) -> str:
        """Return the wrapped action's description."""
        return self.action.describe()

    def is_needed(self, host: Host) -> bool:
        """Return what the wrapped action says."""
        return self.action.is_needed(host)

    def apply(self, host: Host) -> None:
        """Apply the wrapped action and remember it."""
        self.action.apply(host)
        self.applied = True


def check_door(host: Host, actions: Sequence[Action]) -> None:
    """Raise RootDoorError when one of ``actions`` runs a command that would act on this machine from under a root
    (fwman.host.machine), before any of them is applied or listed: the dry run and the run refuse alike."""
    from fwman.host.machine import check_reachable  # doctor loads this module for the types, never applies

    for action in actions:
        inner = action.action if isinstance(action, Tracked) else action
        command = getattr(inner, "command", None)  # the command line it runs (RunCommand's and the like's)
        if callable(command):
            check_reachable(host, command(host))


def pending(host: Host, actions: Sequence[Action]) -> list[Action]:
    """Return the actions of ``actions`` that the host still needs, in order. Raises RootDoorError (check_door)."""
    needed = [a for a in actions if a.is_needed(host)]
    check_door(host, needed)
    return needed


def apply_all(host: Host, actions: Sequence[Action], tell: Tell | None = None) -> list[str]:
    """Apply every needed action in order and return their descriptions.

    Stops at the first failure: the action's FwmanError propagates, its hint saying what was done before it and
    what was not (what was applied stays applied, and running the same list again continues where it stopped).
    The list returned is what changed: [] means the host was already in the state the actions produce (a command
    reports ``changed: false``).
    """
    check_door(host, [a for a in actions if a.is_needed(host)])
    done: list[str] = []
    for index, action in enumerate(actions):
        if not action.is_needed(host):
            continue
        if tell is not None:
            tell(action.describe())
        try:
            action.apply(host)
        except FwmanError as e:  # the action's own error (type, exit status, message): its hint says where it stopped
            e.hint = _stopped_hint(e.hint, done, [a.describe() for a in actions[index + 1 :]])
            raise
        done.append(action.describe())
    return done


def apply_each(host: Host, actions: Sequence[Action], tell: Tell = silent) -> tuple[list[Action], list[str]]:
    """Apply every needed action in order, going on past a failure, for a run nothing may stop (a kernel removal:
    what fails is said, what can still be done is done); return (the actions applied, one ``DESCRIPTION: message``
    line per action that failed, each also said through ``tell`` as a warning when it happens). Raises
    RootDoorError (:func:`check_door`) before any action is applied."""
    check_door(host, [a for a in actions if a.is_needed(host)])
    applied: list[Action] = []
    problems: list[str] = []
    for action in actions:
        try:
            if not action.is_needed(host):
                continue
            action.apply(host)
        except FwmanError as e:
            problems.append(f"{action.describe()}: {e.message}")
            tell(f"WARNING: could not {problems[-1]}")
            continue
        applied.append(action)
    return applied, problems


def _stopped_hint(hint: str | None, done: list[str], after: list[str]) -> str | None:
    """Return ``hint`` with what was done before the failing action and what was not done yet: the run stopped
    there, and running it again continues (each action checks whether it is still needed)."""
    said = "; ".join(part for part in (
        f"done before it: {', '.join(done)}" if done else "",
        f"not done: {', '.join(after)}" if after else "",
    ) if part)  # fmt: skip
    if not said:
        return hint
    return f"{hint + '; ' if hint else ''}{said} (run it again to continue)"
