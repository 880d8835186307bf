"""Which distribution the host runs: Debian, Ubuntu or Proxmox VE, read from ``/etc/os-release`` through the Host.

The one owner of "what distribution is this": the headers advice (driver/headers), the prebuilt-module checks
and the signing-key search ask here. Facts (docs/ubuntu.md cites them):

- ``/etc/os-release`` (else ``/usr/lib/os-release``, the fallback os-release(5) names) carries ``ID``
  (``debian``, ``ubuntu``), ``ID_LIKE``, ``VERSION_ID`` (``12``, ``24.04``) and ``VERSION_CODENAME``
  (``bookworm``, ``trixie``, ``jammy``, ``noble``); values may be quoted.
- Proxmox VE keeps Debian's os-release (``ID=debian``): a node is told by ``/etc/pve`` (the cluster filesystem)
  or the ``pveversion`` command.
- Ubuntu's own DKMS (dkms 3.0.11-1ubuntu13, ``distro_version()``) answers ``ID`` when it is ``ubuntu``, else
  the first word of ``ID_LIKE``, and signs with shim-signed's key when that answer starts with ``ubuntu``;
  :attr:`Distribution.ubuntu` is the same test.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import MissingError, NotRecordedError
from fwman.host.base import Host

OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")


def parse_os_release(text: str) -> dict[str, str]:
    """Return the KEY=value pairs of an os-release file (quotes removed; comments and junk lines skipped).

    Never raises.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value
    return out


@dataclass(frozen=True)
class Distribution:
    """The host's distribution as os-release and the Proxmox markers say it."""

    id: str | None  # "debian", "ubuntu", ... (None: no os-release readable)
    version_id: str | None = None  # "12", "24.04"
    codename: str | None = None  # "bookworm", "noble"
    id_like: tuple[str, ...] = ()
    proxmox: bool = False

    @property
    def ubuntu(self) -> bool:
        """Return True on Ubuntu and what Ubuntu's DKMS takes for it: ``ID=ubuntu``, or an ``ID_LIKE`` that starts
        with ``ubuntu`` (a derivative such as Linux Mint); a Proxmox node never is."""
        return (self.id == "ubuntu" or self.id_like[:1] == ("ubuntu",)) and not self.proxmox

    @property
    def name(self) -> str:
        """Return "proxmox", "ubuntu", "debian" or "unknown" (what the headers advice and the JSON say)."""
        if self.proxmox:
            return "proxmox"
        if self.id in ("ubuntu", "debian"):
            return self.id
        if "ubuntu" in self.id_like:
            return "ubuntu"
        return "debian" if "debian" in self.id_like else "unknown"


def distribution_from_os_release(text: str, *, proxmox: bool = False) -> Distribution:
    """Return the distribution an os-release text describes (``proxmox`` from the node markers). Never raises."""
    fields = parse_os_release(text)
    return Distribution(
        id=fields.get("ID") or None,
        version_id=fields.get("VERSION_ID") or None,
        codename=fields.get("VERSION_CODENAME") or fields.get("UBUNTU_CODENAME") or None,
        id_like=tuple(fields.get("ID_LIKE", "").split()),
        proxmox=proxmox,
    )


def host_is_proxmox(host: Host) -> bool:
    """Return True when ``host`` is a Proxmox VE node (``/etc/pve`` or ``pveversion``)."""
    try:
        return host.is_dir("/etc/pve") or host.which("pveversion") is not None
    except NotRecordedError:
        return host.is_dir("/etc/pve")


def read_os_release(host: Host) -> str | None:
    """Return the text of the host's os-release file (``/etc/os-release``, else ``/usr/lib/os-release``), or None
    when neither can be read (absent, unreadable, not recorded in a snapshot)."""
    for path in OS_RELEASE_PATHS:
        try:
            if host.exists(path):
                return host.read_text(path)
        except (MissingError, NotRecordedError):
            continue
    return None


def read_distribution(host: Host) -> Distribution:
    """Return the host's distribution; ``Distribution(None)`` fields when os-release cannot be read. Never raises
    for a missing or unrecorded file."""
    # an os-release that cannot be read reads as an empty one: no field known
    return distribution_from_os_release(read_os_release(host) or "", proxmox=host_is_proxmox(host))
