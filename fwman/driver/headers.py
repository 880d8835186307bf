"""Which package carries the kernel headers for a kernel, on Debian, Ubuntu and Proxmox VE; and which kernel
release a kernel image package installs.

Facts (docs/hooks.md and docs/ubuntu.md cite them):

- Debian: ``linux-headers-KVER`` (``/lib/modules/KVER/build``), pulling ``linux-headers-<ver>-common``; the
  metapackage that follows the default kernel is ``linux-headers-<flavour>`` (``linux-headers-amd64`` for
  ``6.1.0-50-amd64``, ``linux-headers-cloud-amd64`` for ``-cloud-amd64``). Images: ``linux-image-KVER`` and
  ``linux-image-KVER-unsigned``.
- Proxmox VE 8 and later (Debian bookworm, trixie): kernels are ``proxmox-kernel-KVER`` (signed:
  ``proxmox-kernel-KVER-signed``), headers ``proxmox-headers-KVER``; the metapackage that keeps headers following
  the default kernel is ``proxmox-default-headers``, and each series has its own, ``proxmox-headers-<maj.min>``
  (``proxmox-headers-6.17`` for an opt-in 6.17 kernel on Proxmox VE 9, whose default series was 6.14).
  Proxmox VE 7 and older (bullseye, buster): ``pve-headers-KVER`` and the metapackage ``pve-headers``.
  Installing ``linux-headers-amd64`` on Proxmox pulls in a Debian kernel. Proxmox kernel releases end in
  ``-pve`` (``6.8.12-4-pve``, ``6.14.11-6-pve``, ``6.17.13-4-pve``).
- Ubuntu: ``linux-headers-KVER`` for ``KVER`` = ``<ver>-<abi>-<flavour>`` (``6.8.0-31-generic``), which depends
  on the flavour-independent part: ``linux-headers-<ver>-<abi>`` for the release's own (GA) generic kernel,
  ``linux-hwe-<series>-headers-<ver>-<abi>`` for a hardware-enablement kernel (22.04's 6.8, 24.04's 7.0),
  ``linux-lowlatency-headers-<ver>-<abi>`` and ``linux-lowlatency-hwe-<series>-headers-<ver>-<abi>`` for
  lowlatency. The metapackages: ``linux-headers-generic`` / ``linux-headers-lowlatency`` (GA) and
  ``linux-headers-generic-hwe-<VERSION_ID>`` / ``linux-headers-lowlatency-hwe-<VERSION_ID>`` (HWE). The GA
  series of each LTS release is in :data:`UBUNTU_GA_SERIES`. Images: ``linux-image-KVER`` (signed) and
  ``linux-image-unsigned-KVER``.
- Ubuntu 26.04 (resolute): its own series is 7.0 (``linux-headers-generic`` 7.0.0-27.27 in resolute-updates
  depends on ``linux-headers-7.0.0-27-generic``, which depends on ``linux-headers-7.0.0-27``); its lowlatency is
  the generic kernel with a boot configuration (``linux-lowlatency`` 7.0.0-30.30 depends on
  ``linux-headers-generic``), so it has no ``-lowlatency`` kernel of its own. Its HWE metapackage is named
  ``linux-headers-generic-hwe-26.04``; the flavour-independent part of a 26.04 HWE kernel is not published yet:
  unknown (None). Sources: packages.ubuntu.com, docs/ubuntu.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.host.base import Host
from fwman.platform.distro import Distribution, read_distribution

#: Debian codenames of Proxmox VE 7 and older, whose headers packages are still named pve-headers-*
OLD_PVE_CODENAMES = frozenset({"stretch", "buster", "bullseye"})
_DEBIAN_FLAVOURS = ("cloud-amd64", "rt-amd64", "amd64", "cloud-arm64", "rt-arm64", "arm64", "686-pae", "686")
#: the kernel series an Ubuntu LTS release ships as its own (GA) kernel: what ``linux-headers-generic`` depends
#: on in the release's -updates pocket (jammy: linux-headers-5.15.0-204-generic, noble: 6.8.0-151-generic)
UBUNTU_GA_SERIES = {"22.04": "5.15", "24.04": "6.8", "26.04": "7.0"}
#: the flavours whose common headers part and metapackages docs/ubuntu.md sources
UBUNTU_FLAVOURS = ("generic", "lowlatency")
#: the flavours each release builds a kernel of its own for (26.04's lowlatency is the generic kernel)
UBUNTU_RELEASE_FLAVOURS = {"22.04": UBUNTU_FLAVOURS, "24.04": UBUNTU_FLAVOURS, "26.04": ("generic",)}
#: the releases whose HWE kernels' flavour-independent headers package (``linux-hwe-<series>-headers-...``) was
#: read in the archive; for another release only the HWE metapackage's name is known
UBUNTU_HWE_COMMON_READ = frozenset({"22.04", "24.04"})
_UBUNTU_KVER = re.compile(
    r"(?P<series>(?P<major>[0-9]+)\.(?P<minor>[0-9]+))\.[0-9]+-(?P<abi>[0-9]+)-(?P<flavour>[a-z][a-z0-9-]*)"
)
_PVE_KVER = re.compile(r"(?P<series>[0-9]+\.[0-9]+)\.[0-9]+-[0-9]+-pve")
#: a kernel release inside a package name: starts with a digit, has a dash-separated ABI part
_KVER = r"[0-9][0-9a-z.+~]*-[0-9a-z.+~-]*?[0-9a-z]"
_KERNEL_PACKAGES = (
    re.compile(rf"proxmox-kernel-(?P<kver>{_KVER}-pve)(?:-signed)?"),
    re.compile(rf"pve-kernel-(?P<kver>{_KVER}-pve)(?:-signed)?"),
    re.compile(rf"linux-image-unsigned-(?P<kver>{_KVER})"),
    re.compile(rf"linux-image-(?P<kver>{_KVER})(?:-unsigned)?"),
)


@dataclass(frozen=True)
class HeadersAdvice:
    """The headers package for one kernel, and the metapackages that keep them coming."""

    kver: str
    distribution: str  # "proxmox" | "ubuntu" | "debian" | "unknown"
    package: str
    metapackage: str | None  # the one that follows the default kernel (None: unknown for this release)
    common: str | None = None  # Ubuntu: the flavour-independent part the package depends on
    series_metapackage: str | None = None  # Proxmox VE 8+: the one that follows this kernel's series

    def install_hint(self) -> str:
        """Return the command that installs the headers, and the metapackage whose headers follow each new kernel
        of this one's kind (the series one on Proxmox, the flavour's on Debian and Ubuntu) when there is one."""
        keeper = self.series_metapackage or self.metapackage
        follow = f" (and {keeper}, so the headers of each later kernel come with it)" if keeper else ""
        return f"apt install {self.package}{follow}"


def is_pve_kernel(kver: str) -> bool:
    """Return True for a Proxmox VE kernel release (``6.8.12-4-pve``)."""
    return kver.endswith("-pve")


def kernel_release_of_package(name: str) -> str | None:
    """Return the kernel release a kernel image package installs, or None for any other package.

    ``proxmox-kernel-6.17.13-4-pve-signed`` and ``proxmox-kernel-6.17.13-4-pve`` -> ``6.17.13-4-pve``;
    ``linux-image-6.8.0-31-generic``, ``linux-image-unsigned-6.8.0-31-generic`` -> ``6.8.0-31-generic``;
    ``linux-image-6.1.0-50-amd64-unsigned`` -> ``6.1.0-50-amd64``. Metapackages (``proxmox-kernel-6.17``,
    ``linux-image-amd64``, ``linux-image-generic-hwe-22.04``) and debug packages give None. Never raises.
    """
    if name.endswith(("-dbg", "-dbgsym")):
        return None
    for pattern in _KERNEL_PACKAGES:
        m = pattern.fullmatch(name)
        if m is not None:
            kver = m.group("kver")
            return kver if re.search(r"-[0-9]", kver) else None
    return None


def ubuntu_is_hwe(kver: str, version_id: str | None) -> bool | None:
    """Return True when ``kver`` is a hardware-enablement kernel of Ubuntu ``version_id`` (newer series than the
    release's own), False for the release's own series, None when the release or the kernel is not one fwman
    knows (no GA series in :data:`UBUNTU_GA_SERIES`, not an Ubuntu kernel release)."""
    m = _UBUNTU_KVER.fullmatch(kver)
    ga = UBUNTU_GA_SERIES.get(version_id or "")
    if m is None or ga is None:
        return None
    major, minor = (int(x) for x in ga.split("."))
    return (int(m.group("major")), int(m.group("minor"))) > (major, minor)


def _advise_ubuntu(kver: str, dist: Distribution) -> HeadersAdvice:
    package = f"linux-headers-{kver}"
    m = _UBUNTU_KVER.fullmatch(kver)
    if m is None or m.group("flavour") not in UBUNTU_RELEASE_FLAVOURS.get(dist.version_id or "", ()):
        return HeadersAdvice(kver, "ubuntu", package, None)
    series, flavour = m.group("series"), m.group("flavour")
    base = kver.removesuffix(f"-{flavour}")  # "6.8.0-31"
    hwe = ubuntu_is_hwe(kver, dist.version_id)
    if hwe is None:
        return HeadersAdvice(kver, "ubuntu", package, None)
    stem = "linux" if flavour == "generic" else f"linux-{flavour}"
    if hwe:
        known = dist.version_id in UBUNTU_HWE_COMMON_READ
        common: str | None = f"{stem}-hwe-{series}-headers-{base}" if known else None
        meta = f"linux-headers-{flavour}-hwe-{dist.version_id}"
    else:
        common = f"linux-headers-{base}" if flavour == "generic" else f"{stem}-headers-{base}"
        meta = f"linux-headers-{flavour}"
    return HeadersAdvice(kver, "ubuntu", package, meta, common=common)


def advise(kver: str, dist: Distribution) -> HeadersAdvice:
    """Return the headers package for ``kver`` on a host of distribution ``dist``."""
    if is_pve_kernel(kver) or dist.proxmox:
        old = dist.codename in OLD_PVE_CODENAMES
        meta = "pve-headers" if old else "proxmox-default-headers"
        if not is_pve_kernel(kver):  # a Debian kernel on a Proxmox host has its own headers package
            return HeadersAdvice(kver, "proxmox", f"linux-headers-{kver}", meta)
        m = _PVE_KVER.fullmatch(kver)
        series = f"proxmox-headers-{m.group('series')}" if m is not None and not old else None
        package = f"{'pve' if old else 'proxmox'}-headers-{kver}"
        return HeadersAdvice(kver, "proxmox", package, meta, series_metapackage=series)
    if dist.name == "ubuntu":
        return _advise_ubuntu(kver, dist)
    flavour = next((f for f in _DEBIAN_FLAVOURS if kver.endswith(f"-{f}")), None)
    return HeadersAdvice(kver, "debian", f"linux-headers-{kver}", f"linux-headers-{flavour}" if flavour else None)


def advise_host(host: Host, kver: str) -> HeadersAdvice:
    """Return the headers advice for ``kver`` on ``host``."""
    return advise(kver, read_distribution(host))


@dataclass(frozen=True)
class MissingMetapackage:
    """The headers metapackage a host should have and lacks, and why (for ``hooks install``)."""

    package: str
    why: str


def metapackage_missing(host: Host) -> MissingMetapackage | None:
    """Return the headers metapackage the host lacks for the hook to build for each new kernel, or None.

    Proxmox VE 8 and later: ``proxmox-default-headers``. Ubuntu: the metapackage of the running kernel's kind
    (``linux-headers-generic-hwe-22.04`` for 22.04's HWE 6.8), when fwman knows it. Read from dpkg's database
    through the Host (``--root`` answers for that root); None when it cannot be read or there is nothing to say.
    """
    from fwman.core import paths
    from fwman.platform.dpkg import installed_names

    try:
        dist = read_distribution(host)
        if dist.proxmox and dist.codename not in OLD_PVE_CODENAMES:
            package = "proxmox-default-headers"
            why = (
                "headers that follow the default Proxmox kernel, so the hook can build for each new kernel; "
                "linux-headers-amd64 would pull in a Debian kernel"
            )
        elif dist.ubuntu and host.exists(paths.KERNEL_RELEASE):
            advice = advise(host.read_text(paths.KERNEL_RELEASE).strip(), dist)
            if advice.metapackage is None:
                return None
            package = advice.metapackage
            why = f"headers that follow each new kernel like {advice.kver}, so the hook can build for it"
        else:
            return None
        installed = installed_names(host)
    except (NotRecordedError, MissingError, ParseError):
        return None
    if installed is None or package in installed:
        return None
    return MissingMetapackage(package, why)
