"""The version lockstep a build must keep: the module's driver version equals the user space's, everywhere.

The kernel module and the user-space driver (``libcuda.so.<ver>``, ``libnvidia-ml.so.<ver>``) must carry the
same version string on the host and in every container that uses the GPUs; otherwise NVML fails with
"Failed to initialize NVML: Driver/library version mismatch" while the module stays loaded. ``fwman modules
build`` refuses a branch whose version differs from what it finds, unless ``--force``.

:func:`check` is the verdict (pure); :func:`gather` reads what it compares through the Host, with the user-space
and container readers of :mod:`fwman.platform` (the same ones ``fwman audit`` reads with).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import BlockedError, FwmanError
from fwman.driver.build.source import tree_version
from fwman.driver.forks.cache import load_cache, load_trees
from fwman.driver.versions import parse_p2p_branch
from fwman.host.base import Host
from fwman.platform.containers import read_containers
from fwman.platform.userspace import scan_userspace

NVML_MISMATCH = "Driver/library version mismatch"


@dataclass
class Lockstep:
    """The user-space versions found, by where (``host`` or a container name), and what they disagree with."""

    target: str | None  # the driver version the build produces
    found: dict[str, list[str]] = field(default_factory=dict)  # where -> versions found there
    unreadable: list[str] = field(default_factory=list)

    @property
    def mismatches(self) -> dict[str, list[str]]:
        """Return {where: versions} for each place whose user space is not exactly ``target``."""
        if self.target is None:
            return {}
        return {w: v for w, v in self.found.items() if v and v != [self.target]}

    def message(self) -> str | None:
        """Return the refusal line, or None when everything found matches."""
        bad = self.mismatches
        if not bad:
            return None
        places = "; ".join(f"{w} has {', '.join(v)}" for w, v in sorted(bad.items()))
        return (
            f"the branch builds driver {self.target} but the user space differs ({places}): loading this module "
            f'makes NVML fail with "{NVML_MISMATCH}"'
        )


def check(target: str | None, found: dict[str, list[str]]) -> Lockstep:
    """Return the lockstep verdict for ``target`` against ``found`` (pure)."""
    return Lockstep(target, {w: sorted(set(v)) for w, v in found.items()})


def refuse_unless_forced(verdict: Lockstep, force: bool) -> str | None:
    """Raise BlockedError for a mismatch unless ``force``; return the warning line when forced, else None."""
    line = verdict.message()
    if line is None:
        return None
    if not force:
        raise BlockedError(
            line,
            hint="build the branch of the installed user-space version, or move the user space (host and "
            "containers) to this version first; --force builds anyway",
        )
    return f"WARNING (--force): {line}"


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
        version = tree_version(host, source_dir)
        return Target(version, version is not None)
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
