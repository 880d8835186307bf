"""One vocabulary for verify, audit and doctor: a Finding with a severity.

A safety gate is a Finding of severity ``block``. A ``warn`` can be overridden by a named flag; a ``block`` that
protects hardware never can.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    """How much a finding matters, in increasing order."""

    OK = "ok"  # a check that passed: reported so the user sees what was checked
    INFO = "info"
    WARN = "warn"
    BLOCK = "block"

    @property
    def rank(self) -> int:
        """Return the ordering rank (ok < info < warn < block)."""
        return ["ok", "info", "warn", "block"].index(self.value)


class Finding(BaseModel):
    """One checked fact: ``id`` is stable (machine-readable), ``message`` is for people."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    message: str
    evidence: dict[str, str] = Field(default_factory=dict)
    fix: str | None = None
    override: str | None = None  # the CLI flag that accepts this warn (never set on a block)


def worst(findings: Iterable[Finding]) -> Severity:
    """Return the highest severity among ``findings`` (``ok`` for none)."""
    result = Severity.OK
    for f in findings:
        if f.severity.rank > result.rank:
            result = f.severity
    return result


def blocking(findings: Iterable[Finding], overrides: Iterable[str] = ()) -> list[Finding]:
    """Return the findings that stop an action: every ``block``, and each ``warn`` not overridden by a flag."""
    accepted = set(overrides)
    return [
        f
        for f in findings
        if f.severity is Severity.BLOCK or (f.severity is Severity.WARN and f.override not in accepted)
    ]
