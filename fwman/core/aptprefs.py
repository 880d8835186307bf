"""apt preferences files (apt_preferences(5), apt 2.6.1): the one writer of every pin file fwman places.

fwman writes three: ``fwman-nvidia-dkms`` (``fwman dkms block``), ``fwman-nvidia-userspace`` (``fwman userspace
hold``) and ``fwman-kernel-preflight`` (``fwman modules preflight --hold``). Some of what they hold comes from
outside fwman (package names and versions from dpkg and apt, a record under /var/lib/fwman): a newline in one
would start a record of its own choosing (``Package: openssh-server`` / ``Pin-Priority: -1`` stops that
package's security updates). So every file is written by :func:`render`, which refuses what the format cannot
hold in a field and writes the free text (comments, ``Explanation``) on one line.

The format (apt_preferences(5)): records separated by blank lines, each a ``Package``, a ``Pin`` and a
``Pin-Priority`` field; ``Explanation:`` lines and ``#`` lines are comments. The ``Package`` field lists names
(or glob patterns) separated by whitespace. Names follow Debian Policy 5.6.1 (lower-case letters, digits,
``+``, ``-``, ``.``; at least two characters, starting with a letter or digit), versions Debian Policy 5.6.12
(``[epoch:]upstream[-revision]``: letters, digits, ``.``, ``+``, ``~``, ``-``, ``:``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fwman.core.errors import ParseError

WHAT = "apt preferences"
#: Debian Policy 5.6.1, with apt's ``:arch`` qualifier
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?")
#: a glob apt expands over package names (``*nvidia*dkms*``): the name's characters, ``*`` and ``?``
_PATTERN = re.compile(r"[a-z0-9*?][a-z0-9+.*?-]*")
#: Debian Policy 5.6.12, or ``*`` (every version)
_VERSION = re.compile(r"(?:[0-9]+:)?[A-Za-z0-9][A-Za-z0-9.+~-]*(?::[A-Za-z0-9.+~-]+)*|\*")
#: a ``Pin: release`` value: ``*`` or comma-separated ``key=value`` (a=, n=, o=, l=, c=, b=, v=)
_RELEASE = re.compile(r"\*|[a-z]=[A-Za-z0-9.+~_/-]+(?:,[a-z]=[A-Za-z0-9.+~_/-]+)*")
#: what a line of free text may not hold: C0 and C1 controls and DEL (a newline would end the line)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_EXPLANATION = 400


def is_package_name(value: str) -> bool:
    """Return True when ``value`` is a Debian package name (``linux-image-6.1.0-50-amd64``, ``libcuda1:amd64``)."""
    return _PACKAGE.fullmatch(value) is not None


def is_version(value: str) -> bool:
    """Return True when ``value`` is a Debian version (``6.1.192-1``, ``1:2.3~rc1``) or ``*``."""
    return len(value) <= 256 and _VERSION.fullmatch(value) is not None


def one_line(text: str, limit: int = MAX_EXPLANATION) -> str:
    """Return ``text`` as one line of free text: control characters (newlines too) become spaces, runs of
    whitespace one space, at most ``limit`` characters."""
    return " ".join(_CONTROL.sub(" ", text).split())[:limit]


@dataclass(frozen=True)
class Pin:
    """One record: ``packages`` (names, or glob patterns with ``patterns``) pinned by ``kind`` (``version`` or
    ``release``) ``value`` at ``priority``; ``comment`` lines and an ``explanation`` are written before it."""

    packages: tuple[str, ...]
    kind: str
    value: str
    priority: int
    explanation: str = ""
    comment: tuple[str, ...] = ()
    patterns: bool = False


def _checked_name(name: str, patterns: bool) -> str:
    if (_PATTERN if patterns else _PACKAGE).fullmatch(name) is None:
        raise ParseError(WHAT, "Package", f"{name!r} is not a Debian package name")
    return name


def _checked_value(kind: str, value: str) -> str:
    if kind == "version" and is_version(value):
        return value
    if kind == "release" and _RELEASE.fullmatch(value):
        return value
    raise ParseError(WHAT, "Pin", f"{kind} {value!r} is not a pin apt reads")


def _comment(lines: Sequence[str]) -> str:
    for text in lines:
        if _CONTROL.search(text):
            raise ParseError(WHAT, "comment", f"{text[:60]!r} is not one line")
    return "".join(f"# {text}\n" for text in lines)


def render_pin(pin: Pin) -> str:
    """Return one record's text (its comments first). Raises ParseError for a name, version or pin that is not
    one (never writes it)."""
    if not pin.packages:
        raise ParseError(WHAT, "Package", "a record without a package")
    names = " ".join(_checked_name(n, pin.patterns) for n in pin.packages)
    value = _checked_value(pin.kind, pin.value)
    explanation = f"Explanation: {one_line(pin.explanation)}\n" if pin.explanation else ""
    return (
        f"{_comment(pin.comment)}{explanation}Package: {names}\nPin: {pin.kind} {value}\n"
        f"Pin-Priority: {int(pin.priority)}\n"
    )


def render(pins: Sequence[Pin], header: Sequence[str] = ()) -> bytes:
    """Return an apt preferences file: the ``header`` comment, then each record, a blank line between them.

    Raises ParseError when a record holds what the format cannot (see :func:`render_pin`).
    """
    blocks = ([_comment(header)] if header else []) + [render_pin(p) for p in pins]
    return "\n".join(blocks).encode()
