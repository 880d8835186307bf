"""The only code that touches the machine: the Host protocol and its implementations.

Import from the submodules (``fwman.host.base``, ``.live``, ``.snapshot``); the names below are loaded lazily so
that importing ``fwman.host.base`` for a type does not pull in every implementation (startup time).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CommandResult": "fwman.host.base",
    "Host": "fwman.host.base",
    "JournalEntry": "fwman.host.base",
    "LiveHost": "fwman.host.live",
    "SnapshotHost": "fwman.host.snapshot",
}


def __getattr__(name: str) -> Any:
    """Return ``name`` from its submodule on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = list(_LAZY)
