"""dpkg's own database, read through the Host: which packages are installed (``/var/lib/dpkg/status``) and
which files each put on disk (``/var/lib/dpkg/info/<package>.list``).

Read as files, not with ``dpkg-query``, so ``--root`` and snapshots answer for the machine they describe (a
``dpkg-query`` without ``--admindir`` would answer for the machine fwman runs on). The status file is deb822
(dpkg's deb822(5) and the ``Status`` field of dpkg-query(1): "want flag status", e.g. "install ok installed").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.host.base import Host

WHAT = "dpkg status"
_FIELD = re.compile(r"(?P<key>[A-Za-z0-9][A-Za-z0-9-]*):(?P<value>.*)")
#: dpkg's third Status word for a package whose files are (at least partly) on disk
_ON_DISK = frozenset(
    {"installed", "unpacked", "half-configured", "half-installed", "triggers-awaited", "triggers-pending"}
)


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


def _read_text(host: Host, path: str) -> str | None:
    try:
        return host.read_text(path) if host.exists(path) else None
    except (MissingError, NotRecordedError):
        return None


def has_database(host: Host) -> bool | None:
    """Return whether ``host`` has dpkg's status file (a tree without it has no package dpkg installed), None on a
    replay that did not look. Never raises."""
    try:
        return host.exists(paths.DPKG_STATUS)
    except NotRecordedError:
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


def file_list(host: Host, name: str) -> list[str] | None:
    """Return the paths dpkg lists for package ``name`` (``info/NAME.list``, or ``NAME:ARCH.list``), None when
    no list can be read."""
    for candidate in (f"{paths.DPKG_INFO_DIR}/{name}.list", f"{paths.DPKG_INFO_DIR}/{name}:amd64.list"):
        text = _read_text(host, candidate)
        if text is not None:
            return [line for line in text.split("\n") if line.startswith("/")]
    return None


def installed_names(host: Host) -> set[str] | None:
    """Return the names of the packages whose files are on disk, None when there is no dpkg database.

    Raises ParseError for a status file not in dpkg's format, MissingError when it cannot be read.
    """
    status = read_status(host)
    return None if status is None else {p.name for p in status if p.on_disk}
