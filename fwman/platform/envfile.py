"""Environment files: ``.env``, ``docker --env-file``, ``/etc/environment``, ``/etc/nccl.conf`` (pure parsers)."""

from __future__ import annotations

import re

_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
#: a variable name as shells and systemd accept it
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unquote(value: str) -> str:
    """Return ``value`` without surrounding quotes; an unquoted value ends at an inline `` #`` comment."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


def parse_env_file(text: str) -> dict[str, str]:
    """Return the ``KEY=VALUE`` assignments of an environment file (``.env``, ``docker --env-file``,
    ``/etc/environment``, ``/etc/nccl.conf``): ``export`` and quotes allowed, comments skipped. Never raises."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ASSIGN.match(line)
        if m:
            out[m.group(1)] = unquote(m.group(2))
    return out


def uncommented(text: str) -> str:
    """Return ``text`` without comment lines (``#``, ``;``): a comment that names a program does not run it."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", ";")))
