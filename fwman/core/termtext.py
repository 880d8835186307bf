"""Text from outside made safe for a terminal: control characters shown, never obeyed.

A stranger's snapshot, a config file, a ROM string, a bundle, nvidia-smi's XML, an archive's member names or a
git error can hold escape sequences that retitle the terminal, erase lines or move the cursor (over a BLOCK
line, say). Everything fwman prints for people goes through :func:`visible` (the CLI's one output door,
``AppContext.echo``, and the error line); ``--json`` keeps the exact value (JSON escapes control characters).

Shown as Python writes them: C0 controls but newline and tab (``\\x1b``, ``\\r``), DEL, C1 controls
(``\\x9b`` is a one-character CSI), the bidirectional overrides and isolates that reorder what is shown
(``\\u202e``), and bytes that were not UTF-8 (decoded with ``surrogateescape``, shown as ``\\xff``).
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


#: what starts a new line for a reader of the text though no terminal acts on it (str.splitlines, editors, logs)
_BREAKS = re.compile("[\u2028\u2029]")


def _shown(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return {0x0D: "\\r"}.get(code, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def visible(text: str) -> str:
    """Return ``text`` with every character a terminal would act on (but newline and tab) written out."""
    return _UNSAFE.sub(_shown, text)


def one_line(text: str) -> str:
    """Return :func:`visible`'s ``text`` on one line: a newline written out as ``\\n`` too. For a field that is
    one line (a table cell, a line of a report): text from outside cannot start a line of its own there (a forged
    "match" row, an "all consistent" summary); the line and paragraph separators U+2028/U+2029 are written out."""
    return _BREAKS.sub(_shown, visible(text)).replace("\n", "\\n")


def has_unsafe(text: str) -> bool:
    """Return True when :func:`visible` would change ``text``."""
    return _UNSAFE.search(text) is not None
