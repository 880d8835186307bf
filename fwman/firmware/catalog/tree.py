"""A catalog directory and the door it is read through.

The catalog bundled with fwman is fwman's own data (``fwman.core.resources``); a maintainer's copy named with ``--dir``
is a file the user names (``fwman.host.userfiles``: relative to the real working directory, never mapped under
``--root``). Lint, index and keys code reads both through one :class:`CatalogTree`, so the door is chosen once, by
whoever knows where the directory came from."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from fwman.core.errors import MissingError, UsageError
from fwman.core.resources import is_data_dir, is_data_file, list_data, read_data
from fwman.host.userfiles import is_user_dir, is_user_file, list_user_dir, read_user_file


@dataclass(frozen=True)
class CatalogTree:
    """Catalog directory ``path``; ``user``: named by the user (the user-file door), else bundled data."""

    path: Path
    user: bool = False

    def __truediv__(self, rel: str) -> Path:
        """Return the path of ``rel`` inside the tree (for messages and names; reading goes through the tree)."""
        return self.path / rel

    def read(self, rel: str, limit: int | None = None) -> bytes:
        """Return the bytes (at most ``limit``) of file ``rel`` of the tree. Raises MissingError when it cannot
        be read."""
        if self.user:
            try:
                data = read_user_file(str(self.path / rel))
            except UsageError as e:  # a directory where a file belongs: as missing as bundled data says it
                raise MissingError(e.message) from e
            return data if limit is None else data[:limit]
        return read_data(self.path / rel, limit)

    def is_file(self, rel: str) -> bool:
        """Return True when ``rel`` is a regular file of the tree."""
        return is_user_file(str(self.path / rel)) if self.user else is_data_file(self.path / rel)

    def is_dir(self, rel: str) -> bool:
        """Return True when ``rel`` is a directory of the tree."""
        return is_user_dir(str(self.path / rel)) if self.user else is_data_dir(self.path / rel)

    def names(self, rel: str, pattern: str = "*") -> list[str]:
        """Return the names in directory ``rel`` of the tree matching ``pattern``, sorted (empty: none)."""
        if self.user:
            return [n for n in list_user_dir(str(self.path / rel)) if fnmatch.fnmatch(n, pattern)]
        return [p.name for p in list_data(self.path / rel, pattern)]


def bundled_tree(path: Path | CatalogTree) -> CatalogTree:
    """Return ``path`` as a tree of fwman's own data (a tree given stays as it is)."""
    return path if isinstance(path, CatalogTree) else CatalogTree(Path(path))


def user_tree(path: str | Path) -> CatalogTree:
    """Return the user-named directory ``path`` as a tree read through the user-file door."""
    return CatalogTree(Path(path), user=True)
