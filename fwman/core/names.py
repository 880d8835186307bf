"""Names validated at the edge: every user-supplied name that could become a path, a file name or an option.

fwman runs as root and turns some names into paths (a kernel release names ``/lib/modules/<kver>`` and a
``.pending`` marker) or into arguments of other programs (a fork URL is handed to ``git``). Each check here
returns the value in its canonical form or raises :class:`~fwman.core.errors.UsageError` (exit 2) with one
line saying what a good value looks like. Pure functions: no I/O (``--root`` is checked by
:func:`fwman.host.local.existing_root`, the filesystem's door).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from datetime import date

from fwman.core.driver_version import DriverVersion
from fwman.core.errors import ParseError, UsageError

#: longest kernel release accepted: ``uname -r`` is at most 64 bytes (``struct utsname.release``, 65 with NUL)
MAX_KERNEL_RELEASE = 64
# A kernel release: starts with a digit or letter (never '-' or '.'), then letters, digits, '.', '_', '+', '-',
# '~'. No '/', no whitespace, no control characters, so it is always one path component and never an option.
_KERNEL_RELEASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]*")
_BUS = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])")
_FORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_BOARD_ID = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,4}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_YEAR_OR_MONTH = re.compile(r"\d{4}(-(0[1-9]|1[0-2]))?")
#: what a board ID looks like, for every message that refuses one
BOARD_ID_HINT = "a board ID is hexadecimal, at most four digits, e.g. 0x0240 (from `nvflash --version FILE`)"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # C0, DEL, C1, bidi overrides
MAX_URL = 2048


def _shown(value: str) -> str:
    """Return ``value`` quoted and shortened for a one-line message."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def is_kernel_release(value: object) -> bool:
    """Return True when ``value`` is a safe kernel release: the one rule for ``--kernel``, bundles and the names
    fwman's own records hold (a record is read back as the command line is: it may have been edited)."""
    return isinstance(value, str) and len(value) <= MAX_KERNEL_RELEASE and bool(_KERNEL_RELEASE.fullmatch(value))


def kernel_release(value: str, option: str = "--kernel") -> str:
    """Return ``value`` when it is a safe kernel release (``6.1.0-50-amd64``). Raises UsageError otherwise."""
    if not is_kernel_release(value):
        raise UsageError(
            f"{option} {_shown(value)}: not a kernel release",
            hint=f"a kernel release looks like 6.1.0-50-amd64 (as `uname -r` prints it): letters, digits, "
            f"'.', '_', '+', '~', '-', starting with a letter or digit, at most {MAX_KERNEL_RELEASE} characters",
        )
    return value


def bus_id(value: str, option: str = "--card") -> str:
    """Return a PCI bus id in sysfs form (``0000:41:00.0``) from ``41:00.0`` and its variants.

    Raises UsageError when it is not a bus id.
    """
    m = _BUS.fullmatch(value.strip()) if len(value) <= 32 else None
    if not m:
        raise UsageError(f"{option} {_shown(value)}: not a PCI bus id", hint="use the form 41:00.0 (see `fwman scan`)")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def fork_name(value: str, option: str = "--fork") -> str:
    """Return ``value`` when it is a fork name (``aikitoria``). Raises UsageError otherwise."""
    if not _FORK_NAME.fullmatch(value):
        raise UsageError(
            f"{option} name {_shown(value)}: not a fork name",
            hint="a fork name is letters, digits, '_', '.', '-', starting with a letter or digit (e.g. mine)",
        )
    return value


def fork_url(value: str, option: str = "--fork") -> str:
    """Return ``value`` when it can be handed to git as a repository (never read as an option).

    A URL (``https://``, ``ssh://``, ``git@host:path``), ``owner/name`` or an absolute path; never one starting
    with ``-``, and no whitespace or control characters. Raises UsageError otherwise.
    """
    if (
        not value
        or value.startswith("-")
        or len(value) > MAX_URL
        or _CONTROL.search(value)
        or any(c.isspace() for c in value)
        or "::" in value.split("/", 1)[0]  # git's "transport::address" remote helpers (ext::, fd::) run commands
    ):
        raise UsageError(
            f"{option} URL {_shown(value)}: not a repository URL",
            hint="give https://host/owner/repo, git@host:owner/repo, owner/repo or an absolute path "
            "(never starting with '-')",
        )
    return value


_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,254}")


def branch_name(value: str, option: str = "--branch") -> str:
    """Return ``value`` when it is a safe git branch name (``570.86.16-p2p``). Raises UsageError otherwise.

    Stricter than ``git check-ref-format``: no leading ``-`` or ``.``, no ``..``, no ``:``, no whitespace.
    """
    if not _BRANCH.fullmatch(value) or ".." in value or value.endswith((".", "/", ".lock")) or "//" in value:
        raise UsageError(
            f"{option} {_shown(value)}: not a branch name",
            hint="a branch name looks like 570.86.16-p2p (see `fwman driver branches`): letters, digits, "
            "'.', '_', '/', '+', '-', starting with a letter or digit",
        )
    return value


def normal_board_id(text: str) -> str | None:
    """Return board ID ``text`` as ``0x`` and four upper-case hex digits (``0x0240``), None when it is not one.

    The one board-ID rule: hexadecimal, at most four digits, ``0x`` optional (nvflash prints ``0x0240``; a
    user may type ``240``). Compare board IDs only in this form (the catalog, nvflash and users differ in case).
    """
    value = text.strip()
    if not _BOARD_ID.fullmatch(value):
        return None
    return f"0x{int(value.lower().removeprefix('0x'), 16):04X}"


def board_id(value: str, option: str = "--board-id") -> str:
    """Return a board ID as ``0x`` and four upper-case hex digits (``0x0240``). Raises UsageError otherwise."""
    normal = normal_board_id(value)
    if normal is None:
        raise UsageError(f"{option} {_shown(value)}: not a board ID", hint=BOARD_ID_HINT)
    return normal


def lower_hex(digits: int, *, empty_ok: bool = False) -> Callable[[str], str]:
    """Return a pydantic field validator for a hash field: it returns a value of ``digits`` lower-case hex digits
    (or "" where ``empty_ok``) and raises ValueError ("must be N lower-case hex digits") for any other."""

    def check(v: str) -> str:
        if (v or not empty_ok) and (len(v) != digits or any(c not in "0123456789abcdef" for c in v)):
            raise ValueError(f"must be {digits} lower-case hex digits")
        return v

    return check


def is_iso_date(value: str) -> bool:
    """Return True when ``value`` is a real calendar date written ``YYYY-MM-DD`` (2026-02-30 is not one)."""
    if not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def is_partial_date(value: str) -> bool:
    """Return True when ``value`` is ``YYYY``, ``YYYY-MM`` or a real ``YYYY-MM-DD`` (how precisely a date is known)."""
    return bool(_YEAR_OR_MONTH.fullmatch(value)) or is_iso_date(value)


def iso_date(value: str, option: str = "--date") -> str:
    """Return ``value`` when it is a real calendar date ``YYYY-MM-DD``. Raises UsageError otherwise."""
    if not is_iso_date(value):
        raise UsageError(
            f"{option} {_shown(value)}: not a date", hint="give a calendar date as YYYY-MM-DD, e.g. 2026-11-29"
        )
    return value


def count(value: int, option: str = "-n") -> int:
    """Return ``value`` when it is at least 1. Raises UsageError otherwise."""
    if value < 1:
        raise UsageError(f"{option} {value}: must be at least 1", hint=f"e.g. {option} 10")
    return value


def host_path(value: str, option: str = "-o") -> str:
    """Return ``value`` normalised when it names a file on the host (``/var/lib/x/fwman.prom``).

    A host path is absolute (it is mapped under ``--root``, so a relative one would mean one thing with
    ``--root`` and another without), names a file rather than a directory (no trailing ``/``, not ``/`` itself)
    and holds no control characters. Raises UsageError otherwise.
    """
    parts = value.split("/")
    if not value.startswith("/") or parts[-1] in ("", ".", "..") or ".." in parts or _CONTROL.search(value):
        raise UsageError(
            f"{option} {_shown(value)}: not a host file path",
            hint="give the absolute path of a file, e.g. /var/lib/prometheus/node-exporter/fwman.prom "
            "(under --root when given); no '..', no trailing '/'",
        )
    return posixpath.normpath(value)


def driver_version(value: str, option: str = "--version") -> DriverVersion:
    """Return the NVIDIA driver version a user typed (``570.86.16``). Raises UsageError when it is not one.

    The same parse as a version read from the host, but a bad one here is the command line's (exit 2), not a
    file found wrong (ParseError, exit 4).
    """
    try:
        version = DriverVersion.parse(value)
        if version.major < 10:  # "00.1": the pattern's two digits, but no NVIDIA release opens with a zero
            raise ParseError("driver version", "version", f"{value!r} has no real major version")
        return version
    except ParseError:
        raise UsageError(
            f"{option} {_shown(value)}: not an NVIDIA driver version",
            hint="a driver version looks like 570.86.16 or 565.77 (as `nvidia-smi` or `fwman audit` prints it)",
        ) from None


def one_line(value: str, option: str) -> str:
    """Return ``value`` when it is one line of text (a board name, a maker, where an MD5 was published).

    Such text ends up in a TOML file and its header comment, and in one-line messages: a control character
    (a newline, a tab, an escape) is refused rather than turned into a second line. Raises UsageError, also for
    an empty value.
    """
    if not value.strip() or _CONTROL.search(value):
        raise UsageError(
            f"{option} {_shown(value)}: not one line of text",
            hint="give it on one line, without control characters (newline, tab, escape)",
        )
    return value
