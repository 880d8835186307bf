"""The adversarial suite (issue 14): every input tried is counted, and the count is printed at the end.

``attack`` runs fwman in-process like ``fwman`` does (tests/support/env.FwmanEnv) and counts each invocation;
pure-function property tests count their examples with :func:`tests.support.counting.tried`.
``pytest tests/adversarial`` ends with ``adversarial inputs tried: N`` (hypothesis examples included), the figure
issue 14's note asks for. Under pytest-xdist (``make check`` runs ``-n auto``) each worker hands its count to the
controller when it finishes (``workeroutput``), and the controller prints the sum.
"""

from __future__ import annotations

import pytest

from tests.support.counting import CountingEnv, inputs_tried

#: the counts the xdist workers handed back (the controller's own count is 0: it runs no test)
_FROM_WORKERS = {"inputs": 0}


@pytest.fixture
def attack() -> CountingEnv:
    """Return a counting runner (root, no extra PATH)."""
    return CountingEnv()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker, hand this process's count to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["adversarial_inputs"] = inputs_tried()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown (and never called) without pytest-xdist
def pytest_testnodedown(node: object, error: object) -> None:
    """On the xdist controller, add a finished worker's count."""
    _FROM_WORKERS["inputs"] += int(getattr(node, "workeroutput", {}).get("adversarial_inputs", 0))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many adversarial inputs the suite tried (when it tried any), summed over xdist's workers."""
    tried = inputs_tried() + _FROM_WORKERS["inputs"]
    if tried:
        terminalreporter.write_line(f"adversarial inputs tried: {tried}")
