"""Shared fixtures, and the `system` marker for everything under tests/system/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.env import FwmanEnv

SYSTEM = Path(__file__).resolve().parent / "system"


@pytest.fixture
def fwman() -> FwmanEnv:
    """Return a runner for in-process fwman invocations (root, no extra PATH)."""
    return FwmanEnv()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/system/ `system` (root, Debian packages, servers on 127.0.0.1)."""
    for item in items:
        if SYSTEM in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.system)
