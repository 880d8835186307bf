"""What the kernel hook and the boot-time catch-up do when they run.

:func:`run_hook` is one kernel (build unless current, repair what DKMS replaced, keep the boot safe);
:func:`catchup` is every kernel, with a fast path that reads one manifest and stats five files per kernel.
Both hold the shared module lock (:mod:`fwman.driver.build.lock`) and apply the plan of the kernel lifecycle
(:mod:`fwman.driver.lifecycle`) that their ``--dry-run`` lists. Installing the hook files is
:mod:`fwman.driver.hooks.files`.

The fast path imports only modules that use the standard library (paths, kernels, manifest): the heavier
ones (pydantic through the configuration) are imported once there is something to do.
"""

from __future__ import annotations

from fwman.core import paths
from fwman.core.errors import FwmanError
from fwman.driver import lifecycle
from fwman.driver.kernels import headers_present, installed_kernels
from fwman.driver.lifecycle import Plan, RecordStamp, RunSummary, Situation
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

__all__ = ["RunSummary", "catchup", "catchup_plan", "fast_summary", "hook_plan", "run_hook"]


# -- what runs: one kernel (hook), every kernel (catch-up); both planned by fwman.driver.lifecycle ----------
def hook_plan(host: Host, kver: str, origin: str, tell: Tell = silent, defer: bool = False) -> Plan:
    """Return the plan of the kernel hook for ``kver`` (:func:`fwman.driver.lifecycle.plan`): what
    :func:`run_hook` applies, and what ``modules hook --dry-run`` lists."""
    return lifecycle.plan(host, Situation((kver,), origin, defer=defer), tell=tell)


def catchup_plan(host: Host, tell: Tell = silent, force: bool = False) -> Plan:
    """Return the plan of the catch-up over every installed kernel: what :func:`catchup` applies after its fast
    path, and what ``modules catchup --dry-run`` lists. At boot the modules are checked by size and depmod's
    resolution, no hashing (they were verified when installed)."""
    kernels = tuple(installed_kernels(host))
    return lifecycle.plan(host, Situation(kernels, lifecycle.CATCHUP, force=force, hash_files=False), tell=tell)


def run_hook(
    host: Host, kver: str, origin: str, tell: Tell = silent, lock_timeout: float = 900.0, defer: bool = False
) -> RunSummary:
    """Do what the kernel hook does for ``kver`` (:func:`hook_plan`, applied under the module lock) and return
    the summary (the CLI decides the exit status).

    Builds unless the kernel's modules are current, repairs modules DKMS replaced for any kernel, and keeps the
    next boot on a kernel with working modules (``defer``: inside an apt run, a next boot nothing can make safe
    is left to apt's check at the end of the run). Raises LockTimeout when another build holds the lock.
    """
    from fwman.driver.build.lock import module_lock

    with module_lock(host, lock_timeout):
        summary = lifecycle.converge(host, hook_plan(host, kver, origin, tell, defer))
        # judged on the menu as it is now; the final check (zzz-fwman, 99-zz-fwman.install) judges it again after
        # the boot loader's hook, and apt's Post-Invoke hook after dpkg returns (fwman.driver.boot.guard)
        if origin != "manual":
            from fwman.driver.boot.guard import request_recheck

            request_recheck(host)
    return summary


def catchup(host: Host, tell: Tell = silent, force: bool = False, lock_timeout: float = 900.0) -> RunSummary:
    """Build for every installed kernel with headers that lacks a current manifest; keep the boot safe.

    Fast path (nothing to do): per kernel, one manifest read and a ``stat`` per module, no lock, no hashing, no
    source resolution. Otherwise :func:`catchup_plan`, applied under the module lock. Raises LockTimeout when
    another build holds the lock.
    """
    from fwman.driver.build.manifest import manifest_is_current, pending_path

    kernels = installed_kernels(host)
    # a kernel without headers that is already marked pending has nothing to do until its headers come
    todo = [
        k
        for k in kernels
        if not manifest_is_current(host, k) and (headers_present(host, k) or not host.exists(pending_path(k)))
    ]
    if not todo and not force and not host.exists(paths.BOOT_PIN_STATE):
        if not host.exists(paths.MODULES_STAMP):
            RecordStamp(kernels).apply(host)
        return fast_summary(host, [k for k in kernels if not manifest_is_current(host, k)])

    from fwman.driver.build.lock import module_lock

    with module_lock(host, lock_timeout):
        return lifecycle.converge(host, catchup_plan(host, tell, force))


def fast_summary(host: Host, waiting: list[str]) -> RunSummary:
    """Return the summary of a catch-up with nothing to build: which kernels still wait, and why.

    ``waiting`` are the kernels without current modules (each marked pending, without headers). Only when there
    is one are its marker and the module source record read (small files): the build its headers wait for needs
    that source, so a damaged record is said now, not at the next kernel install.
    """
    summary = RunSummary(fast_path=True)
    if not waiting:
        return summary
    from fwman.driver.build.manifest import pending_path, read_marker
    from fwman.driver.build.source import load_source_spec

    for kver in waiting:
        marker = read_marker(host, pending_path(kver))
        summary.waiting[kver] = marker.reason if marker is not None else "no headers"
    try:
        summary.no_source = load_source_spec(host) is None
    except FwmanError as e:
        summary.source_problem = e.message
    return summary
