"""fwman's configuration file, ``/etc/fwman/config.toml``, read through the Host.

The file is optional: without it every setting has its default. Sections are plain TOML tables; each module
that has settings reads its own section with :meth:`Config.section` and its own keys with the typed getters, so
adding a key never touches this module. Known sections (each documented on its command's page in docs/):

- ``[forks]``: extra P2P forks, ``name = "URL or local git path"``; ``api_url`` (the forge API base,
  default ``https://api.github.com``; ``FWMAN_FORGE_API`` in the environment overrides it); ``defaults = false``
  drops the three built-in forks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, UsageError
from fwman.host.base import Host


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


def parse_config(text: str, path: str = paths.CONFIG_FILE) -> Config:
    """Return the Config in TOML ``text``. Raises UsageError (with the line and column) when it is not valid TOML."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}", hint=f"fix {path} (TOML syntax)") from e
    return Config(data=data, path=path, present=True)


def load_config(host: Host, path: str = paths.CONFIG_FILE) -> Config:
    """Return the configuration of ``host`` (defaults when the file is absent). Raises UsageError on bad TOML.

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
