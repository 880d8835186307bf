"""``fwman doctor`` as a use case: typed arguments in, a :class:`DoctorReport` out (no click, no printing)."""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import VerificationError
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


def run_doctor_command(host: Host, request: DoctorRequest) -> DoctorReport:
    """Return the doctor's report for ``host``. Raises MissingError when it has no NVIDIA GPU (see run_doctor)."""
    return run_doctor(host, Sources(_absolute(request.env_files), _absolute(request.unit_files)))


def doctor_failure(report: DoctorReport) -> VerificationError | None:
    """Return the error ``fwman doctor`` ends with when something blocks peer-to-peer, else None."""
    if report.ready:
        return None
    first = report.blockers[0]
    return VerificationError(
        f"peer-to-peer is blocked ({len(report.blockers)} blocker{'s' if len(report.blockers) > 1 else ''}); "
        f"first: {first.id}",
        hint=first.fix or "see the findings above",
    )
