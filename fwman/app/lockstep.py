"""The user-space versions a build must match: the host's and every readable container's (issue 15).

The verdict itself is :mod:`fwman.driver.build.lockstep` (pure); this use case gathers what it compares, from
the audit's readers (reports sit above driver, so the gathering lives here).
"""

from __future__ import annotations

import re

from fwman.core.errors import FwmanError, MissingError
from fwman.driver.build.lockstep import Lockstep, check
from fwman.driver.versions import parse_p2p_branch
from fwman.host.base import Host
from fwman.platform.containers import read_containers
from fwman.platform.userspace import scan_userspace


def target_version(host: Host, branch: str | None, source_dir: str | None) -> str | None:
    """Return the driver version a build produces: the P2P branch name's, else the local tree's version.mk."""
    version = parse_p2p_branch(branch) if branch else None
    if version is not None:
        return str(version)
    if source_dir:
        for rel in ("version.mk", "utils.mk"):
            path = f"{source_dir.rstrip('/')}/{rel}"
            try:
                m = re.search(r"^NVIDIA_VERSION\s*[:?]?=\s*(\S+)", host.read_text(path), re.MULTILINE)
            except MissingError:
                continue
            if m:
                return m.group(1)
    return None


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
