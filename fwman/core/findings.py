"""One vocabulary for verify, audit and doctor: a Finding with a severity.

A safety gate is a Finding of severity ``block``. A ``warn`` can be overridden by a named flag; a ``block`` that
protects hardware never can.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Topic:
    """One check's findings: each says ``id`` with this ``evidence`` unless a call passes its own.

    A check that can end several ways names its id and evidence once, then says ``t.block(message, fix)``,
    ``t.ok(message)``: the same Finding a spelled-out constructor gives.
    """

    id: str
    evidence: dict[str, str] = field(default_factory=dict)

    def say(
        self,
        severity: Severity,
        message: str,
        fix: str | None = None,
        *,
        evidence: dict[str, str] | None = None,
        override: str | None = None,
    ) -> Finding:
        """Return the Finding of this id at ``severity`` (``evidence`` None: the topic's own)."""
        ev = self.evidence if evidence is None else evidence
        return Finding(id=self.id, severity=severity, message=message, evidence=ev, fix=fix, override=override)

    def ok(self, message: str, fix: str | None = None, *, evidence: dict[str, str] | None = None) -> Finding:
        """Return a passed check (see :meth:`say`)."""
        return self.say(Severity.OK, message, fix, evidence=evidence)

    def info(self, message: str, fix: str | None = None, *, evidence: dict[str, str] | None = None) -> Finding:
        """Return an ``info`` finding (see :meth:`say`)."""
        return self.say(Severity.INFO, message, fix, evidence=evidence)

    def warn(
        self,
        message: str,
        fix: str | None = None,
        *,
        evidence: dict[str, str] | None = None,
        override: str | None = None,
    ) -> Finding:
        """Return a ``warn`` finding, accepted by the flag ``override`` where one is named (see :meth:`say`)."""
        return self.say(Severity.WARN, message, fix, evidence=evidence, override=override)

    def block(self, message: str, fix: str | None = None, *, evidence: dict[str, str] | None = None) -> Finding:
        """Return a ``block`` finding: it stops the action and no flag overrides it (see :meth:`say`)."""
        return self.say(Severity.BLOCK, message, fix, evidence=evidence)


def worst(findings: Iterable[Finding]) -> Severity:
    """Return the highest severity among ``findings`` (``ok`` for none)."""
    return max((f.severity for f in findings), key=lambda s: s.rank, default=Severity.OK)


def blocking(findings: Iterable[Finding], overrides: Iterable[str] = ()) -> list[Finding]:
    """Return the findings that stop an action: every ``block``, and each ``warn`` not overridden by a flag."""
    accepted = set(overrides)
    return [
        f
        for f in findings
        if f.severity is Severity.BLOCK or (f.severity is Severity.WARN and f.override not in accepted)
    ]
