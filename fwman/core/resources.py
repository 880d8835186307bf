"""Where fwman's bundled data lives: the curated catalog and the host hooks.

In a source tree or an editable install they are the top-level ``catalog/`` and ``hooks/`` directories next to
the package; a wheel installs them as data files under ``<prefix>/share/fwman/`` (pyproject.toml).
"""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE_TREE = Path(__file__).resolve().parents[2]  # fwman/core/resources.py -> the source tree


def bundled(name: str) -> Path:
    """Return the directory of bundled data ``name`` (``"catalog"`` or ``"hooks"``).

    The source tree's copy wins when it exists; otherwise the installed one under ``sys.prefix``. The path is
    returned even when neither exists, so callers report the expected location in their error.
    """
    source = _SOURCE_TREE / name
    if source.is_dir():
        return source
    return Path(sys.prefix) / "share" / "fwman" / name
