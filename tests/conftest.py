"""Shared fixtures, the `system` marker for everything under tests/system/ and `story` for tests/story/."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.env import FwmanEnv

# No per-example deadline: the suite runs on a shared 2-core machine beside other work, where a parser's example
# can take longer than hypothesis' 200 ms for reasons that are not the parser's (speed is bench/'s job, never a
# test's); and no example database written into the checkout.
settings.register_profile("fwman", deadline=None, database=None)
settings.load_profile("fwman")

SYSTEM = Path(__file__).resolve().parent / "system"
STORY = Path(__file__).resolve().parent / "story"


@pytest.fixture
def fwman() -> FwmanEnv:
    """Return a runner for in-process fwman invocations (root, no extra PATH)."""
    return FwmanEnv()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/system/ `system` (root, Debian packages, servers on 127.0.0.1), and every test
    under tests/story/ `story` and `system` (the story suite needs all of that too: `-m 'not system'` stays the
    set that runs anywhere)."""
    for item in items:
        parents = Path(str(item.fspath)).resolve().parents
        if SYSTEM in parents:
            item.add_marker(pytest.mark.system)
        if STORY in parents:
            item.add_marker(pytest.mark.story)
            item.add_marker(pytest.mark.system)
