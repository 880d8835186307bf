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
    return _before_comment(value).strip()


def _before_comment(value: str) -> str:
    r"""Return ``value`` up to its first ``#`` that follows whitespace (an inline comment), or all of it.

    A scan with str.find, linear in the length: ``re.split(r"\s+#", ...)`` retried ``\s+`` from every
    position of a run of blanks, so a 150 KB value in a container's config took doctor 41 s. str.isspace is
    the set ``\s`` matches in a str pattern.
    """
    at = value.find("#", 1)
    while at != -1 and not value[at - 1].isspace():
        at = value.find("#", at + 1)
    return value if at == -1 else value[:at]


def parse_env_file(text: str) -> dict[str, str]:
    """Return the ``KEY=VALUE`` assignments of an environment file (``.env``, ``docker --env-file``,
    ``/etc/environment``, ``/etc/nccl.conf``): ``export`` and quotes allowed, comments skipped. Never raises."""
    matches = (_ASSIGN.match(raw.strip()) for raw in text.splitlines() if not raw.strip().startswith("#"))
    return {m.group(1): unquote(m.group(2)) for m in matches if m}


def uncommented(text: str) -> str:
    """Return ``text`` without comment lines (``#``, ``;``): a comment that names a program does not run it."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", ";")))
