"""fwman's configuration file, ``/etc/fwman/config.toml``, read through the Host and checked against a model.

The file is optional: without it every setting has its default. Every section and key is declared in
:class:`ConfigFile` below; a key or section it does not know (a misspelling such as ``[modules] brnach``) is an
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

Callers keep reading through :meth:`Config.section` and the typed getters; the model has already checked names
and types when they do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError
from fwman.core.tomltext import parse_toml

if TYPE_CHECKING:
    from pydantic import BaseModel


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


def _models() -> type[BaseModel]:
    """Return the ConfigFile model (pydantic is imported on first use: most commands never read the file)."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr

    class ForksSection(BaseModel):
        """``[forks]``: the two settings, plus any number of ``name = "URL"`` fork entries."""

        model_config = ConfigDict(extra="allow")
        api_url: StrictStr | None = None
        defaults: StrictBool = True

    class ModulesSection(BaseModel):
        """``[modules]``: the source the hook builds from, and whether a failed hook build fails the install."""

        model_config = ConfigDict(extra="forbid")
        fork: StrictStr | None = None
        branch: StrictStr | None = None
        source: StrictStr | None = None
        strict: StrictBool = False

    class ContainersSection(BaseModel):
        """``[containers]``: which container engines audit and doctor ask (None: decided by the host)."""

        model_config = ConfigDict(extra="forbid")
        engines: list[Literal["docker", "podman"]] | None = None

    class ConfigFile(BaseModel):
        """The whole file: only the sections fwman knows."""

        model_config = ConfigDict(extra="forbid")
        forks: ForksSection = ForksSection()
        modules: ModulesSection = ModulesSection()
        containers: ContainersSection = ContainersSection()

    return ConfigFile


def known_keys() -> dict[str, list[str]]:
    """Return {section: its declared keys} of the configuration file (``[forks]`` also takes fork names)."""
    model = _models()
    return {
        name: sorted(info.annotation.model_fields)  # type: ignore[union-attr]
        for name, info in model.model_fields.items()
    }


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
    """Raise UsageError (file, line, known keys) unless ``data`` fits the ConfigFile model."""
    from pydantic import ValidationError

    forks = data.get("forks")
    if isinstance(forks, dict):  # any name may be a fork, but a fork is `name = "URL"`: anything else is a typo
        fork_keys = known_keys()["forks"]
        for key, value in forks.items():
            if key not in fork_keys and isinstance(value, dict):
                # [forks.NAME]: a donor-patch fork; its keys are checked here (the line), its values by
                # fwman.driver.forks.parse_donor when a fork is resolved
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
    try:
        _models().model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(part) for part in err["loc"]]
        line = _line_of(text, loc)
        where = f"{path}:{line}" if line else path
        known = known_keys()
        if err["type"] == "extra_forbidden" and len(loc) == 1:
            what = f"section [{loc[0]}]" if isinstance(data.get(loc[0]), dict) else f"top-level key `{loc[0]}`"
            raise UsageError(
                f"{where}: unknown {what}; known sections: {', '.join(f'[{s}]' for s in known)}",
                hint=f"fix the name in {path} (docs: modules.md, driver-branches.md)",
            ) from None
        if err["type"] == "extra_forbidden":
            raise UsageError(
                f"{where}: unknown key `{loc[-1]}` in [{loc[0]}]; known keys: {', '.join(known.get(loc[0], []))}",
                hint=f"fix the name in {path}",
            ) from None
        name = f"[{loc[0]}] {'.'.join(loc[1:])}" if len(loc) > 1 else f"[{loc[0]}]"
        why = _TYPE_WORDS.get(err["type"], err["msg"])
        raise UsageError(f"{where}: {name} {why}", hint=f"edit {path}") from None


#: pydantic error types in the words the rest of fwman uses
_TYPE_WORDS = {
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
}


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
