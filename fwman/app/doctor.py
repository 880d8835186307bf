"""``fwman doctor`` as a use case: typed arguments in, a :class:`DoctorReport` out (no click, no printing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.app.plan import ANSWERED
from fwman.app.text import Out, Result, Span, line, say
from fwman.core.errors import FwmanError, VerificationError
from fwman.host.base import Host
from fwman.host.userfiles import user_path
from fwman.reports.doctor import DoctorReport, Sources, run_doctor


@dataclass(frozen=True)
class DoctorRequest:
    """Where the user's workload takes its settings from (``--env-file``, ``--unit``), as typed."""

    env_files: tuple[str, ...] = ()
    unit_files: tuple[str, ...] = ()


def _absolute(given: tuple[str, ...]) -> tuple[str, ...]:
    """Return the user's paths as absolute host paths (relative ones are taken from the current directory)."""
    return tuple(p if p.startswith("/") else user_path(p) for p in given)


def next_command(report: DoctorReport) -> str | None:
    """Return the one next step for the owner: ``sudo fwman apply`` when fwman's own part of ``fwman plan``
    answers the first blocker (the patched modules, the options, the DKMS block), else that blocker's fix; None
    when nothing blocks."""
    if report.ready:
        return None
    first = report.blockers[0]
    if first.id in ANSWERED:
        return "`sudo fwman apply` (fwman's part of `fwman plan`, which shows the whole way), then reboot"
    return first.fix or "see the findings above"


def doctor_failure(report: DoctorReport) -> VerificationError | None:
    """Return the error ``fwman doctor`` ends with when something blocks peer-to-peer (its hint: the next
    command, :func:`next_command`), else None."""
    hint = next_command(report)
    if hint is None:
        return None
    first = report.blockers[0]
    return VerificationError(
        f"peer-to-peer is blocked ({len(report.blockers)} blocker{'s' if len(report.blockers) > 1 else ''}); "
        f"first: {first.id}",
        hint=f"next: {hint}; `fwman plan` lists every step",
    )


_LABEL = {"ok": ("ok", "green"), "info": ("info", "blue"), "warn": ("WARN", "yellow"), "block": ("BLOCK", "red")}


@dataclass
class Doctor(Result):
    """``fwman doctor``: the chain's findings in order, as a document (``fwman.doctor/2``) and for people."""

    report: DoctorReport

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.doctor/2`` (without the schema key)."""
        return self.report.to_json()

    def text(self, verbose: int = 0) -> Out:
        """Return each step of the chain with its findings (their evidence with ``verbose``) and fixes, then the
        verdict."""
        report = self.report
        out: Out = [say(f"fwman doctor: {report.host} ({report.gpus} GPU{'s' if report.gpus != 1 else ''})")]
        for number, step in enumerate(report.steps, start=1):
            out += [say(), say(f"{number:>2} {step.check.title}", "bold")]
            for f in step.findings:
                label, colour = _LABEL[f.severity.value]
                out.append(line("   ", Span(f"{label:<5}", colour), f"  {f.message}"))
                if verbose and f.evidence:
                    out += [say(f"          {key}: {value}") for key, value in f.evidence.items()]
                if f.fix and f.severity.value in ("warn", "block", "info"):
                    out.append(say(f"          fix: {f.fix}"))
        return [*out, say(), say(f"verdict: {report.verdict()}", "good" if report.ready else "bad")]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when something blocks peer-to-peer."""
        return doctor_failure(self.report)


def doctor(host: Host, request: DoctorRequest) -> Doctor:
    """Return the doctor's findings for ``host``. Raises MissingError when it has no NVIDIA GPU (see run_doctor)."""
    return Doctor(run_doctor(host, Sources(_absolute(request.env_files), _absolute(request.unit_files))))
