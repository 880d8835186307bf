"""The user-space versions a build must match: the host's and every readable container's (issue 15).

The verdict itself is :mod:`fwman.driver.build.lockstep` (pure); this use case gathers what it compares, from
the audit's readers (reports sit above driver, so the gathering lives here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.core.errors import FwmanError, MissingError, NotRecordedError
from fwman.driver.build.lockstep import Lockstep, check
from fwman.driver.forks import load_cache, load_trees
from fwman.driver.versions import parse_p2p_branch
from fwman.host.base import Host
from fwman.reports.audit.read import read_containers
from fwman.reports.audit.userspace import scan_userspace


@dataclass(frozen=True)
class Target:
    """The driver version a build produces, and whether a tree said it (else it is the branch name's hint)."""

    version: str | None
    from_tree: bool


def build_target(host: Host, branch: str | None, source_dir: str | None, fork_url: str | None = None) -> Target:
    """Return the driver version a build produces, read from the tree wherever it can be, as `driver branches` does.

    A local tree: its ``version.mk`` (or ``utils.mk``). A fork branch: the version its tree builds, from the
    branch cache of `fwman driver branches` (the branch's commit in the fork's listing, that commit's tree read);
    only when that tree is not known, the branch name's version (``V-p2p``, ``V-p2p-vN``), a hint
    (``from_tree`` False), and None for a name that says none (``bar1-p2p``). Never raises.
    """
    if source_dir:
        for rel in ("version.mk", "utils.mk"):
            path = f"{source_dir.rstrip('/')}/{rel}"
            try:
                m = re.search(r"^NVIDIA_VERSION\s*[:?]?=\s*(\S+)", host.read_text(path), re.MULTILINE)
            except (MissingError, NotRecordedError):
                continue
            if m:
                return Target(m.group(1), True)
        return Target(None, False)
    if branch is None:
        return Target(None, False)
    if fork_url is not None:
        listing = load_cache(host).get(fork_url) or {}
        commits = listing.get("commits")
        commit = commits.get(branch) if isinstance(commits, dict) else None
        tree = load_trees(host).get(commit) if isinstance(commit, str) else None
        version = tree.get("version") if tree else None
        if isinstance(version, str) and version:
            return Target(version, True)
    hint = parse_p2p_branch(branch)
    return Target(str(hint) if hint is not None else None, False)


def target_version(host: Host, branch: str | None, source_dir: str | None, fork_url: str | None = None) -> str | None:
    """Return the driver version a build produces (:func:`build_target`: the tree's, else the name's), or None."""
    return build_target(host, branch, source_dir, fork_url).version


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
