"""Whether a P2P fork carries a branch for the kernel module's version, and the one line that says it."""

from __future__ import annotations

from fwman.core.driver_version import DriverVersion
from fwman.driver.forks.model import BranchReport, human_age
from fwman.reports.audit.model import P2PBranch


def p2p_status(version: str | None, report: BranchReport | None) -> P2PBranch:
    """Return whether some fork carries ``version``-p2p according to ``report`` (unknown without a listing)."""
    if version is None:
        return P2PBranch(version=None, status="unknown", note="no kernel module version to look up")
    if report is None or not report.any_available:
        return P2PBranch(version=version, status="unknown", note="fork branches not listed (offline, no cache)")
    target = DriverVersion.parse(version)
    carriers = report.carrying(target)
    sources = sorted({"cache" if f.source == "cache" else "live" for f in report.forks if f.available})
    ages = [f.age_seconds(report.now) for f in report.forks if f.source == "cache"]
    oldest = max((a for a in ages if a is not None), default=None)
    if carriers:
        # the branch to build: each fork's newest revision whose tree builds the version (-p2p-v3, bar1-p2p)
        newest = [f"{f.fork}: {f.revisions_of(target)[0].branch}" for f in report.forks if f.fork in carriers]
        # said only where the branch to build is not simply V-p2p (a revision, another name): the JSON of a
        # host whose forks carry V-p2p stays what it was
        plain = all(b.endswith(f": {target.branch_name}") for b in newest)
        return P2PBranch(
            version=version,
            status="available",
            forks=carriers,
            source="+".join(sources),
            oldest_age_seconds=oldest,
            note=None if plain else "newest branch building it: " + ", ".join(newest),
        )
    below, above = report.nearest(target)
    return P2PBranch(
        version=version,
        status="none" if report.complete else "unknown",
        nearest_below=str(below) if below else None,
        nearest_above=str(above) if above else None,
        source="+".join(sources),
        oldest_age_seconds=oldest,
        note=None if report.complete else "some forks could not be listed",
    )


def p2p_line(p2p: P2PBranch) -> str:
    """Return the one-line P2P branch answer for people."""
    if p2p.version is None:
        return "P2P branch: unknown (no driver version found)"
    age = f", cached {human_age(p2p.oldest_age_seconds)} ago" if p2p.oldest_age_seconds is not None else ""
    if p2p.status == "available":
        if p2p.note is None:
            return f"P2P branch {p2p.version}-p2p: carried by {', '.join(p2p.forks)} ({p2p.source}{age})"
        # a revision or another name: say which branch builds it (its tree says the version)
        return f"P2P for {p2p.version}: carried by {', '.join(p2p.forks)} ({p2p.source}{age}); {p2p.note}"
    if p2p.status == "none":
        near = " and ".join(v for v in (p2p.nearest_below, p2p.nearest_above) if v) or "none"
        return (
            f"P2P branch {p2p.version}-p2p: no fork carries it; nearest versions with a branch: {near} "
            f"(moving means host and every container to that exact version; see fwman driver branches --driver-version "
            f"{p2p.version}){age}"
        )
    return f"P2P branch {p2p.version}-p2p: unknown ({p2p.note or 'not listed'})"
