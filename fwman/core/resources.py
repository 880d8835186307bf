"""The bundled-data door: where fwman's own data lives (the curated catalog, the host hooks, the catalog signing
keys), and the one place that reads those files.

In a source tree or an editable install the catalog and hooks are the top-level ``catalog/`` and ``hooks/``
directories next to the package; a wheel installs them as data files under ``<prefix>/share/fwman/``
(pyproject.toml). The trusted public keys are package data inside ``fwman/keys/``. This is fwman's own data, not
host state, so it is read directly rather than through a Host (a ``--root`` or snapshot does not change what
fwman ships).
"""

from __future__ import annotations

import sys
from pathlib import Path

from fwman.core.errors import MissingError

_PACKAGE = Path(__file__).resolve().parents[1]  # fwman/core/resources.py -> fwman/
_SOURCE_TREE = _PACKAGE.parent  # the source tree (or site-packages, where bundled() looks under sys.prefix)


def bundled(name: str) -> Path:
    """Return the directory of bundled data ``name`` (``"catalog"`` or ``"hooks"``).

    The source tree's copy wins when it exists; otherwise the installed one under ``sys.prefix``. The path is
    returned even when neither exists, so callers report the expected location in their error.
    """
    source = _SOURCE_TREE / name
    if source.is_dir():
        return source
    return Path(sys.prefix) / "share" / "fwman" / name


def bundled_keys() -> Path:
    """Return the directory of the catalog signing public keys that ship inside the package (``fwman/keys``)."""
    return _PACKAGE / "keys"


def bundled_compat_patches() -> Path:
    """Return the directory of the compat patches that ship inside the package (``fwman/compat``,
    :mod:`fwman.driver.build.compat`)."""
    return _PACKAGE / "compat"


def read_data(path: Path, limit: int | None = None) -> bytes:
    """Return the bytes (at most ``limit``) of data file ``path``: bundled data or a maintainer's catalog copy.

    Raises MissingError when the file does not exist or cannot be read.
    """
    try:
        with open(path, "rb") as f:
            return f.read() if limit is None else f.read(limit)
    except FileNotFoundError as e:
        raise MissingError(f"{path}: not found") from e
    except OSError as e:
        raise MissingError(f"{path}: cannot read: {e.strerror or e}") from e


def is_data_file(path: Path) -> bool:
    """Return True when ``path`` (bundled data or a maintainer's catalog copy) is a regular file."""
    return path.is_file()


def is_data_dir(path: Path) -> bool:
    """Return True when ``path`` (bundled data or a maintainer's catalog copy) is a directory."""
    return path.is_dir()


def list_data(directory: Path, pattern: str = "*") -> list[Path]:
    """Return the entries of data directory ``directory`` whose names match ``pattern``, sorted by name.

    Returns an empty list when ``directory`` is not a directory (callers that must tell "missing" from "empty"
    ask :func:`is_data_dir` first).
    """
    if not directory.is_dir():
        return []
    return sorted(directory.glob(pattern))
