"""The forks and their listings as data: a fork, a donor patch, one fork's branches, the report of all.

Dataclasses, so that ``fwman audit`` does not import pydantic; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from fwman.core.driver_version import DriverVersion
from fwman.core.jsonout import OMIT, meta
from fwman.driver.versions import Revision, nearest, newest_first


@dataclass(frozen=True)
class DonorPatch:
    """A P2P patch applied to NVIDIA's upstream tag of the same version: a fork that is a patch, not a branch.

    ``location`` is a host path (absolute) or an ``https://`` URL (``http://`` only to this machine's loopback);
    ``sha256`` pins its content (a patch is code that is built into a kernel module loaded as root, so an unpinned
    one is refused); ``versions`` are the upstream tags (bare driver versions) it is meant for, and
    ``versions_from`` says whether they were configured (``"config"``) or read from the patch's file name
    (``"name"``, a hint). What a tag builds is read from its tree's ``version.mk``, as for a branch. Its JSON form
    (``driver branches --json``, by the encoder) is ``{"patch", "sha256", "versions"}``.
    """

    location: str = field(metadata=meta(key="patch"))
    sha256: str
    versions: tuple[str, ...]
    versions_from: str = field(default="config", metadata=OMIT)

    @property
    def is_url(self) -> bool:
        """Return True when the patch is downloaded (an http(s) URL), False for a file on the host."""
        return self.location.startswith(("https://", "http://"))

    @property
    def file_name(self) -> str:
        """Return the last part of the location (``p2p.diff``), for messages and the manifest."""
        return self.location.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or "patch"


@dataclass(frozen=True)
class Fork:
    """A named fork and where to list its branches (a git URL or a local repository path on the host).

    A donor-patch fork (``donor`` set) is NVIDIA's upstream (``url``) plus a pinned patch: its "branches" are the
    upstream tags the patch is for.
    """

    name: str
    url: str
    donor: DonorPatch | None = None

    @property
    def cache_key(self) -> str:
        """Return the key of this fork's listing in the branch cache (a donor fork's includes its patch)."""
        return self.url if self.donor is None else f"{self.url}#patch={self.donor.sha256}"


@dataclass(kw_only=True)
class ForkBranches:
    """The branches of one fork, where they came from, and when (built by the listers of
    :mod:`fwman.driver.forks.listing` from values they have checked: a dataclass, so that ``fwman audit`` does
    not import pydantic)."""

    fork: str
    url: str
    branches: list[str] = field(default_factory=list)  # every head, names without refs/heads/
    commits: dict[str, str] = field(default_factory=dict)  # {branch: commit} where the listing said
    revisions: list[Revision] = field(default_factory=list)  # the P2P branches, with what their trees build
    source: str  # "git", "api", "cache", or "none" (no live listing and no cache)
    fetched_at: datetime | None = None
    error: str | None = None  # why the live listing failed (shown with a cached or empty result)
    donor: DonorPatch | None = None  # a donor-patch fork: ``branches`` are the upstream tags it applies to

    def p2p_versions(self) -> list[DriverVersion]:
        """Return the driver versions this fork's P2P branches build (their trees', else their names'),
        ascending."""
        return sorted({v for v in (r.driver_version() for r in self.revisions) if v is not None})

    def revisions_of(self, version: DriverVersion) -> list[Revision]:
        """Return the P2P branches that build exactly ``version``, newest commit first."""
        return newest_first([r for r in self.revisions if r.driver_version() == version])

    def age_seconds(self, now: datetime) -> float | None:
        """Return how old the listing is, in seconds (None when never fetched)."""
        return None if self.fetched_at is None else max(0.0, (now - self.fetched_at).total_seconds())

    @property
    def available(self) -> bool:
        """Return True when there is a listing (live or cached)."""
        return self.source != "none"


@dataclass(kw_only=True)
class BranchReport:
    """The listing of every fork."""

    forks: list[ForkBranches]
    now: datetime

    def carrying(self, version: DriverVersion) -> list[str]:
        """Return the names of the forks with a branch for exactly ``version``."""
        return [f.fork for f in self.forks if version in f.p2p_versions()]

    def versions(self) -> dict[DriverVersion, list[str]]:
        """Return {P2P version: forks carrying it}, ascending by version."""
        table: dict[DriverVersion, list[str]] = {}
        for f in self.forks:
            for v in f.p2p_versions():
                table.setdefault(v, []).append(f.fork)
        return dict(sorted(table.items()))

    def nearest(self, version: DriverVersion) -> tuple[DriverVersion | None, DriverVersion | None]:
        """Return the closest P2P versions below and above ``version`` that some fork carries."""
        return nearest(version, list(self.versions()))

    @property
    def complete(self) -> bool:
        """Return True when every fork has a listing (live or cached)."""
        return all(f.available for f in self.forks)

    @property
    def any_available(self) -> bool:
        """Return True when at least one fork has a listing."""
        return any(f.available for f in self.forks)


def utc_text(date: str | None) -> str:
    """Return an ISO 8601 date (a committer's ``%cI``, in the committer's own offset) as UTC for a table:
    ``2025-01-30 11:00:00Z``; ``unknown`` for None, the text itself (19 characters) when it is not a date.
    Never raises."""
    if not date:
        return "unknown"
    try:
        when = datetime.fromisoformat(date.strip())
    except ValueError:
        return date[:19].replace("T", " ")
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")  # no offset given: said as it came
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def human_age(seconds: float | None) -> str:
    """Return an age for people: ``"just now"``, ``"5 min"``, ``"3 h"``, ``"12 days"``; ``"never"`` for None."""
    if seconds is None:
        return "never"
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} days"
