"""Counting adversarial inputs (issue 14): every input the adversarial suite tries is counted, and the count is
printed at the end of ``pytest tests/adversarial`` (tests/adversarial/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.env import FwmanEnv, Result

_COUNT = {"inputs": 0}


def tried(n: int = 1) -> None:
    """Count ``n`` more adversarial inputs (pure-function property tests count their examples with it)."""
    _COUNT["inputs"] += n


def inputs_tried() -> int:
    """Return how many adversarial inputs were counted in this process so far."""
    return _COUNT["inputs"]


@dataclass
class CountingEnv(FwmanEnv):
    """A FwmanEnv that counts every invocation as one adversarial input."""

    def __call__(self, *argv: str, stdin: str = "") -> Result:
        tried()
        return super().__call__(*argv, stdin=stdin)
