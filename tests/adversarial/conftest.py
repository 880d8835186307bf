"""The adversarial suite (issue 14): every input tried is counted, and the count is printed at the end.

``attack`` runs fwman in-process like ``fwman`` does (tests/helpers.FwmanEnv) and counts each invocation;
pure-function property tests count their examples with :func:`tried`. ``pytest tests/adversarial`` ends with
``adversarial inputs tried: N`` (hypothesis examples included), the figure issue 14's note asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.env import FwmanEnv, Result

_COUNT = {"inputs": 0}


def tried(n: int = 1) -> None:
    """Count ``n`` more adversarial inputs."""
    _COUNT["inputs"] += n


@dataclass
class CountingEnv(FwmanEnv):
    """A FwmanEnv that counts every invocation as one adversarial input."""

    def __call__(self, *argv: str, stdin: str = "") -> Result:
        tried()
        return super().__call__(*argv, stdin=stdin)


@pytest.fixture
def attack() -> CountingEnv:
    """Return a counting runner (root, no extra PATH)."""
    return CountingEnv()


def one_error_line(result: Result) -> str:
    """Return the ``fwman: error:`` line of ``result``; assert it is the only one, with at most a hint after it,
    and that no traceback or ``unexpected`` error leaked out."""
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("fwman: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in errors[0], result.stderr
    assert all(line.startswith(("fwman: error:", "  hint:")) for line in lines), result.stderr
    return errors[0]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many adversarial inputs the suite tried (when it tried any)."""
    if _COUNT["inputs"]:
        terminalreporter.write_line(f"adversarial inputs tried: {_COUNT['inputs']}")
