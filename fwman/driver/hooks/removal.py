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

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.host.actions import Tell, silent
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


def forget_plan(host: Host, kver: str) -> list[str]:
    """Return what :func:`forget_kernel` would drop for ``kver`` (``modules forget --dry-run``); change nothing.

    The object-cache entry and the boot check are decided only when it runs (they depend on what is left).
    """
    from fwman.driver.boot.pin import read_pin

    files, dirs = _state_paths(kver)
    todo = [f"drop {path}" for path in (*files, *dirs) if host.exists(path)]
    record = read_pin(host)
    if record is not None and kver in (record.kernel, record.avoided):
        todo.append(f"release the boot pin to {record.kernel} and pin another safe kernel")
    return todo


def forget_kernel(host: Host, kver: str, tell: Tell = silent) -> RemovalSummary:
    """Drop fwman's state for removed kernel ``kver`` and re-check the boot; never raises for a host problem."""
    from fwman.driver.build import objcache

    summary = RemovalSummary(kver)
    if "/" in kver or kver in ("", ".", ".."):
        summary.problems.append(f"not a kernel release: {kver!r}")
        return summary
    key = _manifest_cache_key(host, kver)

    def attempt(what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
            summary.removed.append(what)
        except FwmanError as e:
            summary.problems.append(f"{what}: {e.message}")
            tell(f"WARNING: could not remove {what}: {e.message}")

    files, dirs = _state_paths(kver)
    for path in files:
        if host.exists(path):
            attempt(path, lambda p=path: host.unlink(p))  # type: ignore[misc]
    for directory in dirs:
        if host.exists(directory):
            attempt(directory, lambda d=directory: host.remove_tree(d))  # type: ignore[misc]
    _prune_empty(host, paths.modules_dir(kver))
    if key is not None and host.exists(objcache.entry_dir(key)):
        others = [_manifest_cache_key(host, k) for k in _other_manifests(host, kver)]
        # keep the entry the next build will reuse: only one the remaining kernels have moved away from goes
        if others and key not in others and any(k is not None for k in others):
            attempt(objcache.entry_dir(key), lambda: host.remove_tree(objcache.entry_dir(key)))
    if host.exists(paths.MODULES_STAMP):
        host.unlink(paths.MODULES_STAMP)  # the kernel set changed: the boot fast path must look again
    _repin(host, kver, summary, tell)
    for what in summary.removed:
        tell(f"{kver} removed: dropped {what}")
    return summary


def _prune_empty(host: Host, directory: str) -> None:
    """Remove the empty directories fwman's files left in ``directory`` (never a file)."""
    local = host.local_path(directory)
    if local is None or not host.is_dir(directory):
        return
    host.run(["find", local, "-depth", "-type", "d", "-empty", "-delete"], timeout=60)


def _repin(host: Host, kver: str, summary: RemovalSummary, tell: Tell) -> None:
    from fwman.driver.boot import pin as boot

    try:
        record = boot.read_pin(host)
        if record is not None and kver in (record.kernel, record.avoided):
            try:
                boot.unpin(host)
            except FwmanError as e:  # the loader entry may be gone with the kernel: the record goes anyway
                tell(f"WARNING: undoing the boot pin to {record.kernel} failed ({e.message}); record dropped")
                host.unlink(paths.BOOT_PIN_STATE)
            summary.pin_released = True
            role = "pinned kernel" if record.kernel == kver else "kernel the pin avoided"
            tell(f"{kver} was the {role}: boot pin to {record.kernel} released")
        check = boot.ensure_safe_boot(host, tell, gone=frozenset({kver}))
        summary.boot = check
        if check.problem:
            summary.problems.append(check.problem)
            tell(f"WARNING: after removing {kver}: {check.problem}")
            boot.announce(host, [f"kernel {kver} was removed; {check.problem}"])
    except FwmanError as e:
        summary.problems.append(f"boot check: {e.message}")
        tell(f"WARNING: after removing {kver}, the boot check failed: {e.message}")
