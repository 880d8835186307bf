"""modprobe.d(5) files: the one writer of the module options fwman places (``/etc/modprobe.d``).

modprobe reads a file line by line: ``#`` lines are comments, ``options MODULE OPTION...`` gives a module its
options, separated by whitespace (kmod's parser splits at spaces and tabs; a newline ends the line, so a
newline in a value would start a command of the file's choosing: ``install nvidia /bin/sh -c ...`` runs as root
whenever the module loads). :func:`render` refuses a module name or an option that is not one word of the
characters an option takes, and a comment that is not one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fwman.core.errors import ParseError

WHAT = "modprobe.d file"
_MODULE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: ``name`` or ``name=value``: what a module parameter is (no whitespace, quotes, '#' or control characters)
_OPTION = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?:=[A-Za-z0-9_.,:+/-]*)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def render(
    module: str,
    options: Sequence[str],
    comments: Sequence[str] = (),
    blacklist: Sequence[tuple[str, str]] = (),
) -> bytes:
    """Return a modprobe.d file: ``comments`` as ``#`` lines, then one ``options MODULE ...`` line (none when
    ``options`` is empty), then for each (module, why) of ``blacklist`` a ``# why`` line and ``blacklist MODULE``.

    Raises ParseError for a module, an option or a comment the format cannot hold.
    """
    for name, why in blacklist:
        if not _MODULE.fullmatch(name):
            raise ParseError(WHAT, "blacklist", f"{name!r} is not a module name")
        if _CONTROL.search(why):
            raise ParseError(WHAT, "comment", f"{why[:60]!r} is not one line")
    if not _MODULE.fullmatch(module):
        raise ParseError(WHAT, "module", f"{module!r} is not a module name")
    for option in options:
        if not _OPTION.fullmatch(option):
            raise ParseError(WHAT, "options", f"{option!r} is not one module option")
    for text in comments:
        if _CONTROL.search(text):
            raise ParseError(WHAT, "comment", f"{text[:60]!r} is not one line")
    lines = [f"# {text}\n" for text in comments]
    if options:
        lines.append(f"options {module} {' '.join(options)}\n")
    lines += [f"# {why}\nblacklist {name}\n" for name, why in blacklist]
    return "".join(lines).encode()
