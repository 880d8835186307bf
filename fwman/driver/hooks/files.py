"""Installing the kernel hook and the boot-time catch-up unit, and reporting their state.

``fwman hooks install`` writes, from the templates in ``hooks/``:

- ``/etc/kernel/postinst.d/fwman`` and ``/etc/kernel/header_postinst.d/fwman``: the thin shell hook (runs
  ``python -m fwman modules hook --kernel KVER``; never fails a kernel install unless ``strict``);
- ``/etc/kernel/postrm.d/fwman`` (``fwman modules forget``) and ``/etc/kernel/install.d/50-fwman.install``
  (systemd's kernel-install: ``add`` is the hook, ``remove`` is ``forget``);
- the final boot check, after the boot loader's own hook has written the menu: ``/etc/kernel/postinst.d/zzz-fwman``,
  ``/etc/kernel/postrm.d/zzz-fwman``, ``/etc/kernel/install.d/99-zz-fwman.install`` (``fwman modules check-boot
  --pin``), and apt's ``/etc/apt/apt.conf.d/99fwman-boot-check`` (the same once more after apt's dpkg run; only
  where apt is: :func:`left_out` says why it is skipped elsewhere);
- ``/etc/systemd/system/fwman-catchup.service`` (+ its ``multi-user.target.wants`` link): ``fwman modules
  catchup`` at boot, after ``dkms.service``, before ``nvidia-persistenced`` and the display manager.

Every file is an action (:mod:`fwman.host.actions`): installing twice changes nothing the second time. What
the hook and the unit do when they run is :mod:`fwman.driver.hooks.run`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwman.core import paths, unitfile
from fwman.core.errors import MissingError, NotRecordedError
from fwman.core.jsonout import encode
from fwman.core.resources import bundled, is_data_file, read_data
from fwman.host.actions import Action, RemoveFile, Symlink, Tell, WriteFile, apply_all, silent
from fwman.host.base import Host, is_this_machine
from fwman.platform.systemd import reload_running_systemd


def templates_dir() -> Path:
    """Return the directory of the hook templates (see fwman.core.resources.bundled). Raises MissingError."""
    here = bundled("hooks")
    if is_data_file(here / "kernel-postinst"):
        return here
    raise MissingError(
        f"hook templates not found in {here}",
        hint="reinstall fwman: hooks/ ships in its source tree and as <prefix>/share/fwman/hooks in a wheel",
    )


def python_for_hooks() -> str:
    """Return the Python interpreter the installed hook and unit run fwman with (this one)."""
    # sys.executable is absolute whenever Python knows its own path; a relative or empty one cannot be the
    # interpreter of a hook that runs from any directory
    if not os.path.isabs(sys.executable):
        raise MissingError(
            f"this Python does not know its own absolute path ({sys.executable!r})",
            hint="run fwman through its installed entry point or an absolute interpreter path",
        )
    return sys.executable


def rendered(python: str | None = None) -> dict[str, bytes]:
    """Return {host path: content} of the files ``fwman hooks install`` writes (``@PYTHON@`` substituted)."""
    directory = templates_dir()
    # written into shell hooks and a unit's ExecStart=: one plain word, or systemd and sh would read it otherwise
    python = unitfile.exec_word(python or python_for_hooks(), "interpreter")
    return {
        path: read_data(directory / name).decode().replace("@PYTHON@", python).encode() for path, name, _ in INSTALLED
    }


#: every file ``fwman hooks install`` writes: its path, its template in ``hooks/`` and its mode, in install order
#: (``hooks status`` reports them all)
INSTALLED: tuple[tuple[str, str, int], ...] = (
    (paths.POSTINST_HOOK, "kernel-postinst", 0o755),
    (paths.HEADER_POSTINST_HOOK, "kernel-postinst", 0o755),
    (paths.POSTRM_HOOK, "kernel-postrm", 0o755),
    (paths.KERNEL_INSTALL_PLUGIN, "kernel-install-plugin", 0o755),
    (paths.POSTINST_BOOT_CHECK, "kernel-bootcheck", 0o755),
    (paths.POSTRM_BOOT_CHECK, "kernel-bootcheck", 0o755),
    (paths.KERNEL_INSTALL_BOOT_CHECK, "kernel-bootcheck", 0o755),
    (paths.APT_BOOT_CHECK, "apt-boot-check", 0o644),
    (paths.CATCHUP_SCRIPT, "fwman-catchup", 0o755),
    (paths.CATCHUP_UNIT, paths.CATCHUP_UNIT_NAME, 0o644),
)


def left_out(host: Host) -> dict[str, str]:
    """Return ``{path: why}`` of the files of :data:`INSTALLED` that ``host`` gets none of.

    apt's ``DPkg::Post-Invoke`` file is for apt: on a host without it (no ``apt-get``, no apt sources: a tree
    under ``--root`` without them, a system with another package manager) writing it would only create
    ``/etc/apt`` for nothing. ``/etc/apt`` itself does not count: fwman writes its own pins there (``dkms
    block``, ``modules preflight --hold``), which would make a second ``hooks install`` differ from the first.
    ``apt-get`` is looked up on PATH on the real root only (under ``--root`` PATH is this machine's, not the
    tree's). A replay that did not record these paths counts as having apt (as before).
    """
    try:
        if host.exists(paths.APT_GET) or any(host.exists(p) for p in paths.APT_SOURCES):
            return {}
        if is_this_machine(host) and host.which("apt-get"):
            return {}
    except NotRecordedError:
        return {}
    return {paths.APT_BOOT_CHECK: "apt is not on this host (no apt-get, no /etc/apt/sources.list(.d))"}


def install_actions(python: str | None = None, skip: Collection[str] = ()) -> list[Action]:
    """Return the actions that install the hooks, the boot checks and the unit (idempotent), leaving out the
    files in ``skip`` (see :func:`left_out`)."""
    files = rendered(python)
    actions: list[Action] = [WriteFile(path, files[path], mode) for path, _, mode in INSTALLED if path not in skip]
    actions.append(Symlink(paths.CATCHUP_UNIT_WANTS, paths.CATCHUP_UNIT))
    return actions


def remove_actions() -> list[Action]:
    """Return the actions that remove everything :func:`install_actions` wrote (the unit's link first)."""
    return [RemoveFile(paths.CATCHUP_UNIT_WANTS), *(RemoveFile(path) for path, _, _ in reversed(INSTALLED))]


def install(host: Host, tell: Tell = silent, skip: Mapping[str, str] | None = None) -> list[str]:
    """Install the hook and the unit, but not the files in ``skip`` (default: :func:`left_out`); return what
    changed ([] when all was in place)."""
    done = apply_all(host, install_actions(skip=left_out(host) if skip is None else skip), tell)
    if any(paths.CATCHUP_UNIT in d for d in done):
        reload_running_systemd(host)
    from fwman.driver.headers import metapackage_missing

    missing = metapackage_missing(host)
    if missing is not None:
        tell(f"recommended: apt install {missing.package} ({missing.why})")
    return done


def remove(host: Host, tell: Tell = silent) -> list[str]:
    """Remove the hook and the unit; return what was removed."""
    done = apply_all(host, remove_actions(), tell)
    if done:
        reload_running_systemd(host)
    return done


@dataclass
class HookFileState:
    """One installed file: present, identical to what fwman would install, executable where needed (or, where
    it is not for this host, absent: ``current`` then, with a ``note`` saying why it was skipped)."""

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
        """Return True when every file is current (present as fwman writes it, or absent where it is not for this
        host: ``note`` says "skipped: ...") and the unit is enabled."""
        return all(f.current for f in self.files) and self.enabled

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.hooks-status/1`` (without the schema key)."""
        return {
            "installed": self.installed,
            "enabled": self.enabled,
            "files": encode(self.files),
            "order": self.order,
        }


def status(host: Host) -> HooksStatus:
    """Return the state of the installed hook files and unit on ``host``."""
    result = HooksStatus()
    try:
        expected = {a.path: a for a in install_actions() if isinstance(a, WriteFile)}
    except MissingError:
        expected = {}
    skipped = left_out(host)
    for path, _, _ in INSTALLED:
        if path in skipped and not host.exists(path):  # not for this host: its absence is what install leaves
            result.files.append(HookFileState(path, False, True, f"skipped: {skipped[path]}"))
            continue
        try:
            present = host.exists(path)
        except NotRecordedError:  # a snapshot captured before fwman installed this file: say so, do not guess
            result.files.append(HookFileState(path, False, False, "not recorded in this snapshot"))
            continue
        want = expected.get(path)
        # WriteFile's own rule (bytes and mode) decides; the bytes are read again only to word a difference
        current = present and want is not None and not want.is_needed(host)
        if current:
            note = ""
        elif not present:
            note = "missing"
        elif want is not None and host.read_bytes(path) == want.content:
            mode = host.file_mode(path)
            shown = f"{mode:o}" if mode is not None else "unknown"
            note = f"mode {shown}, not {want.mode:o}" + (" (run-parts skips it)" if want.mode & 0o111 else "")
        else:
            note = "differs from this fwman's version"
        result.files.append(HookFileState(path, present, current, note))
    result.enabled = host.is_link(paths.CATCHUP_UNIT_WANTS) and host.exists(paths.CATCHUP_UNIT_WANTS)
    hook_dirs = (paths.POSTINST_HOOK, paths.HEADER_POSTINST_HOOK, paths.POSTRM_HOOK)
    for directory in (posixpath.dirname(p) for p in hook_dirs):
        with contextlib.suppress(NotRecordedError):
            if host.is_dir(directory):
                result.order[directory] = sorted(host.listdir(directory))
    return result
