"""The kernel hook and the boot-time catch-up: installing them, and what they do when they run.

``fwman hooks install`` writes, from the templates in ``hooks/``:

- ``/etc/kernel/postinst.d/fwman`` and ``/etc/kernel/header_postinst.d/fwman``: the thin shell hook (runs
  ``python -m fwman modules hook --kernel KVER``; never fails a kernel install unless ``strict``);
- ``/etc/systemd/system/fwman-catchup.service`` (+ its ``multi-user.target.wants`` link): ``fwman modules
  catchup`` at boot, after ``dkms.service``, before ``nvidia-persistenced`` and the display manager.

:func:`run_hook` is one kernel (build unless current, repair what DKMS replaced, keep the boot safe);
:func:`catchup` is every kernel, with a fast path that reads one manifest and stats five files per kernel.
Both hold the shared module lock (:mod:`fwman.driver.build.lock`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fwman.core import paths
from fwman.core.actions import Action, RemoveFile, Symlink, WriteFile, apply_all
from fwman.core.errors import MissingError
from fwman.core.resources import bundled, read_data
from fwman.host.base import Host

#: the unit's command: a shell fast path that starts Python only when something changed
#: what the last full catch-up found current (kernels, module files), read by paths.CATCHUP_SCRIPT

Report = Callable[[str], None]


def _nothing(_: str) -> None:
    return None


def templates_dir() -> Path:
    """Return the directory of the hook templates (see fwman.core.resources.bundled). Raises MissingError."""
    here = bundled("hooks")
    if (here / "kernel-postinst").is_file():
        return here
    raise MissingError(
        f"hook templates not found in {here}",
        hint="reinstall fwman: hooks/ ships in its source tree and as <prefix>/share/fwman/hooks in a wheel",
    )


def python_for_hooks() -> str:
    """Return the Python interpreter the installed hook and unit run fwman with (this one)."""
    return os.path.abspath(sys.executable)


def rendered(python: str | None = None) -> dict[str, bytes]:
    """Return {host path: content} of the files ``fwman hooks install`` writes (``@PYTHON@`` substituted)."""
    directory = templates_dir()
    python = python or python_for_hooks()
    hook = read_data(directory / "kernel-postinst").decode().replace("@PYTHON@", python).encode()
    unit = read_data(directory / paths.CATCHUP_UNIT_NAME).decode().replace("@PYTHON@", python).encode()
    script = read_data(directory / "fwman-catchup").decode().replace("@PYTHON@", python).encode()
    return {
        paths.POSTINST_HOOK: hook,
        paths.HEADER_POSTINST_HOOK: hook,
        paths.CATCHUP_UNIT: unit,
        paths.CATCHUP_SCRIPT: script,
    }


def install_actions(python: str | None = None) -> list[Action]:
    """Return the actions that install the hook and the unit (idempotent)."""
    files = rendered(python)
    actions: list[Action] = [
        WriteFile(paths.POSTINST_HOOK, files[paths.POSTINST_HOOK], 0o755),
        WriteFile(paths.HEADER_POSTINST_HOOK, files[paths.HEADER_POSTINST_HOOK], 0o755),
        WriteFile(paths.CATCHUP_SCRIPT, files[paths.CATCHUP_SCRIPT], 0o755),
        WriteFile(paths.CATCHUP_UNIT, files[paths.CATCHUP_UNIT], 0o644),
        Symlink(paths.CATCHUP_UNIT_WANTS, paths.CATCHUP_UNIT),
    ]
    return actions


def remove_actions() -> list[Action]:
    """Return the actions that remove everything :func:`install_actions` wrote."""
    return [
        RemoveFile(paths.CATCHUP_UNIT_WANTS),
        RemoveFile(paths.CATCHUP_UNIT),
        RemoveFile(paths.CATCHUP_SCRIPT),
        RemoveFile(paths.HEADER_POSTINST_HOOK),
        RemoveFile(paths.POSTINST_HOOK),
    ]


def _systemd_reload(host: Host) -> None:
    """Tell a running systemd about the changed unit (only on the real root, only when systemd runs)."""
    if host.local_path("/") == "/" and host.exists("/run/systemd/system") and host.which("systemctl"):
        host.run(["systemctl", "daemon-reload"], timeout=60)


def install(host: Host, report: Report = _nothing) -> list[str]:
    """Install the hook and the unit; return what changed ([] when all was in place)."""
    done = apply_all(host, install_actions(), report)
    if any(paths.CATCHUP_UNIT in d for d in done):
        _systemd_reload(host)
    return done


def remove(host: Host, report: Report = _nothing) -> list[str]:
    """Remove the hook and the unit; return what was removed."""
    done = apply_all(host, remove_actions(), report)
    if done:
        _systemd_reload(host)
    return done


@dataclass
class HookFileState:
    """One installed file: present, identical to what fwman would install, executable where needed."""

    path: str
    present: bool
    current: bool
    note: str = ""


@dataclass
class HooksStatus:
    """What ``fwman hooks status`` reports."""

    files: list[HookFileState] = field(default_factory=list)
    enabled: bool = False
    order: dict[str, list[str]] = field(default_factory=dict)  # hook dir -> entries in run-parts order

    @property
    def installed(self) -> bool:
        """Return True when every file is present and current and the unit is enabled."""
        return all(f.present and f.current for f in self.files) and self.enabled


def status(host: Host) -> HooksStatus:
    """Return the state of the installed hook files and unit on ``host``."""
    result = HooksStatus()
    try:
        expected = rendered()
    except MissingError:
        expected = {}
    for path in (paths.POSTINST_HOOK, paths.HEADER_POSTINST_HOOK, paths.CATCHUP_SCRIPT, paths.CATCHUP_UNIT):
        present = host.exists(path)
        current = present and path in expected and host.read_bytes(path) == expected[path]
        note = "" if current else ("missing" if not present else "differs from this fwman's version")
        result.files.append(HookFileState(path, present, current, note))
    result.enabled = host.is_link(paths.CATCHUP_UNIT_WANTS) and host.exists(paths.CATCHUP_UNIT_WANTS)
    for directory in ("/etc/kernel/postinst.d", "/etc/kernel/header_postinst.d"):
        if host.is_dir(directory):
            result.order[directory] = sorted(host.listdir(directory))
    return result


# -- what runs: one kernel (hook), every kernel (catch-up) ------------------------------------------------
@dataclass
class RunSummary:
    """What a hook or catch-up run did, for the CLI to render and map to an exit status."""

    outcomes: list[object] = field(default_factory=list)  # build.KernelOutcome
    repaired: list[str] = field(default_factory=list)
    boot: object | None = None  # boot.BootCheck
    fast_path: bool = False
    no_source: bool = False

    @property
    def failed(self) -> list[object]:
        """Return the outcomes that failed or stay pending."""
        return [o for o in self.outcomes if getattr(o, "status", "") in ("failed", "pending", "skipped")]


def repair_replaced(host: Host, kernels: list[str], report: Report = _nothing) -> tuple[list[str], list[str]]:
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


def run_hook(host: Host, kver: str, origin: str, report: Report = _nothing, lock_timeout: float = 900.0) -> RunSummary:
    """Do what the kernel hook does for ``kver`` and return the summary (the CLI decides the exit status).

    Builds unless the kernel's modules are current, repairs modules DKMS replaced for any kernel, and keeps the
    next boot on a kernel with working modules. Raises LockTimeout when another build holds the lock.
    """
    from fwman.driver.boot import pin as boot
    from fwman.driver.build.lock import module_lock
    from fwman.driver.build.manifest import Marker, manifest_is_current, pending_path, write_marker
    from fwman.driver.build.pipeline import KernelOutcome, load_source_spec, update_kernel

    summary = RunSummary()
    with module_lock(host, lock_timeout):
        # first what DKMS (its hook ran just before this one) may have replaced: a repair needs no build
        kernels = boot.installed_kernels(host)
        with_manifest = [k for k in kernels if host.exists(f"/var/lib/fwman/modules/{k}.json")]
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
        summary.boot = boot.ensure_safe_boot(host, report)
    return summary


def catchup(host: Host, report: Report = _nothing, force: bool = False, lock_timeout: float = 900.0) -> RunSummary:
    """Build for every installed kernel with headers that lacks a current manifest; keep the boot safe.

    Fast path (nothing to do): per kernel, one manifest read and a ``stat`` per module, no lock, no hashing, no
    source resolution. Raises LockTimeout when another build holds the lock.
    """
    from fwman.driver.build.manifest import manifest_is_current

    # listed here rather than through fwman.driver.kmod.depmod, whose imports (pydantic) cost more than the check
    kernels = [k for k in _listdir(host, "/lib/modules") if host.is_dir(f"/lib/modules/{k}")]
    # a kernel without headers that is already marked pending has nothing to do until its headers come
    todo = [
        k
        for k in kernels
        if not manifest_is_current(host, k)
        and (_has_headers(host, k) or not host.exists(f"/var/lib/fwman/modules/{k}.pending"))
    ]
    if not todo and not force and not host.exists("/var/lib/fwman/boot-pin.json"):
        if not host.exists(paths.MODULES_STAMP):
            write_stamp(host, kernels)
        return RunSummary(fast_path=True)

    from fwman.driver.boot import pin as boot
    from fwman.driver.build.lock import module_lock
    from fwman.driver.build.manifest import Marker, pending_path, write_marker
    from fwman.driver.build.pipeline import load_source_spec, update_kernel

    summary = RunSummary()
    with module_lock(host, lock_timeout):
        # modules DKMS moved away make the manifest stale: put them back before deciding what to build
        with_manifest = [k for k in kernels if host.exists(f"/var/lib/fwman/modules/{k}.json")]
        summary.repaired, broken = repair_replaced(host, with_manifest, report)
        stale = [k for k in kernels if force or k in broken or not manifest_is_current(host, k)]
        spec = load_source_spec(host) if stale else None
        for kver in sorted(stale, key=boot.version_key):
            if spec is None:
                summary.no_source = True
                write_marker(host, pending_path(kver), Marker(kver, "no module source configured"))
                report(f"{kver}: no module source configured (run `fwman modules build` once): pending")
                continue
            outcome = update_kernel(host, kver, spec, force=force or kver in broken, fetch=False, report=report)
            summary.outcomes.append(outcome)
            report(outcome.message)
        # sizes and depmod's resolution, no hashing: at boot the modules were verified when installed
        summary.boot = boot.ensure_safe_boot(host, report, hash_files=False)
        settled = all(manifest_is_current(host, k) or not _has_headers(host, k) for k in kernels)
        if settled and not host.exists(paths.BOOT_PIN_STATE):
            write_stamp(host, kernels)
        else:
            host.unlink(paths.MODULES_STAMP)
    return summary


def _has_headers(host: Host, kver: str) -> bool:
    return host.is_dir(f"/lib/modules/{kver}/build/include")


def write_stamp(host: Host, kernels: list[str]) -> None:
    """Record what the boot fast path (``fwman-catchup``) checks: the kernel set and fwman's module files.

    Only called when every kernel in ``kernels`` has a current manifest or no headers, and no boot pin exists.
    """
    from fwman.driver.build.manifest import load_manifest

    lines = ["fwman-catchup-stamp 1", "kernels " + " ".join(sorted(kernels))]
    for kver in sorted(kernels):
        if not _has_headers(host, kver):
            lines.append(f"noheaders {kver}")  # the script runs the full catch-up once they appear
            continue
        manifest = load_manifest(host, kver)
        if manifest is not None:
            lines += [f"file {entry.path}" for entry in manifest.modules.values()]
    host.write_bytes(paths.MODULES_STAMP, ("\n".join(lines) + "\n").encode())


def _listdir(host: Host, path: str) -> list[str]:
    try:
        return host.listdir(path)
    except MissingError:
        return []
