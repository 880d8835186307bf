"""systemd unit files (systemd.syntax(7), systemd.service(5)): the one writer of the units fwman places, and the
check of a path fwman puts into a unit or a hook script.

A unit is ``[Section]`` lines and ``Key=value`` lines; a newline in a value starts a key of its own choosing
(``ExecStartPre=`` runs as root). In ``ExecStart=`` systemd also expands ``%`` specifiers and ``$`` variables
and splits at whitespace and quotes. :func:`render` refuses a value with a control character, and
:func:`exec_word` a command word with anything but the characters of a plain path or argument, so nothing is
expanded, split or quoted differently from what fwman meant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fwman.core.errors import ParseError

WHAT = "systemd unit"
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SECTION = re.compile(r"[A-Za-z][A-Za-z0-9 -]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: a word of a command line that systemd and sh take as it is: no whitespace, quotes, '%', '$', '\\', ';'
_WORD = re.compile(r"[A-Za-z0-9/._+=:,@-]+")

Section = tuple[str, Sequence[tuple[str, str]]]


def exec_word(word: str, what: str = "command word") -> str:
    """Return ``word`` when systemd (and a shell) read it as the one word it is (``/usr/bin/nvidia-smi``,
    ``0000:41:00.0``). Raises ParseError otherwise."""
    if not _WORD.fullmatch(word):
        raise ParseError(WHAT, what, f"{word[:80]!r} is not a plain word (no spaces, quotes, '%', '$')")
    return word


def exec_line(argv: Sequence[str]) -> str:
    """Return ``argv`` as an ``ExecStart=`` value (each word checked by :func:`exec_word`)."""
    return " ".join(exec_word(a) for a in argv)


def render(sections: Sequence[Section], comments: Sequence[str] = ()) -> bytes:
    """Return a unit file: ``comments`` as ``#`` lines, then each ``[section]`` with its ``Key=value`` lines, a
    blank line between sections.

    Raises ParseError for a comment, section, key or value that is not one line of what the format holds.
    """
    for text in comments:
        if _CONTROL.search(text):
            raise ParseError(WHAT, "comment", f"{text[:60]!r} is not one line")
    lines = [f"# {text}" for text in comments]
    for n, (name, entries) in enumerate(sections):
        if not _SECTION.fullmatch(name):
            raise ParseError(WHAT, "section", f"{name!r} is not a section name")
        lines += [""] if n else []
        lines.append(f"[{name}]")
        for key, value in entries:
            if not _KEY.fullmatch(key) or _CONTROL.search(value):
                raise ParseError(WHAT, key[:40], f"{value[:80]!r} is not one line")
            lines.append(f"{key}={value}")
    return ("\n".join(lines) + "\n").encode()
