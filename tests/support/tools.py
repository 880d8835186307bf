"""Skipping tests whose real tools are missing."""

from __future__ import annotations

import os
import shutil

import pytest


def is_root() -> bool:
    """Return True when the tests run as root."""
    return os.geteuid() == 0


def require_tools(*tools: str) -> None:
    """Skip the calling test unless every tool is installed (system tests; `make test` installs them as root)."""
    missing = [t for t in tools if shutil.which(t) is None and not os.path.exists(f"/usr/sbin/{t}")]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (installed by `make test` when run as root)")
