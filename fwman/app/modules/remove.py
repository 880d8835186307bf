"""``fwman modules remove``: take fwman's installed patched modules off the host, for some kernels or all, and
undo fwman's boot pin when the pinned kernel loses its modules (or with ``--all``): a pin to a kernel without
patched modules protects nothing. The result says when the hooks would build the modules again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.app.change import free, plan_text
from fwman.app.text import Out, Result, say
from fwman.core import paths
from fwman.core.errors import UsageError
from fwman.core.jsonout import meta
from fwman.driver.boot.loaders import default_boot_kernel
from fwman.driver.boot.pin import UnpinBoot, read_pin
from fwman.driver.build.lock import module_lock
from fwman.driver.build.uninstall import RemoveKernelModules, kernels_with_modules, remove_actions
from fwman.host.actions import Action, Tell, Tracked, apply_all, pending, silent
from fwman.host.base import Host


@dataclass(frozen=True)
class RemoveRequest:
    """Which kernels' modules to remove (``kernels``, or every kernel with ``all_kernels``), and whether to act."""

    kernels: tuple[str, ...] = ()
    all_kernels: bool = False
    dry_run: bool = False


@dataclass
class RemoveResult(Result):
    """What was (or, in a dry run, would be) done; its fields are ``fwman.modules-remove/1``."""

    dry_run: bool = field(metadata=meta(then=("changed",)))
    kernels: list[str]
    actions: list[str] = field(default_factory=list)  # descriptions: done, or to do in a dry run
    removed: list[str] = field(default_factory=list)  # the paths removed
    next_boot: str | None = None
    next_boot_lost: bool = False  # the kernel that boots next had fwman's modules and no longer has them

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run)."""
        return bool(self.actions) and not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return the plan, or the paths removed and whether the next boot lost its patched modules."""
        nothing = "fwman has no modules installed for " + (", ".join(self.kernels) or "any kernel")
        if self.dry_run:
            return plan_text(self.actions, nothing)
        if not self.changed:
            return [say("nothing to remove: " + nothing)]
        out: Out = [say(f"removed {path}") for path in self.removed]
        if self.next_boot_lost:
            out.append(say(f"the next boot ({self.next_boot}) has no patched modules now: the stock driver loads if "
                           "one is installed", "yellow"))  # fmt: skip
        return out


def _plan(host: Host, kernels: list[str], all_kernels: bool) -> list[Action]:
    actions = remove_actions(host, kernels)
    record = read_pin(host)
    if record is not None and (all_kernels or record.kernel in kernels):
        actions.append(UnpinBoot())
    return actions


def remove_modules(
    host: Host, request: RemoveRequest, tell: Tell = silent, permit: Callable[[], None] = free
) -> RemoveResult:
    """Remove (or, with ``dry_run``, list) what the request names and return the result.

    Raises UsageError when neither or both of ``kernels`` and ``all_kernels`` are given; FwmanError from an
    action that fails (what was applied stays applied; running it again continues); LockTimeout when a build
    holds the module lock; what ``permit`` raises (called first, unless a dry run).
    """
    if not request.dry_run:
        permit()
    if bool(request.kernels) == request.all_kernels:
        raise UsageError(
            "name the kernels (--kernel KVER, repeatable) or --all, not both and not neither",
            hint="`fwman modules status` lists the kernels and their modules",
        )
    kernels = kernels_with_modules(host) if request.all_kernels else list(dict.fromkeys(request.kernels))
    result = RemoveResult(request.dry_run, kernels)
    if request.dry_run:
        result.actions = [a.describe() for a in pending(host, _plan(host, kernels, request.all_kernels))]
        return result
    with module_lock(host):
        actions = _plan(host, kernels, request.all_kernels)
        result.actions = apply_all(host, actions, tell)
    for action in actions:
        inner = action.action if isinstance(action, Tracked) else action
        if isinstance(inner, RemoveKernelModules):
            result.removed += inner.removed
    # after the pin (if any) was undone: the kernel the loader boots now
    result.next_boot = default_boot_kernel(host).kver
    if result.next_boot is not None:
        lost = f"{paths.modules_dir(result.next_boot)}/"
        result.next_boot_lost = any(p.startswith(lost) for p in result.removed)
    return result
