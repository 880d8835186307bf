"""Whether the Debian package owns the kernel hooks and the catch-up unit (then dpkg, not ``fwman hooks``,
installs, upgrades and removes them).

The package (debian/) ships the hooks as package files: ``/etc/kernel/*.d/fwman`` (conffiles),
``/usr/libexec/fwman/fwman-catchup`` and ``/lib/systemd/system/fwman-catchup.service`` (enabled by
``deb-systemd-helper``). Ownership is read from dpkg's own database through the Host door, so ``--root`` and
snapshots answer for the machine they describe: ``/var/lib/dpkg/info/fwman.list`` (every path the package
installed, one a line) and ``fwman.md5sums`` (the MD5 of every file but the conffiles, whose sums dpkg keeps in
``/var/lib/dpkg/status``). Standard library only: ``hooks status`` stays cheap.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import BlockedError, MissingError, NotRecordedError, ParseError
from fwman.host.base import Host

PACKAGE = "fwman"
#: what of the package's files are "the hooks": kernel hook directories, the unit, the catch-up script, the
#: kernel-install plugins (systemd's /usr/lib/kernel/install.d), apt's boot check; both unit directories
#: (Debian 13 uses /usr/lib)
HOOK_PREFIXES = (
    "/etc/kernel/",
    "/lib/systemd/system/fwman",
    "/usr/lib/systemd/system/fwman",
    "/usr/libexec/fwman/",
    "/usr/lib/kernel/install.d/",
    paths.APT_BOOT_CHECK,
)
#: what `fwman hooks install` (the pip layout) writes where the package has no file of that name; a leftover of
#: it next to the package's files would win (a unit in /etc/systemd/system hides the one in /lib/systemd/system,
#: a plugin in /etc/kernel/install.d the one in /usr/lib/kernel/install.d)
PIP_LAYOUT_ONLY = (
    paths.CATCHUP_UNIT,
    paths.CATCHUP_SCRIPT,
    paths.KERNEL_INSTALL_PLUGIN,
    paths.KERNEL_INSTALL_BOOT_CHECK,
)

_MD5_LINE = re.compile(r"^(?P<sum>[0-9a-f]{32})  (?P<path>[^\n]+)$")


@dataclass(frozen=True)
class PackagedFile:
    """One hook file of the package: whether it is on disk and, where dpkg keeps its MD5, whether it differs."""

    path: str
    present: bool
    modified: bool | None = None  # None: dpkg keeps no sum in md5sums (a conffile) or none could be read

    @property
    def note(self) -> str:
        """Return what ``hooks status`` prints for it."""
        if not self.present:
            return "missing (reinstall the package)"
        if self.modified:
            return "changed since the package installed it"
        return "ok (package file)" if self.modified is False else "ok (package conffile)"


@dataclass(frozen=True)
class PackageOwnership:
    """The package's hook files on this host and whether the catch-up unit is enabled."""

    package: str
    files: list[PackagedFile] = field(default_factory=list)
    unit_enabled: bool = False
    leftovers: list[str] = field(default_factory=list)  # pip-layout files that would shadow the package's

    @property
    def intact(self) -> bool:
        """Return True when every hook file is present and unchanged, the unit is enabled, nothing shadows it."""
        return all(f.present and not f.modified for f in self.files) and self.unit_enabled and not self.leftovers


def parse_dpkg_list(text: str) -> list[str]:
    """Return the paths of a dpkg file list (``/var/lib/dpkg/info/PKG.list``: one absolute path a line; the
    first is usually ``/.``). Blank lines are skipped. Raises ParseError for a line that is not absolute."""
    found: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        if not line.startswith("/"):
            raise ParseError("dpkg file list", "line", f"not an absolute path: {line[:80]!r}", number)
        found.append(line)
    return found


def parse_md5sums(text: str) -> dict[str, str]:
    """Return {absolute path: MD5 hex} of a dpkg ``PKG.md5sums`` file (lines ``<32 hex>  <path without the
    leading slash>``). Raises ParseError for any other non-blank line."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        m = _MD5_LINE.match(line)
        if m is None:
            raise ParseError("dpkg md5sums", "line", f"not '<md5>  <path>': {line[:80]!r}", number)
        sums["/" + m.group("path").lstrip("/")] = m.group("sum")
    return sums


def _read(host: Host, path: str) -> str | None:
    try:
        return host.read_text(path) if host.exists(path) else None
    except (MissingError, NotRecordedError):
        return None


def package_ownership(host: Host, package: str = PACKAGE) -> PackageOwnership | None:
    """Return the package's hook files on ``host``, or None when no installed package ships fwman's hooks.

    A package removed but not purged ships nothing any more (dpkg then lists only its conffiles, and its
    md5sums are gone): that counts as not owning, so a pip-installed fwman can install its own hooks again.
    Raises ParseError when dpkg's files are not in the documented format.
    """
    info = f"{paths.DPKG_INFO_DIR}/{package}"
    listing = _read(host, f"{info}.list")
    md5sums = _read(host, f"{info}.md5sums")
    if listing is None or md5sums is None:
        return None
    sums = parse_md5sums(md5sums)
    files: list[PackagedFile] = []
    for path in parse_dpkg_list(listing):
        if not path.startswith(HOOK_PREFIXES) or host.is_dir(path):
            continue
        present = host.exists(path)
        modified: bool | None = None
        if present and path in sums:
            modified = hashlib.md5(host.read_bytes(path), usedforsecurity=False).hexdigest() != sums[path]
        files.append(PackagedFile(path, present, modified))
    if not files:
        return None
    enabled = host.is_link(paths.CATCHUP_UNIT_WANTS) and host.exists(paths.CATCHUP_UNIT_WANTS)
    owned = {f.path for f in files}
    leftovers = [p for p in PIP_LAYOUT_ONLY if p not in owned and (host.exists(p) or host.is_link(p))]
    return PackageOwnership(package, files, enabled, leftovers)


def refuse_changes(owner: PackageOwnership, verb: str) -> str:
    """Return what ``fwman hooks install`` says when the package owns the hooks (nothing is written).

    Raises BlockedError for ``remove`` (dpkg removes package files), and for ``install`` when a package file is
    missing or changed (reinstalling the package restores it; fwman does not write over package files).
    """
    where = ", ".join(f.path for f in owner.files)
    if verb == "remove":
        raise BlockedError(
            f"the kernel hooks and the catch-up unit belong to the Debian package {owner.package} ({where})",
            hint=f"`apt remove {owner.package}` removes them (purge also removes fwman's state; backups stay)",
        )
    broken = [f for f in owner.files if not f.present or f.modified]
    if broken:
        raise BlockedError(
            f"the Debian package {owner.package} owns the hooks, and {broken[0].path} is {broken[0].note}",
            hint=f"`apt install --reinstall {owner.package}` puts the package's files back",
        )
    return f"the Debian package {owner.package} installed the hooks ({where}); nothing to do"
