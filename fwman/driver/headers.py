"""Which package carries the kernel headers for a kernel, on Debian and on Proxmox VE.

Facts (docs/hooks.md cites them):

- Debian: ``linux-headers-KVER`` (``/lib/modules/KVER/build``), pulling ``linux-headers-<ver>-common``; the
  metapackage that follows the default kernel is ``linux-headers-<flavour>`` (``linux-headers-amd64`` for
  ``6.1.0-50-amd64``, ``linux-headers-cloud-amd64`` for ``-cloud-amd64``).
- Proxmox VE 8 and later (Debian bookworm, trixie): kernels are ``proxmox-kernel-KVER``, headers
  ``proxmox-headers-KVER``, and the metapackage that keeps headers following the default kernel is
  ``proxmox-default-headers``. Proxmox VE 7 and older (bullseye, buster): ``pve-headers-KVER`` and the
  metapackage ``pve-headers``. Installing ``linux-headers-amd64`` on Proxmox pulls in a Debian kernel.
- Proxmox kernel releases end in ``-pve`` (``6.8.12-4-pve``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import MissingError, NotRecordedError
from fwman.host.base import Host

#: Debian codenames of Proxmox VE 7 and older, whose headers packages are still named pve-headers-*
OLD_PVE_CODENAMES = frozenset({"stretch", "buster", "bullseye"})
_DEBIAN_FLAVOURS = ("cloud-amd64", "rt-amd64", "amd64", "cloud-arm64", "rt-arm64", "arm64", "686-pae", "686")


def parse_os_release(text: str) -> dict[str, str]:
    """Return the KEY=value pairs of an os-release file (quotes removed; comments and junk lines skipped)."""
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
class HeadersAdvice:
    """The headers package for one kernel, and the metapackage that keeps them coming."""

    kver: str
    distribution: str  # "proxmox" | "debian" | "unknown"
    package: str
    metapackage: str | None

    def install_hint(self) -> str:
        """Return the command that installs the headers."""
        return f"apt install {self.package}"


def is_pve_kernel(kver: str) -> bool:
    """Return True for a Proxmox VE kernel release (``6.8.12-4-pve``)."""
    return kver.endswith("-pve")


def advise(kver: str, codename: str | None, proxmox: bool) -> HeadersAdvice:
    """Return the headers package for ``kver`` on a host of Debian ``codename`` (Proxmox when ``proxmox``)."""
    if is_pve_kernel(kver) or proxmox:
        old = codename in OLD_PVE_CODENAMES
        # a Debian kernel on a Proxmox host has its own headers package
        package = f"{'pve' if old else 'proxmox'}-headers-{kver}" if is_pve_kernel(kver) else f"linux-headers-{kver}"
        return HeadersAdvice(kver, "proxmox", package, "pve-headers" if old else "proxmox-default-headers")
    flavour = next((f for f in _DEBIAN_FLAVOURS if kver.endswith(f"-{f}")), None)
    return HeadersAdvice(kver, "debian", f"linux-headers-{kver}", f"linux-headers-{flavour}" if flavour else None)


def host_is_proxmox(host: Host) -> bool:
    """Return True when ``host`` is a Proxmox VE node (``/etc/pve`` or ``pveversion``)."""
    try:
        return host.is_dir("/etc/pve") or host.which("pveversion") is not None
    except NotRecordedError:
        return host.is_dir("/etc/pve")


def codename(host: Host) -> str | None:
    """Return the Debian codename from ``/etc/os-release`` (VERSION_CODENAME), or None."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            if host.exists(path):
                return parse_os_release(host.read_text(path)).get("VERSION_CODENAME") or None
        except (MissingError, NotRecordedError):
            continue
    return None


def advise_host(host: Host, kver: str) -> HeadersAdvice:
    """Return the headers advice for ``kver`` on ``host``."""
    return advise(kver, codename(host), host_is_proxmox(host))


def metapackage_missing(host: Host) -> str | None:
    """Return the headers metapackage a Proxmox host should have and lacks (for ``hooks install``), or None.

    Only on Proxmox VE 8 and later, where ``proxmox-default-headers`` exists; None when dpkg cannot say.
    """
    try:
        if not host_is_proxmox(host) or codename(host) in OLD_PVE_CODENAMES or host.which("dpkg-query") is None:
            return None
        result = host.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", "proxmox-default-headers"], timeout=30)
    except NotRecordedError:
        return None
    if result.ok and result.stdout.strip() == "installed":
        return None
    return "proxmox-default-headers"
