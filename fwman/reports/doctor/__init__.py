"""``fwman doctor``: walk the chain that blocks GPU peer-to-peer on GeForce multi-GPU hosts.

:func:`run_doctor` returns a :class:`DoctorReport` (findings per step, one verdict); ``fwman capture`` runs
``fwman doctor`` against its recording host, so a replay finds what doctor reads. The checks live in
:mod:`fwman.reports.doctor.checks` (pure over the facts; its docstring says how to add one), the reading of the
host in :mod:`fwman.reports.doctor.facts`, doctor's own pure parsers in :mod:`fwman.reports.doctor.parsers`.
"""

from __future__ import annotations

from fwman.reports.doctor.facts import Facts, Sources, gather
from fwman.reports.doctor.run import DoctorReport, run_doctor

__all__ = ["DoctorReport", "Facts", "Sources", "gather", "run_doctor"]
