"""An application context whose output goes to memory, for tests that call a command's renderer directly."""

from __future__ import annotations

import io

from fwman.cli.context import AppContext, Environment


def memory_app() -> tuple[AppContext, io.StringIO]:
    """Return an AppContext writing stdout and stderr to memory, and its stdout buffer."""
    out = io.StringIO()
    return AppContext(env=Environment(stdout=out, stderr=io.StringIO())), out
