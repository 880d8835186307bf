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
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.host.base import Host

#: the package name patterns the apt pin blocks (apt preferences globs)
PIN_PATTERNS = ("linux-modules-nvidia-*", "linux-objects-nvidia-*", "linux-signatures-nvidia-*")
WHAT = "dpkg status"

_BRANCH = r"(?P<branch>[0-9]+(?:-server)?)(?P<open>-open)?"
_UBUNTU_KVER = r"(?P<kernel>[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z][a-z0-9-]*)"
_MODULES = re.compile(rf"linux-modules-nvidia-{_BRANCH}-{_UBUNTU_KVER}")
_META = re.compile(rf"linux-modules-nvidia-{_BRANCH}-(?P<flavour>[a-z][a-z0-9.-]*)")
_OBJECTS = re.compile(rf"linux-objects-nvidia-{_BRANCH}-{_UBUNTU_KVER}")
_SIGNATURES = re.compile(rf"linux-signatures-nvidia-{_UBUNTU_KVER}")
_FIELD = re.compile(r"(?P<key>[A-Za-z0-9][A-Za-z0-9-]*):(?P<value>.*)")
_MODULE_DIR = re.compile(r"(?P<dir>/(?:usr/)?lib/modules/[^/]+/kernel/nvidia[^/]*)/")
#: dpkg's third Status word for a package whose files are (at least partly) on disk
_ON_DISK = frozenset(
    {"installed", "unpacked", "half-configured", "half-installed", "triggers-awaited", "triggers-pending"}
)


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
    m = _MODULES.fullmatch(bare)
    if m is not None:
        return PrebuiltName("modules", m["branch"], bool(m["open"]), m["kernel"], _flavour(m["kernel"]))
    m = _OBJECTS.fullmatch(bare)
    if m is not None:
        return PrebuiltName("objects", m["branch"], bool(m["open"]), m["kernel"], _flavour(m["kernel"]))
    m = _SIGNATURES.fullmatch(bare)
    if m is not None:
        return PrebuiltName("signatures", None, False, m["kernel"], _flavour(m["kernel"]))
    m = _META.fullmatch(bare)
    if m is not None:
        return PrebuiltName("metapackage", m["branch"], bool(m["open"]), None, m["flavour"])
    return None


def _flavour(kernel: str) -> str:
    # "6.8.0-149-generic" -> "generic"; "6.8.0-149-generic-64k" -> "generic-64k"
    return kernel.split("-", 2)[2]


@dataclass(frozen=True)
class DpkgPackage:
    """One paragraph of dpkg's status file, the fields fwman reads."""

    name: str
    version: str | None
    status: str  # "install ok installed"
    provides: tuple[str, ...] = ()

    @property
    def on_disk(self) -> bool:
        """Return True when the package's files are on disk (installed, or unpacked and not yet configured)."""
        words = self.status.split()
        return len(words) == 3 and words[2] in _ON_DISK


def parse_dpkg_status(text: str) -> list[DpkgPackage]:
    """Return the packages of a dpkg status file (deb822: ``Key: value`` lines, continuation lines starting with
    a space or tab, paragraphs separated by blank lines).

    Raises ParseError (with the line number) for a line that is neither a field nor a continuation, a
    continuation with no field before it, or a paragraph without ``Package``.
    """
    packages: list[DpkgPackage] = []
    fields: dict[str, str] = {}
    last: str | None = None
    start = 1

    def close() -> None:
        if not fields:
            return
        name = fields.get("package", "").strip()
        if not name:
            raise ParseError(WHAT, "Package", "a paragraph without a Package field", start)
        provides = tuple(p.strip().split(" ", 1)[0] for p in fields.get("provides", "").split(",") if p.strip())
        version = fields.get("version", "").strip() or None
        packages.append(DpkgPackage(name, version, fields.get("status", "").strip(), provides))

    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            close()
            fields, last, start = {}, None, number + 1
            continue
        if line[0] in " \t":
            if last is None:
                raise ParseError(WHAT, "line", "a continuation line with no field before it", number)
            fields[last] += "\n" + line.strip()
            continue
        m = _FIELD.fullmatch(line)
        if m is None:
            raise ParseError(WHAT, "line", f"not a 'Field: value' line: {line[:80]!r}", number)
        last = m["key"].lower()
        fields[last] = m["value"].strip()
    close()
    return packages


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


def _read_text(host: Host, path: str) -> str | None:
    try:
        return host.read_text(path) if host.exists(path) else None
    except (MissingError, NotRecordedError):
        return None


def read_status(host: Host) -> list[DpkgPackage] | None:
    """Return dpkg's packages on ``host``, None when there is no dpkg database (not a Debian-family system, or a
    snapshot that did not record it). Raises ParseError for a status file not in dpkg's format, MissingError
    when it exists but cannot be read."""
    try:
        if not host.exists(paths.DPKG_STATUS):
            return None
        return parse_dpkg_status(host.read_text(paths.DPKG_STATUS))
    except NotRecordedError:
        return None


def _file_list(host: Host, name: str) -> list[str] | None:
    """Return the paths dpkg lists for package ``name`` (``info/NAME.list``, or ``NAME:ARCH.list``), None when
    no list can be read."""
    for candidate in (f"{paths.DPKG_INFO_DIR}/{name}.list", f"{paths.DPKG_INFO_DIR}/{name}:amd64.list"):
        text = _read_text(host, candidate)
        if text is not None:
            return [line for line in text.split("\n") if line.startswith("/")]
    return None


def module_dirs(listed: list[str]) -> list[str]:
    """Return the NVIDIA module directories under ``/lib/modules/<kver>/kernel/`` that the paths of a dpkg file
    list lie in (``.../kernel/nvidia-580-open`` for its ``.ko`` files, ``.../kernel/nvidia-550`` for the
    ``bits/`` the postinst links from), in first-seen order. Never raises."""
    found: list[str] = []
    for path in listed:
        m = _MODULE_DIR.match(path)
        if m is not None and m["dir"] not in found:
            found.append(m["dir"])
    return found


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
        listed = _file_list(host, pkg.name)
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
