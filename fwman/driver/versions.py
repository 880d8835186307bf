"""P2P branches of the forks: what a branch builds, read from its own tree, and the nearest versions a fork carries.

A fork's branch name is only a hint (``610.57.04-p2p-v3``, ``bar1-p2p`` carry no ``<version>-p2p``): the
version a branch builds is the ``NVIDIA_VERSION = X`` line of ``version.mk`` at the root of its tree, the file
NVIDIA's open-gpu-kernel-modules carries (docs/driver-branches.md cites it). A branch is a P2P *revision* when
its name says ``p2p`` (any case); ``515``, ``VK551_06``, ``main`` are inherited NVIDIA branches, not P2P builds.
Several revisions of one version (``-p2p``, ``-p2p-v2``, ``-p2p-v3``, other names) are listed together, newest
commit first. The trees are read by :func:`fwman.driver.forks.trees.read_trees` (git), cached per commit. The version
itself is :class:`fwman.core.driver_version.DriverVersion`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fwman.core.driver_version import P2P_SUFFIX, DriverVersion
from fwman.core.errors import ParseError

VERSION_FILE = "version.mk"
_VERSION_LINE = re.compile(r"^NVIDIA_VERSION[ \t]*[:?]?=[ \t]*(\S*)[ \t]*$", re.MULTILINE)


def parse_p2p_branch(name: str) -> DriverVersion | None:
    """Return the driver version a ``<version>-p2p`` (or ``<version>-p2p-vN``) branch name says, or None for any
    other branch name. A name is a hint only: the branch's tree says what it builds (:mod:`fwman.driver.revisions`).

    ``refs/heads/`` in front is accepted. Never raises.
    """
    name = name.removeprefix("refs/heads/")
    name = re.sub(r"-v[0-9]+$", "", name) if re.search(r"-p2p-v[0-9]+$", name) else name
    if not name.endswith(P2P_SUFFIX):
        return None
    version_text = name[: -len(P2P_SUFFIX)]
    # parse() tolerates surrounding whitespace; a branch name with whitespace is not a P2P branch
    if version_text != version_text.strip():
        return None
    try:
        return DriverVersion.parse(version_text)
    except ParseError:
        return None


def nearest(target: DriverVersion, available: list[DriverVersion]) -> tuple[DriverVersion | None, DriverVersion | None]:
    """Return (the highest version below ``target``, the lowest above it) among ``available``; None where none."""
    below = [v for v in available if v < target]
    above = [v for v in available if v > target]
    return (max(below) if below else None, min(above) if above else None)


@dataclass(kw_only=True)
class Revision:
    """One P2P branch of a fork: its commit, the version its tree builds, and when it was committed.

    A dataclass (not pydantic): built by :func:`revisions` from values it has already turned into strings, and
    ``fwman audit`` reads it on its fast path (bench/containers.py).
    """

    branch: str
    commit: str | None = None
    version: str | None = None  # from the tree when ``from_tree``, else from the name (a hint), else unknown
    from_tree: bool = False
    date: str | None = None  # the commit's committer date, ISO 8601 as git prints it (%cI); None: unknown
    error: str | None = None  # why the tree could not be read (the version is then the name's, or unknown)
    #: a donor-patch fork's revision: ``branch`` is then NVIDIA's upstream tag and this the patch applied to it
    patch_sha256: str | None = None
    #: what the name says it is for (:mod:`fwman.driver.families`): ``p2p``, ``48g``, ``3080-20g``, ...
    family: str = "p2p"
    #: N of ``-p2p-vN`` (1 for a bare ``-p2p``), None for a name of another shape or a donor tag
    revision: int | None = None

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        """Return the fields as a dict of JSON types (the call the pydantic model had; ``mode`` is accepted)."""
        return dataclasses.asdict(self)

    def driver_version(self) -> DriverVersion | None:
        """Return ``version`` as a DriverVersion, None when unknown or not a version. Never raises."""
        if self.version is None:
            return None
        try:
            return DriverVersion.parse(self.version)
        except ParseError:
            return None


def is_p2p_name(branch: str) -> bool:
    """Return True when ``branch`` names a P2P build: ``p2p`` anywhere in it, any case. Never raises."""
    return "p2p" in branch.lower()


def parse_version_mk(text: str) -> DriverVersion:
    """Return the driver version of a ``version.mk`` (its ``NVIDIA_VERSION = X`` line).

    Raises ParseError when there is no such line or its value is not a driver version.
    """
    m = _VERSION_LINE.search(text)
    if m is None:
        raise ParseError(VERSION_FILE, "NVIDIA_VERSION", "no 'NVIDIA_VERSION = X' line")
    try:
        return DriverVersion.parse(m.group(1))
    except ParseError as e:
        raise ParseError(VERSION_FILE, "NVIDIA_VERSION", f"{m.group(1)[:40]!r} is not a driver version") from e


def revisions(
    branches: list[str], commits: Mapping[str, str], trees: Mapping[str, Mapping[str, Any]]
) -> list[Revision]:
    """Return the P2P revisions among ``branches``: the tree's version where ``trees`` has the branch's commit,
    else the name's (``V-p2p``, ``V-p2p-vN``) as a hint. Never raises."""
    return [tree_revision(b, commits.get(b), trees, parse_p2p_branch(b)) for b in branches if is_p2p_name(b)]


def tree_revision(
    branch: str, commit: str | None, trees: Mapping[str, Any], hint: object, patch_sha256: str | None = None
) -> Revision:
    """Return the revision of ``branch`` at ``commit``: the version its tree says where ``trees`` has the commit
    (with the date, or why the tree could not be read), else ``hint`` as text (None: unknown). Never raises."""
    tree = trees.get(commit) if commit else None
    version = tree.get("version") if tree else None
    return Revision(
        branch=branch,
        commit=commit,
        version=str(version) if version else (str(hint) if hint else None),
        from_tree=bool(version),
        date=str(tree["date"]) if tree and tree.get("date") else None,
        error=str(tree["error"]) if tree and tree.get("error") else None,
        patch_sha256=patch_sha256,
    )


def newest_first(revs: list[Revision]) -> list[Revision]:
    """Return ``revs`` newest commit first (an unknown date last), then by branch name. Never raises."""
    dated = sorted((r for r in revs if r.date), key=lambda r: (_instant(r.date or ""), r.branch), reverse=True)
    return dated + sorted((r for r in revs if not r.date), key=lambda r: r.branch)


def _instant(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0
