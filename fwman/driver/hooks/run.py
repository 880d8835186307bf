"""What the kernel hook and the boot-time catch-up do when they run.

:func:`run_hook` is one kernel (build unless current, repair what DKMS replaced, keep the boot safe);
:func:`catchup` is every kernel, with a fast path that reads one manifest and stats five files per kernel.
Both hold the shared module lock (:mod:`fwman.driver.build.lock`). Installing the hook files is
:mod:`fwman.driver.hooks.files`.

The fast path imports only modules that use the standard library (paths, kernels, manifest): the heavier
ones (pydantic through the configuration) are imported once there is something to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.driver.kernels import headers_present, installed_kernels
from fwman.host.actions import Report, silent
from fwman.host.base import Host

if TYPE_CHECKING:  # imported for the annotations only: the boot fast path must not load them
    from fwman.driver.boot.pin import BootCheck
    from fwman.driver.build.pipeline import KernelOutcome
    from fwman.driver.build.source import SourceSpec


# -- what runs: one kernel (hook), every kernel (catch-up) ------------------------------------------------
@dataclass
class RunSummary:
    """What a hook or catch-up run did, for the CLI to render and map to an exit status."""

    outcomes: list[KernelOutcome] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    boot: BootCheck | None = None
    fast_path: bool = False
    no_source: bool = False
    #: kernels without current modules left as they are, kernel -> why (pending: no headers yet): booting one
    #: comes up without the patched driver, so the summary must name them
    waiting: dict[str, str] = field(default_factory=dict)
    #: why the remembered module source cannot be read (the build the headers wait for would fail), or None
    source_problem: str | None = None

    @property
    def failed(self) -> list[KernelOutcome]:
        """Return the outcomes that failed or stay pending."""
        return [o for o in self.outcomes if o.status in ("failed", "pending", "skipped")]

    @property
    def changed(self) -> list[str]:
        """Return what the run changed on the host: repairs, installs, a boot pin made or released ([]: none)."""
        done = [f"reinstalled fwman's stored modules for {kver}" for kver in self.repaired]
        for outcome in self.outcomes:
            done += outcome.changed
        return done + (self.boot.changed if self.boot is not None else [])


def repair_replaced(host: Host, kernels: list[str], report: Report = silent) -> tuple[list[str], list[str]]:
    """Put fwman's modules back where depmod no longer resolves them to ours (DKMS replaced them).

    Checks resolution and sizes only (no hashing). Returns (kernels repaired, kernels whose stored copy is
    unusable: the caller rebuilds those). Manifests are never deleted here.
    """
    from fwman.core.errors import ParseError
    from fwman.driver.build.install import check_installed, repair_from_store
    from fwman.driver.build.manifest import load_manifest

    repaired: list[str] = []
    broken: list[str] = []
    for kver in kernels:
        try:
            manifest = load_manifest(host, kver)
        except ParseError:
            continue
        if manifest is None:
            continue
        bad = [c for c in check_installed(host, manifest, hash_files=False) if not c.ok]
        if not bad:
            continue
        report(f"WARNING: {kver}: {bad[0].problem} (DKMS or a package replaced it): reinstalling fwman's modules")
        if repair_from_store(host, manifest) and all(c.ok for c in check_installed(host, manifest)):
            repaired.append(kver)
            report(f"{kver}: fwman's modules are back in place and verified")
            continue
        report(f"{kver}: fwman's stored copy is missing or differs from the manifest: rebuilding")
        broken.append(kver)
    return repaired, broken


def run_hook(
    host: Host, kver: str, origin: str, report: Report = silent, lock_timeout: float = 900.0, defer: bool = False
) -> RunSummary:
    """Do what the kernel hook does for ``kver`` and return the summary (the CLI decides the exit status).

    Builds unless the kernel's modules are current, repairs modules DKMS replaced for any kernel, and keeps the
    next boot on a kernel with working modules (``defer``: inside an apt run, a next boot nothing can make safe
    is left to apt's check at the end of the run). Raises LockTimeout when another build holds the lock.
    """
    from fwman.driver.boot import pin as boot
    from fwman.driver.boot.initramfs import refresh_initramfs
    from fwman.driver.build.lock import module_lock
    from fwman.driver.build.manifest import Marker, manifest_is_current, manifest_path, pending_path, write_marker
    from fwman.driver.build.pipeline import KernelOutcome, update_kernel
    from fwman.driver.build.source import load_source_spec

    summary = RunSummary()
    with module_lock(host, lock_timeout):
        # first what DKMS (its hook ran just before this one) may have replaced: a repair needs no build
        kernels = installed_kernels(host)
        with_manifest = [k for k in kernels if host.exists(manifest_path(k))]
        summary.repaired, broken = repair_replaced(host, with_manifest, report)
        spec = load_source_spec(host)
        if spec is None:
            summary.no_source = True
            write_marker(host, pending_path(kver), Marker(kver, "no module source configured"))
            report(f"no module source configured: {kver} marked pending (run `fwman modules build` once)")
        elif manifest_is_current(host, kver) and kver not in broken:
            summary.outcomes.append(KernelOutcome(kver, "current", f"{kver}: patched modules already current"))
        else:
            report(f"{origin}: building the patched NVIDIA modules for {kver} from {spec.describe()}")
            outcome = update_kernel(host, kver, spec, force=kver in broken, fetch=False, report=report)
            summary.outcomes.append(outcome)
        if spec is not None:
            for other in (k for k in broken if k != kver):
                summary.outcomes.append(update_kernel(host, other, spec, force=True, fetch=False, report=report))
        # from postinst.d the initramfs-tools hook runs after this one and sees the new modules; otherwise
        # (headers installed later, a repair of another kernel) the initramfs was built before: refresh it
        for built in (o.kver for o in summary.outcomes if o.status == "built"):
            if origin != "postinst" or built != kver:
                refresh_initramfs(host, built, report)
        # judged on the menu as it is now; the final check (zzz-fwman, 99-zz-fwman.install) judges it again after
        # the boot loader's hook, and apt's Post-Invoke hook after dpkg returns (fwman.driver.boot.guard)
        summary.boot = boot.ensure_safe_boot(host, report, defer=defer)
        if origin != "manual":
            from fwman.driver.boot.guard import request_recheck

            request_recheck(host)
    return summary


def catchup(host: Host, report: Report = silent, force: bool = False, lock_timeout: float = 900.0) -> RunSummary:
    """Build for every installed kernel with headers that lacks a current manifest; keep the boot safe.

    Fast path (nothing to do): per kernel, one manifest read and a ``stat`` per module, no lock, no hashing, no
    source resolution. Raises LockTimeout when another build holds the lock.
    """
    from fwman.driver.build.manifest import manifest_is_current, manifest_path, pending_path

    kernels = installed_kernels(host)
    # a kernel without headers that is already marked pending has nothing to do until its headers come
    todo = [
        k
        for k in kernels
        if not manifest_is_current(host, k) and (headers_present(host, k) or not host.exists(pending_path(k)))
    ]
    if not todo and not force and not host.exists(paths.BOOT_PIN_STATE):
        if not host.exists(paths.MODULES_STAMP):
            write_stamp(host, kernels)
        return fast_summary(host, [k for k in kernels if not manifest_is_current(host, k)])

    from fwman.driver.boot import pin as boot
    from fwman.driver.boot.initramfs import refresh_initramfs
    from fwman.driver.build.lock import module_lock
    from fwman.driver.build.manifest import Marker, write_marker
    from fwman.driver.build.pipeline import update_kernel
    from fwman.driver.build.source import load_source_spec
    from fwman.driver.kernels import version_key

    summary = RunSummary()
    with module_lock(host, lock_timeout):
        # modules DKMS moved away make the manifest stale: put them back before deciding what to build
        with_manifest = [k for k in kernels if host.exists(manifest_path(k))]
        summary.repaired, broken = repair_replaced(host, with_manifest, report)
        stale = [k for k in kernels if force or k in broken or not manifest_is_current(host, k)]
        spec = load_source_spec(host) if stale else None
        for kver in sorted(stale, key=version_key):
            if spec is None:
                summary.no_source = True
                write_marker(host, pending_path(kver), Marker(kver, "no module source configured"))
                report(f"{kver}: no module source configured (run `fwman modules build` once): pending")
                continue
            outcome = update_kernel(host, kver, spec, force=force or kver in broken, fetch=False, report=report)
            summary.outcomes.append(outcome)
            report(outcome.message)
        # the boot-time catch-up runs after initramfs-tools built this kernel's image: refresh it where it
        # carries NVIDIA modules (the next boot loads those copies first)
        for built in (o.kver for o in summary.outcomes if o.status == "built"):
            refresh_initramfs(host, built, report)
        # sizes and depmod's resolution, no hashing: at boot the modules were verified when installed
        summary.boot = boot.ensure_safe_boot(host, report, hash_files=False)
        settled = all(manifest_is_current(host, k) or not headers_present(host, k) for k in kernels)
        if settled and not host.exists(paths.BOOT_PIN_STATE):
            write_stamp(host, kernels)
        else:
            host.unlink(paths.MODULES_STAMP)
    return summary


def build_plan(host: Host, kernels: list[str], force: bool = False) -> list[str]:
    """Return what a hook or catch-up run would do for ``kernels`` (``--dry-run``); change nothing.

    A kernel whose installed modules DKMS replaced is put back (or rebuilt); a kernel without current modules
    is built when its headers are there, else it waits for them. The boot check runs after either (its pin is
    decided then, on the kernels as they turned out).
    """
    from fwman.core.errors import ParseError
    from fwman.driver.build.install import check_installed
    from fwman.driver.build.manifest import load_manifest, manifest_is_current
    from fwman.driver.build.source import load_source_spec

    todo: list[str] = []
    stale = [k for k in kernels if force or not manifest_is_current(host, k)]
    for kver in kernels:
        try:
            manifest = load_manifest(host, kver)
        except ParseError:
            manifest = None
        replaced = manifest is not None and any(not c.ok for c in check_installed(host, manifest, hash_files=False))
        if replaced and kver not in stale:
            todo.append(f"reinstall fwman's stored modules for {kver} (DKMS or a package replaced them)")
    spec = load_source_spec(host) if stale else None
    for kver in stale:
        if spec is None:
            todo.append(f"mark {kver} pending: no module source configured (run `fwman modules build` once)")
        elif headers_present(host, kver):
            todo.append(planned_build(host, kver, spec, force))
        else:
            todo.append(f"mark {kver} pending until its headers are installed")
    return todo


def planned_build(host: Host, kver: str, spec: SourceSpec, force: bool = False) -> str:
    """Return what a run would do for ``kver`` (headers present): build it, or leave it because its last build
    failed and nothing that build depended on changed. The same decision as the real run
    (:func:`fwman.driver.build.attempt.retry_reason`), asked without fetching or building."""
    from fwman.core.errors import ParseError
    from fwman.driver.build import toolchain
    from fwman.driver.build.attempt import retry_reason
    from fwman.driver.build.kbuild import kernel_patches
    from fwman.driver.build.manifest import failed_path, read_marker
    from fwman.driver.build.pipeline import current_attempt
    from fwman.driver.build.source import cached_source_id

    build = f"build the patched modules for {kver} from {spec.describe()}"
    try:
        patches = kernel_patches(host, kver)
    except ParseError:
        return build  # the run fails it on the patch, naming it
    missing = toolchain.missing_tools(host.which, patching=bool(patches))
    if missing:
        tools = ", ".join(t.command for t in missing)
        return f"mark {kver} pending: the build tools {tools} are missing ({toolchain.install_line(missing)})"
    failed = read_marker(host, failed_path(kver))
    source_id = cached_source_id(host, spec)
    if failed is None or force or source_id is None:
        return build
    why = retry_reason(failed, current_attempt(host, kver, source_id, patches), lambda t: host.which(t) is not None)
    if why is None:
        return (
            f"leave {kver} as it is: its build failed before ({failed.reason}) and the source, toolchain, patches "
            f"and headers are the same (run `fwman modules build --kernel {kver} --force` after fixing the cause)"
        )
    return f"{build} (its last build failed; trying again: {why})"


def fast_summary(host: Host, waiting: list[str]) -> RunSummary:
    """Return the summary of a catch-up with nothing to build: which kernels still wait, and why.

    ``waiting`` are the kernels without current modules (each marked pending, without headers). Only when there
    is one are its marker and the module source record read (small files): the build its headers wait for needs
    that source, so a damaged record is said now, not at the next kernel install.
    """
    summary = RunSummary(fast_path=True)
    if not waiting:
        return summary
    from fwman.core.errors import FwmanError
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


def write_stamp(host: Host, kernels: list[str]) -> None:
    """Record what the boot fast path (``fwman-catchup``) checks: the kernel set and fwman's module files.

    Only called when every kernel in ``kernels`` has a current manifest or no headers, and no boot pin exists.
    """
    from fwman.driver.build.manifest import load_manifest

    lines = ["fwman-catchup-stamp 1", "kernels " + " ".join(sorted(kernels))]
    for kver in sorted(kernels):
        if not headers_present(host, kver):
            lines.append(f"noheaders {kver}")  # the script runs the full catch-up once they appear
            continue
        manifest = load_manifest(host, kver)
        if manifest is not None:
            lines += [f"file {entry.path}" for entry in manifest.modules.values()]
    # surrogateescape: a directory name that is not UTF-8 is written back as the bytes the shell fast path lists
    host.write_bytes(paths.MODULES_STAMP, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
