"""The adversarial suite (issue 14): every input tried is counted, and the count is printed at the end.

``attack`` runs fwman in-process like ``fwman`` does (tests/support/env.FwmanEnv) and counts each invocation;
pure-function property tests count their examples with :func:`tests.support.counting.tried`.
``pytest tests/adversarial`` ends with ``adversarial inputs tried: N`` (hypothesis examples included), the figure
issue 14's note asks for.
"""

from __future__ import annotations

import pytest

from tests.support.counting import CountingEnv, inputs_tried


@pytest.fixture
def attack() -> CountingEnv:
    """Return a counting runner (root, no extra PATH)."""
    return CountingEnv()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many adversarial inputs the suite tried (when it tried any)."""
    if inputs_tried():
        terminalreporter.write_line(f"adversarial inputs tried: {inputs_tried()}")
