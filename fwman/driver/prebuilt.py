"""Ubuntu's prebuilt, Canonical-signed NVIDIA kernel modules: which packages a host has, and where their modules lie.

Ubuntu ships NVIDIA's stock modules ready-built per kernel ABI (sources: the restricted Packages indexes and the
packages' file lists and maintainer scripts, docs/ubuntu.md):

- ``linux-modules-nvidia-<branch>[-server][-open]-<ver>-<abi>-<flavour>`` (``...-580-open-6.8.0-149-generic``):
  the ``-open`` ones carry the signed ``.ko`` files in ``/lib/modules/<kver>/kernel/nvidia-<branch>-open/``; the
  proprietary ones depend on ``linux-objects-nvidia-<branch>-<kver>`` (objects in
  ``/lib/modules/<kver>/kernel/nvidia-<branch>/bits/``) and ``linux-signatures-nvidia-<kver>`` (``*.ko.sig``
  there), and their postinst links the ``.ko`` files into ``/lib/modules/<kver>/kernel/nvidia-<branch>/`` at
  install time (debconf ``linux/nvidia/latelink``, default true): those files are in no dpkg file list.
  Both postinsts run ``depmod -a -F /boot/System.map-<kver> <kver>``.
- ``linux-modules-nvidia-<branch>[-open]-<flavour>`` (``-generic``, ``-generic-hwe-22.04``, ``-lowlatency``...):
  metapackages that follow the flavour's newest kernel and ``Provides: nvidia-dkms-<branch>[-open]``, so they
  satisfy ``nvidia-driver-<branch>[-open]``'s dependency on the DKMS package that fwman's DKMS pin keeps out.

The modules sit under ``kernel/``, which depmod ranks below ``updates/`` by default, so fwman's
``updates/fwman`` copy (and its depmod override) wins where fwman has built; on a kernel fwman has no build for,
the stock signed module loads and P2P is gone, silently. :func:`read_prebuilt` reads dpkg's own database through
the Host (``/var/lib/dpkg/status`` and ``/var/lib/dpkg/info/<package>.list``), so ``--root`` and snapshots answer
for the machine they describe. The block (apt pin) is :mod:`fwman.driver.dkms`'s.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError
from fwman.host.base import Host
from fwman.platform.dpkg import file_list, read_status

#: the package name patterns the apt pin blocks (apt preferences globs)
PIN_PATTERNS = ("linux-modules-nvidia-*", "linux-objects-nvidia-*", "linux-signatures-nvidia-*")

_BRANCH = r"(?P<branch>[0-9]+(?:-server)?)(?P<open>-open)?"
_UBUNTU_KVER = r"(?P<kernel>[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z][a-z0-9-]*)"
_MODULES = re.compile(rf"linux-modules-nvidia-{_BRANCH}-{_UBUNTU_KVER}")
_META = re.compile(rf"linux-modules-nvidia-{_BRANCH}-(?P<flavour>[a-z][a-z0-9.-]*)")
_OBJECTS = re.compile(rf"linux-objects-nvidia-{_BRANCH}-{_UBUNTU_KVER}")
_SIGNATURES = re.compile(rf"linux-signatures-nvidia-{_UBUNTU_KVER}")
_KINDS = (("modules", _MODULES), ("objects", _OBJECTS), ("signatures", _SIGNATURES), ("metapackage", _META))
_MODULE_DIR = re.compile(r"(?P<dir>/(?:usr/)?lib/modules/[^/]+/kernel/nvidia[^/]*)/")


@dataclass(frozen=True)
class PrebuiltName:
    """What an Ubuntu prebuilt-NVIDIA package name says."""

    kind: str  # "modules" (per kernel), "metapackage" (per flavour), "objects", "signatures"
    branch: str | None  # "580", "580-server"; None for signatures (one package signs every branch)
    open: bool
    kernel: str | None  # "6.8.0-149-generic"; None for a metapackage
    flavour: str | None  # "generic-hwe-22.04" for a metapackage, the kernel's flavour otherwise


def classify(name: str) -> PrebuiltName | None:
    """Return what the package name ``name`` says, or None for a package that is not Ubuntu's prebuilt NVIDIA
    modules. Never raises."""
    bare = name.split(":", 1)[0]
    for kind, pattern in _KINDS:
        m = pattern.fullmatch(bare)
        if m is not None:
            g = m.groupdict()
            # a kernel's flavour: "6.8.0-149-generic" -> "generic"; "6.8.0-149-generic-64k" -> "generic-64k"
            flavour = g["kernel"].split("-", 2)[2] if g.get("kernel") else g["flavour"]
            return PrebuiltName(kind, g.get("branch"), bool(g.get("open")), g.get("kernel"), flavour)
    return None


@dataclass
class PrebuiltPackage:
    """One installed prebuilt-NVIDIA package and the module files it put (or its postinst linked) on disk."""

    name: str
    version: str | None
    kind: str
    branch: str | None
    open: bool
    kernel: str | None
    flavour: str | None
    provides: list[str] = field(default_factory=list)
    module_dirs: list[str] = field(default_factory=list)  # /lib/modules/<kver>/kernel/nvidia-<...>
    modules: list[str] = field(default_factory=list)  # the .ko files now in those directories
    note: str | None = None  # why its file list could not be read


def module_dirs(listed: list[str]) -> list[str]:
    """Return the NVIDIA module directories under ``/lib/modules/<kver>/kernel/`` that the paths of a dpkg file
    list lie in (``.../kernel/nvidia-580-open`` for its ``.ko`` files, ``.../kernel/nvidia-550`` for the
    ``bits/`` the postinst links from), in first-seen order. Never raises."""
    return list(dict.fromkeys(m["dir"] for path in listed if (m := _MODULE_DIR.match(path)) is not None))


def read_prebuilt(host: Host) -> list[PrebuiltPackage] | None:
    """Return the installed prebuilt-NVIDIA packages of ``host`` (name order), each with its module directories
    and the ``.ko`` files in them now; None when the host has no dpkg database.

    Raises ParseError for a dpkg status file not in dpkg's format, MissingError when it cannot be read.
    """
    status = read_status(host)
    if status is None:
        return None
    out: list[PrebuiltPackage] = []
    for pkg in sorted((p for p in status if p.on_disk), key=lambda p: p.name):
        name = classify(pkg.name)
        if name is None:
            continue
        entry = PrebuiltPackage(
            pkg.name, pkg.version, name.kind, name.branch, name.open, name.kernel, name.flavour, list(pkg.provides)
        )
        listed = file_list(host, pkg.name)
        if listed is None:
            entry.note = f"no readable file list {paths.DPKG_INFO_DIR}/{pkg.name}.list"
        else:
            entry.module_dirs = module_dirs(listed)
            entry.modules = _modules_in(host, entry.module_dirs)
        out.append(entry)
    return out


def _modules_in(host: Host, dirs: list[str]) -> list[str]:
    """Return the ``.ko`` files (compressed ones too) directly in ``dirs``; an unreadable directory gives none."""
    found: list[str] = []
    for d in dirs:
        try:
            names = host.listdir(d) if host.is_dir(d) else []
        except (MissingError, NotRecordedError):
            names = []
        found += [posixpath.join(d, n) for n in sorted(names) if re.search(r"\.ko(?:\.(?:xz|zst|gz))?$", n)]
    return found
