"""Run the chain of checks and reach one verdict: ready, or the first blocker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.core.errors import FwmanError, MissingError
from fwman.core.findings import Finding, Severity, Topic
from fwman.core.jsonout import encode
from fwman.host.base import Host
from fwman.reports.doctor.checks import CHECKS, Check
from fwman.reports.doctor.checks.platform import adjust_for_guest, is_guest
from fwman.reports.doctor.facts import Facts, Sources, describe_error, gather


@dataclass(frozen=True)
class Step:
    """The findings of one check."""

    check: Check
    findings: list[Finding]


@dataclass
class DoctorReport:
    """Every step's findings, in chain order, and the verdict."""

    host: str
    gpus: int
    steps: list[Step] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        """Return every finding, in chain order."""
        return [f for s in self.steps for f in s.findings]

    @property
    def blockers(self) -> list[Finding]:
        """Return the findings of severity block, in chain order."""
        return [f for f in self.findings if f.severity is Severity.BLOCK]

    @property
    def warnings(self) -> list[Finding]:
        """Return the findings of severity warn."""
        return [f for f in self.findings if f.severity is Severity.WARN]

    @property
    def ready(self) -> bool:
        """Return True when nothing blocks peer-to-peer."""
        return not self.blockers

    def verdict(self) -> str:
        """Return the one verdict line: ``ready`` (with what to know), or the first blocker."""
        if self.blockers:
            first = self.blockers[0]
            more = len(self.blockers) - 1
            return f"blocked: {first.message}" + (
                f" (and {more} more blocker{'s' if more > 1 else ''})" if more else ""
            )
        notes = []
        if self.gpus < 2:
            notes.append("one GPU: peer-to-peer between GPUs does not apply")
        if self.warnings:
            notes.append(f"{len(self.warnings)} warning{'s' if len(self.warnings) > 1 else ''}")
        return "ready" + (f" ({'; '.join(notes)})" if notes else "")

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload of ``fwman doctor --json`` (``fwman.doctor/2``)."""
        first = self.blockers[0] if self.blockers else None
        return {
            "host": self.host,
            "gpu_count": self.gpus,
            "steps": [{"id": s.check.id, "title": s.check.title, "findings": encode(s.findings)} for s in self.steps],
            "verdict": {
                "ready": self.ready,
                "line": self.verdict(),
                "first_blocker": first.model_dump(mode="json") if first else None,
                "blocker_count": len(self.blockers),
                "warning_count": len(self.warnings),
            },
        }


ONE_GPU_NOTE = " (one GPU: nothing to fix for peer-to-peer here)"


def _demote(findings: list[Finding]) -> list[Finding]:
    """Return ``findings`` with block/warn lowered to info: on a one-GPU host a pairwise link blocks nothing."""
    out = []
    for f in findings:
        if f.severity in (Severity.BLOCK, Severity.WARN):
            f = f.model_copy(update={"severity": Severity.INFO, "message": f.message + ONE_GPU_NOTE})
        out.append(f)
    return out


def run_check(check: Check, facts: Facts) -> list[Finding]:
    """Return the findings of ``check``; what it could not read becomes one info finding "could not check"."""
    try:
        return check.run(facts)
    except FwmanError as e:
        return [Topic(check.id).info(f"could not check: {describe_error(e)}")]


def run_doctor(host: Host, sources: Sources | None = None, *, facts: Facts | None = None) -> DoctorReport:
    """Return the doctor's report for ``host``, checking NCCL/vLLM settings in ``sources`` too; ``facts``: the
    host's facts already gathered (``fwman plan`` reads the audit from them too), else gathered here.

    Raises MissingError when the host has no NVIDIA GPU (nothing to diagnose), ParseError when sysfs IDs are
    malformed. Every other unreadable thing is a "could not check" finding.
    """
    facts = facts if facts is not None else gather(host, sources)
    cards = facts.cards
    if not cards:
        raise MissingError(
            f"no NVIDIA GPU found on {host.description}",
            hint="is this the right machine? On a VM, is the GPU passed through?",
        )
    report = DoctorReport(host=host.description, gpus=len(cards))
    guest = is_guest(facts)
    for check in CHECKS:
        # in a VM guest the firmware step cannot judge the card from inside: it points at the host instead
        findings = adjust_for_guest(check.id, run_check(check, facts), guest)
        if check.pairwise and len(cards) < 2:
            findings = _demote(findings)
        if not findings:
            continue  # a step with nothing to say about this host (no GPU container): not shown
        report.steps.append(Step(check, findings))
    return report
