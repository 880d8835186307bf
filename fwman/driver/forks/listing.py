"""The listing of every fork's branches: live (``git ls-remote``, else the forge's API), the trees read, cached;
from the cache when a fork cannot be listed. A donor-patch fork lists its upstream's tags instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fwman.core import clock, names
from fwman.core.errors import FwmanError, ParseError, UsageError
from fwman.driver.families import PLAIN, parse_branch_name
from fwman.driver.forks.cache import load_cache, load_trees, save_cache
from fwman.driver.forks.forge import DEFAULT_API, forge_repo, list_via_api
from fwman.driver.forks.lsremote import list_tags, list_via_git
from fwman.driver.forks.model import BranchReport, DonorPatch, Fork, ForkBranches
from fwman.driver.forks.trees import read_trees
from fwman.driver.versions import Revision, is_p2p_name, newest_first, revisions, tree_revision
from fwman.host.base import Host


def usable_branches(found: Sequence[str]) -> list[str]:
    """Return the names in ``found`` that are branch names fwman accepts (``names.branch_name``), in order.

    A forge or a remote may list names fwman refuses as ``--branch`` (whitespace, ``..``, thousands of
    characters): no build can use them, so they are neither shown nor written to the cache.
    """
    usable = []
    for name in found:
        try:
            usable.append(names.branch_name(name))
        except UsageError:
            continue
    return usable


def _live(fork: Fork, found: Mapping[str, str | None], source: str, now: datetime) -> ForkBranches:
    """Return the live listing of ``fork`` from ``found`` ({branch: commit, None where unknown}): its usable
    branch names and their known commits."""
    kept = usable_branches(list(found))
    commits = {b: c for b in kept if (c := found[b])}
    return ForkBranches(fork=fork.name, url=fork.url, branches=kept, commits=commits, source=source, fetched_at=now)


def _from_cache(
    fork: Fork, entry: dict[str, Any] | None, error: str | None, trees: Mapping[str, Any] | None = None
) -> ForkBranches:
    if entry is None:
        return ForkBranches(fork=fork.name, url=fork.url, source="none", error=error, donor=fork.donor)
    try:
        fetched = datetime.fromisoformat(str(entry["fetched_at"]))
        branches = [str(b) for b in entry["branches"]]
        raw_commits = entry.get("commits") or {}
        commits = {str(k): str(v) for k, v in raw_commits.items()} if isinstance(raw_commits, dict) else {}
    except (KeyError, ValueError, TypeError, AttributeError):
        return ForkBranches(
            fork=fork.name, url=fork.url, source="none", error=error or "cache entry unreadable", donor=fork.donor
        )
    if fetched.tzinfo is None:
        fetched = fetched.replace(tzinfo=UTC)
    return ForkBranches(
        fork=fork.name,
        url=fork.url,
        branches=branches,
        commits=commits,
        revisions=with_families(
            revisions(branches, commits, trees or {})
            if fork.donor is None
            else donor_revisions(fork.donor, branches, commits, trees or {})
        ),
        source="cache",
        donor=fork.donor,
        fetched_at=fetched,
        error=error,
    )


def list_branches(
    host: Host,
    forks: Sequence[Fork],
    *,
    api: str = DEFAULT_API,
    offline: bool = False,
    now: datetime | None = None,
    timeout: float = 20.0,
    max_cache_age: float | None = None,
) -> BranchReport:
    """Return the branches of every fork: live where possible (then cached), else from the cache.

    ``offline`` skips the network entirely; ``max_cache_age`` (seconds) uses a cached list younger than that
    without listing live. Never raises for a fork that cannot be listed: its entry says why (``error``) and has
    ``source`` "cache" or "none".
    """
    now = now or clock.now_utc()
    cache = load_cache(host)
    trees = load_trees(host)
    new_trees: dict[str, Any] = {}
    results: list[ForkBranches] = []
    live: list[ForkBranches] = []
    has_git = (not offline) and host.which("git") is not None
    for fork in forks:
        if offline:
            results.append(_from_cache(fork, cache.get(fork.cache_key), "offline: not listed live", trees))
            continue
        if max_cache_age is not None:
            cached = _from_cache(fork, cache.get(fork.cache_key), None, trees)
            age = cached.age_seconds(now)
            if cached.available and age is not None and age <= max_cache_age:
                results.append(cached)
                continue
        errors: list[str] = []
        listing: ForkBranches | None = None
        if fork.donor is not None:  # NVIDIA's upstream tags the patch is for, read like branches
            donor_listing = _list_donor(host, fork, now, timeout, has_git, {**trees, **new_trees})
            if isinstance(donor_listing, str):
                results.append(_from_cache(fork, cache.get(fork.cache_key), donor_listing, trees))
            else:
                done, read = donor_listing
                new_trees.update(read)
                results.append(done)
                live.append(done)
            continue
        if has_git:
            try:
                listing = _live(fork, list_via_git(host, fork.url, timeout), "git", now)
            except (FwmanError, ParseError) as e:
                errors.append(e.message if isinstance(e, FwmanError) else str(e))
        repo = forge_repo(fork.url)
        if listing is None and repo is not None:
            try:
                listing = _live(fork, list_via_api(host, api, *repo, timeout=timeout), "api", now)
            except FwmanError as e:
                errors.append(e.message)
        if listing is None and repo is None and not has_git:
            errors.append("git is not installed (needed for a non-GitHub URL or a local repository)")
        if listing is not None:
            if has_git:
                # the P2P branches whose commit was never read: one depth-1 fetch of them all, then each tree
                unread = {
                    b: c for b, c in listing.commits.items() if is_p2p_name(b) and c not in trees and c not in new_trees
                }
                read, problem = read_trees(host, fork.url, unread)
                new_trees.update(read)
                if problem is not None:
                    listing.error = f"branch trees not read (versions from names): {problem}"
            listing.revisions = with_families(revisions(listing.branches, listing.commits, {**trees, **new_trees}))
            results.append(listing)
            live.append(listing)
        else:
            results.append(_from_cache(fork, cache.get(fork.cache_key), "; ".join(errors) or "not listed", trees))
    if live:
        problem = save_cache(host, live, new_trees)
        if problem is not None:
            for f in live:
                f.error = problem
    return BranchReport(forks=results, now=now)


def with_families(revs: list[Revision]) -> list[Revision]:
    """Return ``revs`` with each branch's family and revision number read from its name (a donor fork's tags:
    the plain family, no number). Never raises."""
    for r in revs:
        parsed = parse_branch_name(r.branch) if r.patch_sha256 is None else None
        r.family, r.revision = (parsed.family, parsed.revision) if parsed is not None else (PLAIN, None)
    return revs


def choose_revision(revs: Sequence[Revision], family: str) -> list[Revision]:
    """Return the revisions of ``revs`` (one version's) of ``family``, the default first: the highest revision
    number, then the newest commit (a name without a number ranks below numbered ones of its date order)."""
    mine = [r for r in revs if r.family == family]
    by_date = newest_first(mine)
    order = {id(r): i for i, r in enumerate(by_date)}
    return sorted(by_date, key=lambda r: (-(r.revision or 0), order[id(r)]))


def donor_revisions(
    donor: DonorPatch, tags: list[str], commits: Mapping[str, str], trees: Mapping[str, Any]
) -> list[Revision]:
    """Return one revision per upstream tag of ``donor.versions`` that ``tags`` has: the version its tree's
    ``version.mk`` says where ``trees`` has its commit, else the tag's (a hint). Never raises."""
    return [tree_revision(t, commits.get(t), trees, t, donor.sha256) for t in donor.versions if t in tags]


def _list_donor(
    host: Host, fork: Fork, now: datetime, timeout: float, has_git: bool, trees: Mapping[str, Any]
) -> tuple[ForkBranches, dict[str, Any]] | str:
    """Return the live listing of a donor fork (its upstream tags, their trees read) and the new tree reads, or
    why it could not be listed."""
    assert fork.donor is not None
    if not has_git:
        return "git is not installed (needed to list the upstream tags of a donor patch)"
    try:
        tags = list_tags(host, fork.url, fork.donor.versions, timeout)
    except (FwmanError, ParseError) as e:
        return e.message if isinstance(e, FwmanError) else str(e)
    unread = {t: c for t, c in tags.items() if c not in trees}
    read, problem = read_trees(host, fork.url, unread, kind="tags")
    missing = [v for v in fork.donor.versions if v not in tags]
    notes = [f"upstream {fork.url} has no tag {', '.join(missing)}"] if missing else []
    if problem is not None:
        notes.append(f"tag trees not read (versions from the tags): {problem}")
    listing = ForkBranches(
        fork=fork.name,
        url=fork.url,
        branches=list(tags),
        commits=tags,
        revisions=with_families(donor_revisions(fork.donor, list(tags), tags, {**trees, **read})),
        source="git",
        fetched_at=now,
        error="; ".join(notes) or None,
        donor=fork.donor,
    )
    return listing, read
