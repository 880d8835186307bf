"""fwman's configuration file, ``/etc/fwman/config.toml``, read through the Host and checked against its schema.

The file is optional: without it every setting has its default. Every section and key is declared in
:data:`SCHEMA` below; a key or section it does not know (a misspelling such as ``[modules] brnach``) is an
error naming the file, the line and the known keys (UsageError, exit 2), never silently ignored. Adding a
setting means adding a field here and documenting it on its command's page in docs/. Sections:

- ``[forks]`` (docs/driver-branches.md): extra P2P forks, ``name = "URL or local git path"`` (any name: these are
  the fork names), or a ``[forks.NAME]`` table of a donor patch (``patch``, ``sha256``, ``upstream``,
  ``versions``: applied to NVIDIA's upstream tag); ``api_url`` (the forge API base, default
  ``https://api.github.com``; ``FWMAN_FORGE_API`` in the environment overrides it); ``defaults = false`` drops the
  three built-in forks.
- ``[modules]`` (docs/modules.md, docs/hooks.md): what the kernel hook and ``catchup`` build, ``fork`` +
  ``branch`` or ``source`` (a local tree); ``strict = true`` makes a failed or pending hook build fail the
  kernel install.
- ``[containers]`` (docs/audit.md): ``engines``, the container engines audit and doctor ask (``["docker",
  "podman"]``; ``[]`` asks none). Without it both are asked on this machine and on a replay, none under
  ``--root DIR`` (the engines running here are not the tree's).

Callers keep reading through :meth:`Config.section` and the typed getters; the schema check has already passed names
and types when they do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError
from fwman.core.tomltext import parse_toml


class _Readable(Protocol):
    """What loading the configuration needs of a Host (any :class:`~fwman.host.base.Host` is one)."""

    def exists(self, path: str) -> bool: ...

    def read_text(self, path: str) -> str: ...


@dataclass(frozen=True)
class Config:
    """The parsed configuration (``data`` is the TOML document; empty when there is no file)."""

    data: Mapping[str, Any] = field(default_factory=dict)
    path: str = paths.CONFIG_FILE
    present: bool = False

    def section(self, name: str) -> Mapping[str, Any]:
        """Return table ``[name]`` ({} when absent). Raises UsageError when ``name`` is not a table."""
        value = self.data.get(name, {})
        if not isinstance(value, Mapping):
            raise UsageError(f"{self.path}: `{name}` must be a table ([{name}])", hint=f"edit {self.path}")
        return value

    def get_str(self, section: str, key: str, default: str | None = None) -> str | None:
        """Return string ``key`` of ``[section]`` (``default`` when absent). Raises UsageError for another type."""
        value = self.section(section).get(key, default)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{self.path}: [{section}] {key} must be a string", hint=f"edit {self.path}")
        return value

    def get_bool(self, section: str, key: str, default: bool = False) -> bool:
        """Return boolean ``key`` of ``[section]`` (``default`` when absent). Raises UsageError for another type."""
        value = self.section(section).get(key, default)
        if not isinstance(value, bool):
            raise UsageError(f"{self.path}: [{section}] {key} must be true or false", hint=f"edit {self.path}")
        return value


#: every section and its declared keys, with the type each value must have: "str", "bool", or a tuple of the
#: strings a list may hold. ``[forks]`` also takes any ``name = "URL"`` (a fork); the other sections nothing else.
#: Checked by hand, not by a pydantic model: every command that reads the file (``fwman audit`` among them) would
#: otherwise import pydantic for three small tables (bench/containers.py).
SCHEMA: dict[str, dict[str, str | tuple[str, ...]]] = {
    "forks": {"api_url": "str", "defaults": "bool"},
    "modules": {"fork": "str", "branch": "str", "driver-version": "str", "source": "str", "strict": "bool"},
    "containers": {"engines": ("docker", "podman")},
}
#: the sections that take keys beyond the declared ones (``[forks]``: fork names)
_OPEN_SECTIONS = ("forks",)


def known_keys() -> dict[str, list[str]]:
    """Return {section: its declared keys} of the configuration file (``[forks]`` also takes fork names)."""
    return {name: sorted(keys) for name, keys in SCHEMA.items()}


def _type_error(value: object, kind: str | tuple[str, ...]) -> tuple[str, int | None] | None:
    """Return (what is wrong, the index of the wrong list item or None), or None when ``value`` is a ``kind``."""
    if kind == "str":
        return None if isinstance(value, str) else ("must be a string", None)
    if kind == "bool":
        return None if isinstance(value, bool) else ("must be true or false", None)
    choices = " or ".join(f"'{c}'" for c in kind)
    if not isinstance(value, list):
        return f"must be a list of {choices}", None
    for i, item in enumerate(value):
        if item not in kind or not isinstance(item, str):
            return f"must be {choices}", i
    return None


def _table_header(stripped: str) -> str | None:
    r"""Return the name in a ``[table]`` line (``[modules]  # comment``), stripped; None for any other line.

    A scan, linear in the length: the pattern ``\[\s*([^\]]+?)\s*\]`` split a run of blanks between three
    quantifiers (cubic: a 4000-character line took 30 s). ``[[array]]`` headers are not tables here.
    """
    end = stripped.find("]", 1)
    if not stripped.startswith("[") or end < 2:
        return None
    after = stripped[end + 1 :].lstrip()
    if after and not after.startswith("#"):
        return None
    return stripped[1:end].strip()


def _line_of(text: str, loc: Sequence[str | int]) -> int | None:
    """Return the 1-based line of the table or key ``loc`` (``("modules", "brnach")``) in ``text``, or None."""
    section = str(loc[0]) if loc else ""
    key = str(loc[1]) if len(loc) > 1 else None
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = _table_header(stripped)
        if header is not None:
            current = header.strip('"')
            if key is None and current.split(".")[0].strip() == section:
                return number
            continue
        m = re.match(r"""\s*("?)([^"=\s]+)\1\s*=""", line)
        if not m:
            continue
        name = m.group(2)
        if key is None and current == "" and name.split(".")[0] == section:
            return number  # `modules.fork = ...` or `module = ...` at the top level
        in_table = current == section and name == key
        dotted = current == "" and name == f"{section}.{key}"  # `forks.mine = "..."` at the top level
        if key is not None and (in_table or dotted):
            return number
    return None


#: the keys of a donor-patch fork's table, ``[forks.NAME]`` (docs/driver-branches.md)
DONOR_KEYS = ("patch", "sha256", "upstream", "versions")


def _header_line(text: str, name: str) -> int | None:
    """Return the 1-based line of the ``[name]`` table header in ``text``, or None (an inline table)."""
    for number, line in enumerate(text.splitlines(), 1):
        header = _table_header(line.strip())
        if header is not None and header.replace('"', "").replace(" ", "") == name:
            return number
    return None


def _check(data: dict[str, Any], text: str, path: str) -> None:
    """Raise UsageError (file, line, known keys) unless ``data`` has only the declared sections and keys, each
    of its declared type (the first problem in the order of :data:`SCHEMA`: sections, then keys)."""
    known = known_keys()
    forks = data.get("forks")
    if isinstance(forks, dict):  # any name may be a fork, but a fork is `name = "URL"`: anything else is a typo
        fork_keys = known["forks"]
        for key, value in forks.items():
            if key not in fork_keys and isinstance(value, dict):
                # [forks.NAME]: a donor-patch fork; its keys are checked here (the line), its values by
                # fwman.driver.forks.config.parse_donor when a fork is resolved
                unknown = sorted(k for k in value if k not in DONOR_KEYS)
                if unknown:
                    line = _header_line(text, f"forks.{key}")
                    raise UsageError(
                        f"{path}{f':{line}' if line else ''}: unknown key `{unknown[0]}` in [forks.{key}] (a "
                        f"donor-patch fork); known keys: {', '.join(DONOR_KEYS)}",
                        hint=f"fix the name in {path} (docs: driver-branches.md)",
                    )
                continue
            if key not in fork_keys and not isinstance(value, str):
                line = _line_of(text, ["forks", key])
                raise UsageError(
                    f'{path}{f":{line}" if line else ""}: unknown key `{key}` in [forks] (a fork is name = "URL" '
                    f"or a [forks.{key}] table of a donor patch); "
                    f"known keys: {', '.join(fork_keys)}",
                    hint=f"fix the name in {path}",
                )

    def where(loc: Sequence[str]) -> str:
        line = _line_of(text, loc)
        return f"{path}:{line}" if line else path

    for section, keys in SCHEMA.items():
        if section not in data:
            continue
        table = data[section]
        if not isinstance(table, dict):
            raise UsageError(f"{where([section])}: [{section}] must be a table", hint=f"edit {path}")
        for key, kind in keys.items():
            if key in table:
                wrong = _type_error(table[key], kind)
                if wrong is not None:
                    why, index = wrong
                    name = f"[{section}] {key}" + (f".{index}" if index is not None else "")
                    raise UsageError(f"{where([section, key])}: {name} {why}", hint=f"edit {path}")
        if section in _OPEN_SECTIONS:
            continue
        for key in table:
            if key not in keys:
                raise UsageError(
                    f"{where([section, key])}: unknown key `{key}` in [{section}]; known keys: "
                    f"{', '.join(known[section])}",
                    hint=f"fix the name in {path}",
                )
    for name in data:
        if name not in SCHEMA:
            what = f"section [{name}]" if isinstance(data[name], dict) else f"top-level key `{name}`"
            raise UsageError(
                f"{where([name])}: unknown {what}; known sections: {', '.join(f'[{s}]' for s in known)}",
                hint=f"fix the name in {path} (docs: modules.md, driver-branches.md)",
            )


def parse_config(text: str, path: str = paths.CONFIG_FILE) -> Config:
    """Return the Config in TOML ``text``.

    Raises UsageError with the line and column when it is not valid TOML, and with the line and the known keys
    when a section or key is unknown or a value has the wrong type.
    """
    try:
        data = parse_toml(text, path)
    except ParseError as e:
        raise UsageError(f"{path}: not valid TOML: {e.detail}", hint=f"fix {path} (TOML syntax)") from e
    _check(data, text, path)
    return Config(data=data, path=path, present=True)


def load_config(host: _Readable, path: str = paths.CONFIG_FILE) -> Config:
    """Return the configuration of ``host`` (defaults when the file is absent). Raises UsageError on a bad file.

    A snapshot that did not record the file replays with the defaults: settings only choose which forks to list
    and where, never what is on the recorded host.
    """
    try:
        if not host.exists(path):
            return Config(path=path)
        text = host.read_text(path)
    except (MissingError, NotRecordedError):
        return Config(path=path)
    return parse_config(text, path)
