"""Proxmox VE guest configs: LXC containers (``/etc/pve/lxc/<id>.conf``) and QEMU VMs
(``/etc/pve/qemu-server/<id>.conf``).

A config's current state is the part before the first ``[section]`` line: the sections after it are snapshots
of older states, so every parser here stops there. The parsers never raise; the readers raise what the Host
raises (NotRecordedError, MissingError) and leave the verdict on an unreadable config to the caller.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile

from fwman.core import paths
from fwman.core.errors import FwmanError
from fwman.host.base import Host
from fwman.host.optional import read_text_if_exists
from fwman.platform.envfile import NAME, unquote

LXC_DIR = paths.PVE_LXC_DIR
QEMU_DIR = paths.PVE_QEMU_DIR
#: lines of a Proxmox container config that give it an NVIDIA device (cgroup rule for major 195, a bind mount
#: of /dev/nvidia*, or a devN: passthrough entry)
_GPU_LINE = re.compile(
    r"^(?:lxc\.cgroup2?\.devices\.allow\s*[:=]\s*c\s+195:|lxc\.mount\.entry\s*[:=]\s*/dev/nvidia"
    r"|dev\d+:\s*/dev/nvidia)"
)
#: an LXC hook that mentions NVIDIA. LXC's hook keys carry hyphens (``lxc.hook.pre-start``, ``start-host``,
#: ``post-stop``), and a raw LXC config writes ``key = value`` where Proxmox writes ``key: value``.
_NVIDIA_HOOK = re.compile(r"^lxc\.hook\.[\w-]+\s*[:=].*nvidia", re.IGNORECASE)
_LXC_ENV = re.compile(r"^lxc\.environment(?:\.runtime)?\s*[:=]\s*(.*)$")
_HOSTPCI = re.compile(r"^hostpci\d+\s*:")


# -- pure parsers -------------------------------------------------------------------------------------------
def _current(text: str) -> list[str]:
    """Return the stripped lines of the current section (up to the first ``[snapshot]`` line)."""
    return list(takewhile(lambda line: not line.startswith("["), (raw.strip() for raw in text.splitlines())))


def lxc_uses_gpu(conf: str) -> tuple[bool, bool]:
    """Return (has an NVIDIA device, has an NVIDIA hook) for a container config (current section only).

    Never raises.
    """
    lines = _current(conf)
    return any(_GPU_LINE.match(line) for line in lines), any(_NVIDIA_HOOK.match(line) for line in lines)


def parse_lxc_environment(text: str) -> dict[str, str]:
    """Return the ``lxc.environment: KEY=VALUE`` (or ``lxc.environment = ...``) lines of an LXC/Proxmox
    container config, current section only. Never raises."""
    out: dict[str, str] = {}
    for line in _current(text):
        m = _LXC_ENV.match(line)
        if m:
            name, sep, value = m.group(1).strip().partition("=")
            if sep and NAME.fullmatch(name.strip()):
                out[name.strip()] = unquote(value)
    return out


def hostpci_lines(text: str) -> list[str]:
    """Return the ``hostpciN:`` lines of a Proxmox VM config (current section only). Never raises."""
    return [line for line in _current(text) if _HOSTPCI.match(line)]


def guest_id(name: str) -> str:
    """Return the guest id of a config file name (``101.conf`` -> ``101``)."""
    return name.removesuffix(".conf")


def lxc_config_path(ctid: str) -> str:
    """Return the path of container ``ctid``'s config."""
    return posixpath.join(LXC_DIR, f"{ctid}.conf")


def lxc_rootfs(ctid: str) -> str:
    """Return where a running (or ``pct mount``-ed) container's root filesystem is mounted."""
    return f"/var/lib/lxc/{ctid}/rootfs"


# -- readers --------------------------------------------------------------------------------------------------
def _config_names(host: Host, directory: str) -> list[str]:
    if not host.is_dir(directory):
        return []
    return [n for n in host.listdir(directory) if n.endswith(".conf")]


def lxc_config_names(host: Host) -> list[str]:
    """Return the container config file names (``101.conf``) in listing order; [] without /etc/pve/lxc.

    Raises NotRecordedError (snapshot) or MissingError (unreadable directory).
    """
    return _config_names(host, LXC_DIR)


def qemu_config_names(host: Host) -> list[str]:
    """Return the VM config file names (``100.conf``) in listing order; [] without /etc/pve/qemu-server.

    Raises NotRecordedError (snapshot) or MissingError (unreadable directory).
    """
    return _config_names(host, QEMU_DIR)


@dataclass(frozen=True)
class GuestConfig:
    """One guest's config file as read: its text, or the error reading it met."""

    name: str  # the file name, "101.conf"
    path: str
    text: str  # "" when absent or unreadable
    error: FwmanError | None = None  # what reading it met (NotRecordedError, MissingError, ...)

    @property
    def guest_id(self) -> str:
        """Return the guest id ("101")."""
        return guest_id(self.name)


def read_configs(host: Host, directory: str, names: Sequence[str]) -> list[GuestConfig]:
    """Return the configs ``names`` of ``directory`` in the order given; one that cannot be read carries its
    error (and empty text) instead of raising, so one unreadable guest never hides the others."""
    out = []
    for name in names:
        path = posixpath.join(directory, name)
        try:
            out.append(GuestConfig(name, path, read_config(host, path) or ""))
        except FwmanError as e:
            out.append(GuestConfig(name, path, "", e))
    return out


def read_config(host: Host, path: str) -> str | None:
    """Return the text of the guest config at ``path``, None when it does not exist.

    Raises NotRecordedError (snapshot) or MissingError (unreadable file).
    """
    return read_text_if_exists(host, path)
