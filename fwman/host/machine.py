"""Which commands act on the machine itself: its devices, loaded modules, services, boot and firmware.

Under ``--root DIR`` every host path fwman reads or writes is mapped into DIR, but a command still runs on the
machine fwman runs on: ``nvidia-smi -pl`` sets the power limit of this machine's GPUs, ``update-initramfs -u -k
KVER`` rewrites this machine's /boot, ``modprobe`` loads into this machine's kernel, whatever DIR is.
:func:`acts_on_machine` names such a command; :class:`fwman.host.live.LiveHost` refuses it under a root (the
door), unless the environment names the tools that stand for the root's own machine (a test rig's nvflash).

Reads stay allowed (``nvidia-smi -q``, ``systemctl is-active``, ``mokutil --sb-state``, ``dkms status``), and so do
tools that are given the root explicitly: ``depmod -b``, ``dkms --dkmstree=...``, ``systemctl --root=``,
``grub-set-default --boot-directory=``, ``grub-editenv FILE``. Sources for the options: the manual pages of
nvidia-smi(1), systemctl(1), mokutil(1), dkms(8), depmod(8), setpci(8), grub-set-default(8), grub-reboot(8).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fwman.core.errors import BlockedError

if TYPE_CHECKING:
    from fwman.host.base import Host


class RootDoorError(BlockedError):
    """Under ``--root``, a command would have acted on this machine itself (exit 3, before it ran)."""


#: nvidia-smi options that change a GPU's state (nvidia-smi(1), "DEVICE MODIFICATIONS" and clocks)
NVIDIA_SMI_WRITES = frozenset(
    {
        "-pm", "--persistence-mode", "-pl", "--power-limit", "-e", "--ecc-config", "-p", "--reset-ecc-errors",
        "-c", "--compute-mode", "-dm", "--driver-model", "-fdm", "--force-driver-model", "-am", "--accounting-mode",
        "-caa", "--clear-accounted-apps", "-ac", "--applications-clocks", "-rac", "--reset-applications-clocks",
        "-lgc", "--lock-gpu-clocks", "-rgc", "--reset-gpu-clocks", "-lmc", "--lock-memory-clocks",
        "-rmc", "--reset-memory-clocks", "-r", "--gpu-reset", "-mig", "--multi-instance-gpu", "-cc",
        "--cuda-clocks", "-gtt", "--gpu-target-temp",
    }
)  # fmt: skip
#: systemctl verbs that only read (systemctl(1)); every other verb changes a unit or the manager
SYSTEMCTL_READS = frozenset(
    {
        "is-active", "is-enabled", "is-failed", "is-system-running", "status", "show", "cat", "list-units",
        "list-unit-files", "list-timers", "list-sockets", "list-dependencies", "get-default", "help",
    }
)  # fmt: skip
#: mokutil options that only read (mokutil(1))
MOKUTIL_READS = frozenset(
    {"--sb-state", "--list-enrolled", "-l", "--list-new", "-N", "--list-delete", "-D", "--test-key", "-t",
     "--export", "-x", "--help", "-h", "--version", "--pk", "--kek", "--db", "--dbx", "--mokx"}
)  # fmt: skip
#: dkms commands that only read (dkms(8))
DKMS_READS = frozenset({"status", "--version", "-V", "help"})
#: tools that act on this machine whatever their arguments, and what they act on
ALWAYS = {
    tool: what
    for what, tools in {
        "this machine's GPU firmware": "nvflash nvflash64",
        "this machine's running kernel": "modprobe rmmod insmod",
        "this machine's /boot": "update-initramfs dracut mkinitcpio kernel-install",
        "this machine's boot menu": "update-grub grub-mkconfig",
        "this machine's boot loader": "bootctl proxmox-boot-tool",
        "this machine's firmware boot entries": "efibootmgr",
        "this machine's services": "update-rc.d invoke-rc.d service deb-systemd-helper deb-systemd-invoke",
        "this machine": "reboot shutdown",
    }.items()
    for tool in tools.split()
}


#: apt-get verbs that install or remove packages (apt-get(8)); without a simulation option they change the
#: machine's packages whatever ``-o Dir=`` says (dpkg and the maintainer scripts run on this machine)
APT_CHANGES = frozenset(
    {"install", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade", "autoremove", "reinstall", "build-dep"}
)
#: apt-get options that make a changing verb a simulation or a download only (apt-get(8))
APT_NO_CHANGE = frozenset(
    {"-s", "--simulate", "--just-print", "--dry-run", "--recon", "--no-act", "-d", "--download-only"}
)


def acts_on_machine(argv: Sequence[str]) -> str | None:
    """Return what ``argv`` would act on of this machine itself (e.g. "this machine's /boot"), or None when it
    only reads, or acts on paths it is given (a root fwman maps). Never raises."""
    if not argv:
        return None
    tool = os.path.basename(argv[0])
    args = list(argv[1:])
    if tool in ALWAYS:
        return ALWAYS[tool]
    if tool == "nvidia-smi":
        return "this machine's GPUs" if any(a.split("=", 1)[0] in NVIDIA_SMI_WRITES for a in args) else None
    if tool == "systemctl":
        if any(a == "--root" or a.startswith("--root=") for a in args):
            return None
        verbs = [a for a in args if not a.startswith("-")]
        return "this machine's services" if verbs and verbs[0] not in SYSTEMCTL_READS else None
    if tool == "mokutil":
        writes = [a for a in args if a.startswith("-") and a not in MOKUTIL_READS]
        return "this machine's Secure Boot keys" if writes else None
    if tool == "dkms":
        given = any(a.startswith(("--dkmstree", "--installtree")) for a in args)
        verbs = [a for a in args if not a.startswith("-")]
        return None if given or not verbs or verbs[0] in DKMS_READS else "this machine's /lib/modules and DKMS tree"
    if tool == "depmod":
        given = any(a in ("-b", "--basedir") or a.startswith("--basedir=") for a in args)
        return None if given or "-n" in args or "--dry-run" in args else "this machine's /lib/modules"
    if tool in ("grub-set-default", "grub-reboot"):
        return None if any(a.startswith("--boot-directory=") for a in args) else "this machine's boot menu"
    if tool in ("apt-get", "apt"):
        verbs = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-o")]
        quiet = any(a in APT_NO_CHANGE for a in args)
        return "this machine's packages" if verbs and verbs[0] in APT_CHANGES and not quiet else None
    if tool == "nvidia-ctk":
        # `cdi generate` reads this machine's driver and, without --output, prints; `runtime configure` edits the
        # machine's container runtime (NVIDIA container-toolkit's documentation)
        words = [a for a in args if not a.startswith("-")][:2]
        generates = words == ["cdi", "generate"] and any(a.startswith("--output") for a in args)
        return "this machine's container runtime" if generates or words == ["runtime", "configure"] else None
    if tool == "setpci":
        # a write is REG=VALUE after the device selection (setpci(8)); a bare REG reads
        return "this machine's PCI devices" if any("=" in a and not a.startswith("-") for a in args) else None
    return None


def door(root: str, machine_tools: Sequence[str], argv: Sequence[str]) -> str | None:
    """Return the stand-in executable to run for ``argv`` under ``root`` (from ``machine_tools``), or None when
    ``argv`` may run as usual (``root`` is ``/``, or it does not act on the machine).

    Raises RootDoorError when it acts on the machine, ``root`` is not ``/`` and no stand-in is named for it.
    """
    if root == "/" or (what := acts_on_machine(argv)) is None:
        return None
    tool = os.path.basename(argv[0])
    found = shutil.which(tool, path=os.pathsep.join(machine_tools)) if machine_tools else None
    if found is None:
        raise RootDoorError(
            f"under --root {root}, fwman does not run `{' '.join(argv)}`: it would act on {what}, not on the tree"
            " under the root",
            hint="run the command without --root on the machine it is meant for (or inside the root, e.g. with"
            " chroot, where that tool acts on the root's own files)",
        )
    return found


def reachable(host: Host, argv: Sequence[str]) -> bool:
    """Return True when ``argv`` may run through ``host``: the machine itself, a command that does not act on the
    machine, or a root whose environment names a stand-in for the tool; False on a replay (no local files)."""
    if host.local_path("/") is None:
        return acts_on_machine(argv) is None
    try:
        check_reachable(host, argv)
    except RootDoorError:
        return False
    return True


def check_reachable(host: Host, argv: Sequence[str]) -> None:
    """Raise RootDoorError when ``argv`` may not run through ``host`` (see :func:`reachable`)."""
    local = host.local_path("/")
    if local is not None:
        door(local.rstrip("/") or "/", getattr(host, "machine_tools", ()), argv)
