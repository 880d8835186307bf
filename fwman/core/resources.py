"""Where fwman's bundled data lives: the curated catalog, the host hooks, the catalog signing keys.

In a source tree or an editable install they are the top-level ``catalog/`` and ``hooks/`` directories next to
the package; a wheel installs them as data files under ``<prefix>/share/fwman/`` (pyproject.toml).
"""

from __future__ import annotations

import sys
from pathlib import Path

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
