"""The user-space versions a build must match: the host's and every readable container's (issue 15).

The verdict itself is :mod:`fwman.driver.build.lockstep` (pure); this use case gathers what it compares, from
the audit's readers (reports sit above driver, so the gathering lives here).
"""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.driver.build.lockstep import Lockstep, check
from fwman.host.base import Host
from fwman.reports.audit.read import read_containers
from fwman.reports.audit.userspace import scan_userspace


def gather(host: Host, target: str | None) -> Lockstep:
    """Return the verdict for ``target`` against the host's user space and every readable container's."""
    unreadable: list[str] = []
    found: dict[str, list[str]] = {}
    try:
        host_us = scan_userspace(host, "/", run_smi=False)
        found["host"] = sorted(host_us.versions())
    except FwmanError as e:
        unreadable.append(f"host user space: {e.message}")
    try:
        for audit, _us in read_containers(host, [], unreadable):
            if audit.state == "read":
                found[f"container {audit.name}"] = sorted(audit.versions)
    except FwmanError as e:
        unreadable.append(f"containers: {e.message}")
    verdict = check(target, found)
    verdict.unreadable = unreadable
    return verdict
