"""What apt would do next, read from its simulation: pure parsers for ``apt-get -s`` and a package's ``Depends``.

Facts (docs/preflight.md cites them):

- ``apt-get -s`` (``--simulate``, apt-get(8) of apt 2.6.1, Debian 12): "Simulated runs print out a series of
  lines, each representing a dpkg operation: configure (Conf), remove (Remv) or unpack (Inst). Square brackets
  indicate broken packages, and empty square brackets indicate breaks that are of no consequence (rare)."
  The lines read, as apt 2.6.1 prints them here::

      Inst linux-headers-6.1.0-57-common (6.1.192-3 Debian-Security:12/oldstable-security [all])
      Inst bash [5.2.15-2+b8] (5.2.15-2+b13 Debian:12.15/oldstable [amd64])
      Inst libgcrypt20-dev [1.10.1-3] (1.10.1-3+deb12u1 Debian:12.15/oldstable, Debian-Security:12/... [amd64]) []
      Conf bash (5.2.15-2+b13 Debian:12.15/oldstable [amd64])
      Remv foo [1.0-1]

  ``Inst NAME [INSTALLED] (NEW RELEASE, RELEASE [ARCH])``: the installed version in square brackets only for
  an upgrade, the releases separated by ", " (Debian bug report against apt 3.1.15, debian-bugs-dist
  msg2083446, shows the same shape with two releases), then optionally the broken packages in square brackets.
  Every other line is apt's text for people (kept back lists, counts), which is read only for the packages
  "kept back".
- ``Depends`` (deb-control(5), Debian Policy 7.1): comma-separated groups of alternatives separated by ``|``,
  each ``NAME[:ARCH] [(OP VERSION)] [[ARCHES]] [<PROFILES>]``, OP one of ``<<``, ``<=``, ``=``, ``>=``, ``>>``.
- Kernel package names: Debian ``linux-image-KVER`` (``-unsigned`` is the unsigned build, ``-dbg`` the debug
  symbols), ``linux-headers-KVER``; Proxmox VE ``proxmox-kernel-KVER`` (``-signed``), ``proxmox-headers-KVER``,
  and before VE 8 ``pve-kernel-KVER``, ``pve-headers-KVER`` (driver/headers.py); Debian's
  ``linux-headers-ABI-common`` (and ``-common-rt``) are the headers every flavour shares. A release is
  ``MAJOR.MINOR.PATCH-…`` (``6.1.0-57-amd64``, ``6.8.12-4-pve``), or from Debian 13 on, which dropped the ABI
  number, ``MAJOR.MINOR.PATCH+debN-…`` (``6.12.118+deb13-amd64``, trixie-backports' ``7.3.4+deb13-amd64``,
  with ``linux-headers-6.12.118+deb13-common`` and ``linux-kbuild-6.12.118+deb13``: trixie's Packages as
  ``apt-cache`` read them in a trixie root, tests/story/test_trixie_kernels.py): metapackages such as
  ``linux-image-amd64`` or ``proxmox-kernel-6.8`` carry none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.errors import ParseError

WHAT = "apt-get simulation"
_NAME = r"[a-z0-9][a-z0-9+.-]*"
_OP_LINE = re.compile(
    rf"^(?P<op>Inst|Conf|Remv) (?P<name>{_NAME})(?::(?P<arch>[a-z0-9-]+))?"
    r"(?: \[(?P<old>[^\]\s]+)\])?"
    r"(?: \((?P<new>[^\s()]+)(?: (?P<releases>[^()\[\]]*?))? \[(?P<newarch>[a-z0-9-]+)\]\))?"
    r"(?: \[[^\]]*\])?$"
)
_KEPT_BACK = "The following packages have been kept back:"
_KERNEL_PACKAGE = re.compile(
    r"^(?:(?P<img>linux-image-(?:unsigned-)?|proxmox-kernel-|pve-kernel-)|(?P<hdr>linux-headers-|proxmox-headers-|pve-headers-))"
    r"(?P<kver>[0-9]+\.[0-9]+\.[0-9]+(?:\+[a-z0-9.~]+)?-[a-z0-9+.~-]*[a-z0-9])$"
)
#: the packages a header tree needs besides the headers: the common headers, kbuild's scripts and tools
_BUILD_DEPENDENCY = re.compile(r"^(?:linux-headers-|linux-kbuild-|proxmox-headers-|pve-headers-)[a-z0-9+.-]+$")


@dataclass(frozen=True)
class PackageChange:
    """One dpkg operation of a simulation: unpack (Inst), configure (Conf) or remove (Remv) one package."""

    op: str  #: "Inst" | "Conf" | "Remv"
    package: str
    arch: str | None  #: the architecture qualifier or the new version's architecture, when the line says
    installed: str | None  #: the installed version (in square brackets), None for a new install
    version: str | None  #: the version unpacked or configured, None for a removal
    releases: tuple[str, ...] = ()  #: where the version comes from ("Debian:12.15/oldstable", ...)

    @property
    def new_install(self) -> bool:
        """Return True for an unpack of a package that is not installed now."""
        return self.op == "Inst" and self.installed is None


@dataclass
class Simulation:
    """What ``apt-get -s`` said it would do, in order, and what it keeps back."""

    changes: list[PackageChange] = field(default_factory=list)
    kept_back: list[str] = field(default_factory=list)

    def installs(self) -> list[PackageChange]:
        """Return the unpacks (Inst lines), in order."""
        return [c for c in self.changes if c.op == "Inst"]


def parse_simulation(text: str) -> Simulation:
    """Return the operations of an ``apt-get -s`` run and the packages it keeps back.

    Raises ParseError (naming the line number) for an ``Inst``/``Conf``/``Remv`` line that is not in the form
    above; other lines are apt's text for people and are skipped, except the kept-back list.
    """
    sim = Simulation()
    in_kept = False
    for number, line in enumerate(text.splitlines(), start=1):
        if in_kept:
            if line.startswith(" "):
                sim.kept_back += [n.split(":", 1)[0] for n in line.split() if re.fullmatch(rf"{_NAME}(?::\S+)?", n)]
                continue
            in_kept = False
        if line.strip() == _KEPT_BACK:
            in_kept = True
            continue
        head = line.split(" ", 1)[0]
        if head not in ("Inst", "Conf", "Remv"):
            continue
        m = _OP_LINE.match(line.rstrip())
        if m is None:
            raise ParseError(WHAT, head, f"not `{head} PACKAGE [INSTALLED] (VERSION RELEASES [ARCH])`", number)
        op = m.group("op")
        if op == "Remv" and m.group("new"):
            raise ParseError(WHAT, op, "a removal with a new version", number)
        if op != "Remv" and not m.group("new"):
            raise ParseError(WHAT, op, "no (VERSION RELEASE [ARCH]) part", number)
        releases = tuple(r.strip() for r in (m.group("releases") or "").split(",") if r.strip())
        sim.changes.append(
            PackageChange(
                op, m.group("name"), m.group("arch") or m.group("newarch"), m.group("old"), m.group("new"), releases
            )
        )
    return sim


def kernel_of_package(name: str) -> tuple[str, str] | None:
    """Return ("image" | "headers", kernel release) for a kernel image or headers package name, else None.

    ``-unsigned``/``-signed`` variants of an image name the same release; debug-symbol packages (``-dbg``) and
    metapackages (no ``MAJOR.MINOR.PATCH-`` release in the name) are not kernels.
    """
    bare = name.split(":", 1)[0]
    if bare.endswith("-dbg"):
        return None
    m = _KERNEL_PACKAGE.match(bare)
    if m is None:
        return None
    kver = m.group("kver")
    if kver.endswith(("-common", "-common-rt")):  # Debian's common headers of an ABI: no kernel of that name
        return None
    if m.group("img"):
        return ("image", kver.removesuffix("-unsigned").removesuffix("-signed"))
    return ("headers", kver)


def is_build_dependency(name: str) -> bool:
    """Return True for a package a headers tree needs unpacked beside it (common headers, linux-kbuild-*)."""
    return bool(_BUILD_DEPENDENCY.fullmatch(name))


@dataclass(frozen=True)
class Relation:
    """One alternative of a ``Depends`` group: a package, and the version it must have (op and version)."""

    package: str
    op: str | None = None
    version: str | None = None


_RELATION = re.compile(
    rf"^(?P<name>{_NAME})(?::[a-z0-9-]+)?"
    r"(?:\s*\(\s*(?P<op><<|<=|=|>=|>>|<|>)\s*(?P<version>[A-Za-z0-9.+~:-]+)\s*\))?"
    r"(?:\s*\[[^\]]*\])?(?:\s*<[^>]*>)*$"
)


def parse_depends(text: str) -> list[list[Relation]]:
    """Return a ``Depends`` field as groups of alternatives (every group must be satisfied by one of its members).

    Raises ParseError naming the group (1-based) that is not ``NAME [(OP VERSION)] [[ARCH]]``.
    """
    groups: list[list[Relation]] = []
    text = " ".join(text.split())  # a field may be folded over lines
    if not text:
        return groups
    for index, group in enumerate(text.split(","), start=1):
        alternatives: list[Relation] = []
        for alt in group.split("|"):
            m = _RELATION.match(alt.strip())
            if m is None:
                raise ParseError("Depends", "relation", f"group {index}: not `NAME [(OP VERSION)]`")
            alternatives.append(Relation(m.group("name"), m.group("op"), m.group("version")))
        groups.append(alternatives)
    return groups


def apt_root_options(prefix: str | None) -> list[str]:
    """Return the apt options that point apt at a temp root's configuration, lists and dpkg status.

    ``prefix`` is the directory the Host maps ``/`` to (None for the real ``/``: no options).
    """
    if not prefix:
        return []
    return ["-o", f"Dir={prefix}/", "-o", f"Dir::State::status={prefix}/var/lib/dpkg/status"]


_FIELD = re.compile(r"^(?P<key>[A-Za-z0-9][A-Za-z0-9-]*):(?P<value>.*)$")


def parse_control(text: str) -> dict[str, str]:
    """Return the fields of the first stanza of control data (``dpkg-deb -f``, ``apt-cache show``): deb822
    ``Field: value`` lines, continuation lines starting with a space or tab folded in.

    Raises ParseError (naming the line number) for a line that is neither a field nor a continuation.
    """
    fields: dict[str, str] = {}
    last: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if fields:
                break  # the first stanza ends at the first blank line
            continue
        if line[0] in " \t":
            if last is None:
                raise ParseError("control data", "continuation", "a continuation line before any field", number)
            fields[last] += "\n" + line.strip()
            continue
        m = _FIELD.match(line)
        if m is None:
            raise ParseError("control data", "field", "not `Field: value`", number)
        last = m.group("key")
        fields[last] = m.group("value").strip()
    return fields
