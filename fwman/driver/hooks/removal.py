"""A kernel was removed: drop fwman's state for it and keep the next boot on a kernel with working modules.

Runs from ``/etc/kernel/postrm.d/fwman`` (Debian and Proxmox kernel packages: ``run-parts --arg=KVER
--arg=IMAGE /etc/kernel/postrm.d``) and from the kernel-install plugin's ``remove`` verb. It removes, for that
kernel: the manifest, the failure and pending markers, fwman's stored copy of the modules, its installed
modules under ``/lib/modules/KVER/updates/fwman`` (dpkg does not remove files it did not install) and the
build tree; an object-cache entry no remaining manifest uses, when the remaining kernels use another one.
When fwman's boot pin pointed at the removed kernel (pinned to it, or away from it) the pin is released and
:func:`fwman.driver.boot.pin.ensure_safe_boot` pins another safe kernel or says loudly that none is. The
loader's own hook runs after this one, so its menu still lists the removed kernel: the boot check leaves it
out (``gone``) and judges the kernel the loader will boot instead.

On Debian the postrm.d hooks also run when a kernel package is upgraded or reinstalled in place; the hook
script acts only on ``remove`` and ``purge`` (``DEB_MAINT_PARAMS``, as initramfs-tools' hook does), so a
kernel that stays keeps its modules.

It never fails the removal: every problem is reported and the summary carries it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.host.actions import Action, Tell, apply_each, pending, silent
from fwman.host.base import Host


@dataclass
class RemovalSummary:
    """What :func:`forget_kernel` removed and what it did about the boot pin."""

    kver: str
    removed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pin_released: bool = False
    boot: object | None = None  # boot.BootCheck after the removal


def _manifest_cache_key(host: Host, kver: str) -> str | None:
    from fwman.driver.build.manifest import load_manifest
    from fwman.driver.build.objcache import cache_key

    try:
        manifest = load_manifest(host, kver)
    except ParseError:
        return None
    if manifest is None or not manifest.commit or not manifest.compiler:
        return None
    return cache_key(manifest.commit, manifest.compiler)


def _other_manifests(host: Host, kver: str) -> list[str]:
    try:
        names = host.listdir(paths.MODULES_STATE_DIR)
    except MissingError:
        return []
    return [n[: -len(".json")] for n in names if n.endswith(".json") and n != f"{kver}.json" and n != "source.json"]


def _state_paths(kver: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (the files, the directories) fwman keeps for ``kver``."""
    from fwman.driver.build.manifest import failed_path, install_dir, manifest_path, pending_path

    files = (manifest_path(kver), failed_path(kver), pending_path(kver))
    return files, (install_dir(kver), f"{paths.MODULES_STATE_DIR}/{kver}.d", f"{paths.BUILD_DIR}/{kver}")


@dataclass
class Drop:
    """One of fwman's files or directories of a removed kernel (or an object-cache entry): removed."""

    path: str
    tree: bool = False  # a directory: removed with what is in it
    why: str = ""

    def describe(self) -> str:
        """Return ``drop PATH`` (and why, where the path does not say)."""
        return f"drop {self.path}" + (f" ({self.why})" if self.why else "")

    def is_needed(self, host: Host) -> bool:
        """Return True while the path exists."""
        return host.exists(self.path)

    def apply(self, host: Host) -> None:
        """Remove the path. Raises FwmanError when it cannot be removed."""
        if self.tree:
            host.remove_tree(self.path)
        else:
            host.unlink(self.path)


@dataclass
class ReleasePin:
    """fwman's boot pin pointed at the removed kernel (pinned to it, or away from it): undo it. The boot check
    that follows every removal pins another safe kernel when one is needed."""

    kernel: str  # the pinned kernel
    kver: str  # the removed kernel
    tell: Tell = silent

    def describe(self) -> str:
        """Return the pin released."""
        return f"release the boot pin to {self.kernel} and pin another safe kernel"

    def is_needed(self, host: Host) -> bool:
        """Return True while a pin record names the removed kernel."""
        from fwman.driver.boot.pin import read_pin

        record = read_pin(host)
        return record is not None and self.kver in (record.kernel, record.avoided)

    def apply(self, host: Host) -> None:
        """Undo the pin; where the loader entry went with the kernel, drop the record all the same."""
        from fwman.driver.boot import pin as boot

        try:
            boot.unpin(host)
        except FwmanError as e:
            self.tell(f"WARNING: undoing the boot pin to {self.kernel} failed ({e.message}); record dropped")
            host.unlink(paths.BOOT_PIN_STATE)
        role = "pinned kernel" if self.kernel == self.kver else "kernel the pin avoided"
        self.tell(f"{self.kver} was the {role}: boot pin to {self.kernel} released")


def forget_actions(host: Host, kver: str, tell: Tell = silent) -> list[Action]:
    """Return what forgetting removed kernel ``kver`` does, in order (``modules forget`` and its dry run): drop
    fwman's files and directories for it, an object-cache entry that only it used while the remaining kernels
    use another, the boot fast path's stamp (the kernel set changed), and a boot pin that names it. Raises
    FwmanError when the pin record cannot be read."""
    from fwman.driver.boot.pin import read_pin
    from fwman.driver.build import objcache

    actions = _drops(kver)
    key = _manifest_cache_key(host, kver)
    if key is not None:
        others = [_manifest_cache_key(host, k) for k in _other_manifests(host, kver)]
        # keep the entry the next build will reuse: only one the remaining kernels have moved away from goes
        if others and key not in others and any(k is not None for k in others):
            actions.append(Drop(objcache.entry_dir(key), tree=True, why="no remaining kernel's build uses it"))
    actions.append(Drop(paths.MODULES_STAMP, why="the kernel set changed: the boot fast path looks again"))
    record = read_pin(host)
    if record is not None and kver in (record.kernel, record.avoided):
        actions.append(ReleasePin(record.kernel, kver, tell))
    return actions


def forget_plan(host: Host, kver: str) -> list[str]:
    """Return what :func:`forget_kernel` would do for ``kver`` (``modules forget --dry-run``): the descriptions
    of :func:`forget_actions` still needed; change nothing. Never raises for a pin record that cannot be read
    (the run drops the files all the same and says it)."""
    actions, _ = _planned(host, kver, silent)
    return [a.describe() for a in pending(host, actions)]


def _planned(host: Host, kver: str, tell: Tell) -> tuple[list[Action], str | None]:
    """Return (:func:`forget_actions`, None); with a pin record that cannot be read, (the drops of fwman's
    files and directories alone, why the pin is left to the boot check). Never raises for that record."""
    try:
        return forget_actions(host, kver, tell), None
    except FwmanError as e:
        return _drops(kver), f"boot pin: {e.message}"


def _drops(kver: str) -> list[Action]:
    """Return the actions that drop fwman's files and directories for ``kver``."""
    files, dirs = _state_paths(kver)
    return [*(Drop(f) for f in files), *(Drop(d, tree=True) for d in dirs)]


def forget_kernel(host: Host, kver: str, tell: Tell = silent) -> RemovalSummary:
    """Apply :func:`forget_actions` for removed kernel ``kver``, then check the boot; return what was done
    (``removed``: the descriptions of the actions applied, what the dry run listed). Never raises for a host
    problem: an action that fails is a problem in the summary, and the next one is tried."""
    summary = RemovalSummary(kver)
    if "/" in kver or kver in ("", ".", ".."):
        summary.problems.append(f"not a kernel release: {kver!r}")
        return summary
    actions, problem = _planned(host, kver, tell)  # an unreadable pin record: the files still go
    if problem is not None:
        summary.problems.append(problem)
    applied, failed = apply_each(host, actions, tell)
    summary.problems += failed
    summary.removed = [a.describe() for a in applied]
    summary.pin_released = any(isinstance(a, ReleasePin) for a in applied)
    _prune_empty(host, paths.modules_dir(kver))
    _check_boot(host, kver, summary, tell)
    for action in applied:
        if isinstance(action, Drop):
            tell(f"{kver} removed: dropped {action.path}")
    return summary


def _prune_empty(host: Host, directory: str) -> None:
    """Remove the empty directories fwman's files left in ``directory`` (never a file)."""
    local = host.local_path(directory)
    if local is None or not host.is_dir(directory):
        return
    host.run(["find", local, "-depth", "-type", "d", "-empty", "-delete"], timeout=60)


def _check_boot(host: Host, kver: str, summary: RemovalSummary, tell: Tell) -> None:
    """Keep the next boot on a kernel with working modules now that ``kver`` is gone; its problems go to
    ``summary`` and are said loudly. Never raises."""
    from fwman.driver.boot import pin as boot

    try:
        check = boot.ensure_safe_boot(host, tell, gone=frozenset({kver}))
        summary.boot = check
        if check.problem:
            summary.problems.append(check.problem)
            tell(f"WARNING: after removing {kver}: {check.problem}")
            boot.announce(host, [f"kernel {kver} was removed; {check.problem}"])
    except FwmanError as e:
        summary.problems.append(f"boot check: {e.message}")
        tell(f"WARNING: after removing {kver}, the boot check failed: {e.message}")
