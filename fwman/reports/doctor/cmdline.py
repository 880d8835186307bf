"""Where this host's kernel command line is set, so a fix that adds a parameter names the file and the line.

GRUB takes it from ``GRUB_CMDLINE_LINUX_DEFAULT`` in ``/etc/default/grub`` (``update-grub`` writes it into
grub.cfg); systemd-boot entries written by ``kernel-install`` (kernel-install(8)) and by Proxmox's
``proxmox-boot-tool`` take it from ``/etc/kernel/cmdline``, one line; Proxmox VE's admin guide ("Editing the
Kernel Commandline") names both files and ``proxmox-boot-tool refresh`` to apply the second.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from fwman.core.errors import FwmanError
from fwman.host.base import Host
from fwman.host.capped import read_text_capped

GRUB_DEFAULT = "/etc/default/grub"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
PROXMOX_ESPS = "/etc/kernel/proxmox-boot-uuids"
GRUB_KEY = "GRUB_CMDLINE_LINUX_DEFAULT"
#: either file is a few lines; a larger one is not what a person wrote by hand (read no further)
MAX_FILE = 64 << 10


@dataclass(frozen=True)
class BootCmdline:
    """The files this host's command line comes from; ``known`` is False when one could not be read."""

    grub_default: str | None  # the value of GRUB_CMDLINE_LINUX_DEFAULT (None: no file, or no such line)
    kernel_cmdline: str | None  # /etc/kernel/cmdline, stripped (None: no file)
    proxmox: bool  # proxmox-boot-tool manages the ESPs
    known: bool = True


def parse_grub_default(text: str) -> str | None:
    """Return the value the last ``GRUB_CMDLINE_LINUX_DEFAULT=`` line of an /etc/default/grub assigns (the file
    is sourced by a shell: quotes removed as the shell would), None when no line assigns it or one cannot be
    read as a plain assignment. Never raises."""
    value = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith(f"{GRUB_KEY}="):
            continue
        try:
            words = shlex.split(stripped[len(GRUB_KEY) + 1 :], comments=True)
        except ValueError:
            return None  # an unclosed quote: not something to rewrite by advice
        if len(words) > 1:
            return None  # GRUB_CMDLINE_LINUX_DEFAULT=a b: a command, not an assignment
        value = words[0] if words else ""
    return value


def read_boot_cmdline(host: Host) -> BootCmdline:
    """Return where ``host`` sets its command line. Never raises: what cannot be read (not recorded in a replay,
    unreadable, too large) makes it ``known=False``."""
    try:
        grub = read_text_capped(host, GRUB_DEFAULT, MAX_FILE, "GRUB defaults") if host.exists(GRUB_DEFAULT) else None
        kernel = (
            read_text_capped(host, KERNEL_CMDLINE, MAX_FILE, "kernel command line")
            if host.exists(KERNEL_CMDLINE)
            else None
        )
        proxmox = host.exists(PROXMOX_ESPS)
    except FwmanError:  # not recorded, unreadable, too large: the fix is said in general
        return BootCmdline(None, None, False, known=False)
    grub_value = parse_grub_default(grub) if grub is not None else None
    return BootCmdline(grub_value, kernel.strip() if kernel is not None else None, proxmox)


def _with(current: str, param: str) -> str:
    """Return ``current`` with ``param`` added at the end (once)."""
    words = current.split()
    return " ".join(words if param in words else [*words, param])


def add_parameter_fix(boot: BootCmdline, param: str) -> str | None:
    """Return the exact edit that adds ``param`` to this host's command line, then the command that applies it;
    None when the files are not known (the caller says it in general)."""
    if not boot.known:
        return None
    edits = []
    if boot.kernel_cmdline is not None:
        then = (
            "`proxmox-boot-tool refresh`" if boot.proxmox else "`kernel-install add KVER /boot/vmlinuz-KVER` per kernel"
        )
        edits.append(f"make {KERNEL_CMDLINE} read `{_with(boot.kernel_cmdline, param)}`, then {then}")
    if boot.grub_default is not None:
        line = f'{GRUB_KEY}="{_with(boot.grub_default, param)}"'
        then = "`update-grub`" + (
            " (and `proxmox-boot-tool refresh`: it manages this host's ESPs)" if boot.proxmox else ""
        )
        edits.append(f"in {GRUB_DEFAULT} make the line `{line}`, then {then}")
    if not edits:
        return None
    return "; or ".join(edits) + "; reboot"
