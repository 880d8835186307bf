"""The P2P forks of NVIDIA's open kernel modules and the driver versions their branches carry.

A fork carries driver version V when it has a P2P *branch* (``refs/heads/``, its name saying ``p2p``; a tag does
not count) whose tree builds V: the ``NVIDIA_VERSION`` of its ``version.mk`` (:mod:`fwman.driver.versions`),
the name (``V-p2p``, ``V-p2p-v2``) only a hint where the tree cannot be read. Branches are listed live:
``git ls-remote --heads URL`` through the Host where git is installed, otherwise (or when git fails) the forge's
branches API with pagination. Every live result is cached in ``/var/cache/fwman/branches.json`` with the time
it was fetched; when a fork cannot be listed (offline, server error) its cached list is used and its age shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fwman.core import clock, names, paths
from fwman.core.config import DONOR_KEYS, Config
from fwman.core.driver_version import DriverVersion
from fwman.core.errors import FwmanError, HostChangeError, MissingError, NotRecordedError, ParseError, UsageError
from fwman.core.jsontext import parse_json
from fwman.driver.families import PLAIN, parse_branch_name
from fwman.driver.git import GIT_ENV, failure_text, git_target
from fwman.driver.versions import (
    VERSION_FILE,
    Revision,
    is_p2p_name,
    nearest,
    newest_first,
    parse_version_mk,
    revisions,
)
from fwman.host.base import CommandResult, Host
from fwman.host.capped import read_capped

DEFAULT_FORKS: dict[str, str] = {
    "aikitoria": "https://github.com/aikitoria/open-gpu-kernel-modules",
    "tinygrad": "https://github.com/tinygrad/open-gpu-kernel-modules",
    "mylesgoose": "https://github.com/mylesgoose/open-gpu-kernel-modules",
}
DEFAULT_API = "https://api.github.com"
API_ENV = "FWMAN_FORGE_API"
RESERVED_KEYS = {"api_url", "defaults"}  # keys of [forks] that are settings, not forks
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_OWNER_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_GITHUB_RE = re.compile(r"(?:https?://|git@|ssh://git@)github\.com[/:]([^/\s]+)/([^/\s]+?)(?:\.git)?/?")
_MAX_PAGES = 50
#: the branch cache is read up to this; a larger file (one written before answers were capped) is unreadable,
#: hence empty, and the next live listing rewrites it. A full listing is at most _MAX_PAGES pages of 100 names
#: of at most 255 characters: about 1.3 MB per fork.
MAX_CACHE_BYTES = 16 << 20
PROBE_TIMEOUT = 1800.0  # depth-1 fetches of real fork branches, ~100 MB each


#: where NVIDIA publishes its open kernel modules: the default upstream of a donor-patch fork. Its releases are
#: tags named by the bare version (``595.58.03``: the ``releases/tag/595.58.03`` that
#: github.com/himekifee/talos-tinygrad-nvidia-p2p-driver builds on)
NVIDIA_UPSTREAM = "https://github.com/NVIDIA/open-gpu-kernel-modules"
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_LOOPBACK_HTTP = re.compile(r"http://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?/\S*")
_VERSION_IN_NAME = re.compile(r"(?<![0-9.])(\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![0-9])")


@dataclass(frozen=True)
class DonorPatch:
    """A P2P patch applied to NVIDIA's upstream tag of the same version: a fork that is a patch, not a branch.

    ``location`` is a host path (absolute) or an ``https://`` URL (``http://`` only to this machine's loopback);
    ``sha256`` pins its content (a patch is code that is built into a kernel module loaded as root, so an unpinned
    one is refused); ``versions`` are the upstream tags (bare driver versions) it is meant for, and
    ``versions_from`` says whether they were configured (``"config"``) or read from the patch's file name
    (``"name"``, a hint). What a tag builds is read from its tree's ``version.mk``, as for a branch.
    """

    location: str
    sha256: str
    versions: tuple[str, ...]
    versions_from: str = "config"

    @property
    def is_url(self) -> bool:
        """Return True when the patch is downloaded (an http(s) URL), False for a file on the host."""
        return self.location.startswith(("https://", "http://"))

    @property
    def file_name(self) -> str:
        """Return the last part of the location (``p2p.diff``), for messages and the manifest."""
        return self.location.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or "patch"

    def to_json(self) -> dict[str, Any]:
        """Return the patch as ``driver branches --json`` and the manifest show it."""
        return {"patch": self.location, "sha256": self.sha256, "versions": list(self.versions)}


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


def parse_donor(name: str, table: Mapping[str, Any], where: str) -> Fork:
    """Return the donor-patch fork of ``[forks.NAME]`` table ``table`` (``where`` names the file in messages).

    Raises UsageError naming the key: an unknown key; ``patch`` missing or not an absolute path or ``https://``
    URL; ``sha256`` missing (an unpinned patch is refused) or not 64 hex digits; ``upstream`` not a repository
    URL; ``versions`` not a list of driver versions, or absent while the patch's name says no version.
    """
    section = f"{where}: [forks.{name}]"
    hint = (
        f'[forks.{name}] patch = "https://.../p2p.patch" (or an absolute path), sha256 = "<sha256sum of it>", '
        'versions = ["595.58.03"]'
    )
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"{where}: [forks] {name!r} is not a fork name", hint=hint)
    unknown = sorted(k for k in table if k not in DONOR_KEYS)
    if unknown:
        raise UsageError(f"{section}: unknown key `{unknown[0]}`; known keys: {', '.join(DONOR_KEYS)}", hint=hint)
    patch = table.get("patch")
    if not isinstance(patch, str) or not patch.strip():
        raise UsageError(f"{section}: `patch` must be a string: the patch's absolute path or https:// URL", hint=hint)
    patch = patch.strip()
    url_ok = patch.startswith("https://") and " " not in patch
    if not (url_ok or _LOOPBACK_HTTP.fullmatch(patch) or (patch.startswith("/") and "\0" not in patch)):
        raise UsageError(f"{section}: patch {patch[:120]!r} is neither an absolute path nor an https:// URL", hint=hint)
    sha = table.get("sha256")
    if sha is None:
        raise UsageError(
            f"{section}: no sha256 for patch {patch[:120]}: an unpinned patch is refused (it is code from elsewhere, "
            "built into a module loaded as root)",
            hint=f"check the patch, then pin it: sha256 = \"$(sha256sum FILE | cut -d' ' -f1)\" in [forks.{name}]",
        )
    if not isinstance(sha, str) or not _SHA256_RE.fullmatch(sha.strip().lower()):
        raise UsageError(f"{section}: sha256 must be 64 hexadecimal digits (as sha256sum prints it)", hint=hint)
    upstream_text = table.get("upstream", NVIDIA_UPSTREAM)
    if not isinstance(upstream_text, str) or not upstream_text.strip():
        raise UsageError(f"{section}: `upstream` must be a repository URL string", hint=hint)
    upstream = clonable_url(names.fork_url(upstream_text.strip(), f"{section} upstream"))
    raw_versions = table.get("versions")
    versions_from = "config"
    if raw_versions is None:
        hinted = _VERSION_IN_NAME.findall(patch.rsplit("/", 1)[-1])
        if not hinted:
            raise UsageError(
                f'{section}: say which NVIDIA release the patch is for: versions = ["V"] (its name '
                f"{patch.rsplit('/', 1)[-1][:80]!r} says no version)",
                hint=hint,
            )
        raw_versions, versions_from = hinted[:1], "name"
    if not isinstance(raw_versions, list) or not raw_versions or not all(isinstance(v, str) for v in raw_versions):
        raise UsageError(f'{section}: versions must be a list of driver versions, e.g. ["595.58.03"]', hint=hint)
    versions = tuple(dict.fromkeys(str(names.driver_version(v.strip(), f"{section} versions")) for v in raw_versions))
    donor = DonorPatch(patch, sha.strip().lower(), versions, versions_from)
    return Fork(names.fork_name(name, f"{where}: [forks]"), upstream, donor)


def donor_forks(config: Config) -> dict[str, Fork]:
    """Return {name: Fork} of the donor-patch forks of ``[forks]`` (its tables). Raises UsageError on a bad one."""
    found: dict[str, Fork] = {}
    for name, value in config.section("forks").items():
        if isinstance(value, Mapping):
            found[name] = parse_donor(name, value, config.path)
    return found


def clonable_url(location: str) -> str:
    """Return ``location`` as git clones it: ``owner/name`` means GitHub; URLs and absolute paths stay as given."""
    if _OWNER_NAME_RE.fullmatch(location):
        return f"https://github.com/{location}.git"
    return location


def known_forks(config: Config) -> dict[str, str]:
    """Return {name: URL} of every fork a name may stand for: the built-in three (unless ``[forks] defaults =
    false``), then ``[forks]`` of the config (a configured name replaces a built-in URL).

    Raises UsageError on a bad ``[forks]`` entry.
    """
    forks: dict[str, str] = dict(DEFAULT_FORKS) if config.get_bool("forks", "defaults", True) else {}
    for name, url in config.section("forks").items():
        if name in RESERVED_KEYS or isinstance(url, Mapping):  # a table is a donor-patch fork (donor_forks)
            continue
        if not isinstance(url, str) or not url.strip() or not _NAME_RE.fullmatch(name):
            raise UsageError(f"{config.path}: [forks] {name} must be a URL string", hint='name = "https://..."')
        # config.toml is root's, but a fork URL reaches git: the same edge check as --fork
        forks[names.fork_name(name, f"{config.path}: [forks]")] = clonable_url(
            names.fork_url(url.strip(), f"{config.path}: [forks] {name}")
        )
    return forks


def resolve_fork(config: Config, text: str, option: str = "--fork") -> Fork:
    """Return the fork ``text`` names: the one resolver of a fork, for every place a fork is named.

    ``text`` is one of: the name of a known fork (built-in or ``[forks]``: ``aikitoria``); ``NAME=URL`` (a fork
    for this run, named NAME); or a location git can clone (``https://...``, ``git@host:path``, ``file://...``,
    an absolute path, ``owner/name`` on GitHub), named by the text itself. ``option`` names where the text came
    from in messages (``--fork``, ``/etc/fwman/config.toml: [modules] fork``). Raises UsageError for a bad
    ``[forks]`` table, a name that is not a known fork (the message lists the known ones), or a location git
    must not be handed.
    """
    text = text.strip()
    forks = known_forks(config)
    donors = donor_forks(config)
    if text in donors:
        return donors[text]
    if text in forks:
        return Fork(text, forks[text])
    name, sep, url = text.partition("=")
    if sep:
        if not _NAME_RE.fullmatch(name.strip()) or not url.strip():
            raise UsageError(
                f"{option} {text!r}: expected NAME=URL",
                hint="e.g. --fork mine=https://github.com/me/open-gpu-kernel-modules or --fork local=/srv/fork.git",
            )
        return Fork(names.fork_name(name.strip(), option), clonable_url(names.fork_url(url.strip(), option)))
    if "/" in text or ":" in text:  # a URL, scp-like git@host:path, an absolute path or owner/name
        return Fork(text, clonable_url(names.fork_url(text, option)))
    known = ", ".join([*forks, *donors]) or "none ([forks] defaults = false and no fork configured)"
    raise UsageError(
        f"{option} {text!r}: no fork of that name (known forks: {known}); give a known name, NAME=URL or a "
        "repository URL",
        hint=f'name a known fork, add it to {config.path} ([forks] {text} = "URL"), '
        "or give NAME=URL or the repository URL itself",
    )


def configured_forks(config: Config, extra: Sequence[str] = ()) -> list[Fork]:
    """Return the forks to list: each ``--fork`` value when there is one, else the known ones
    (:func:`known_forks`, then the donor-patch forks).

    A ``--fork`` value is anything :func:`resolve_fork` takes (a known name, ``NAME=URL``, a URL); a later
    entry with the same name replaces the earlier URL. Naming forks lists those alone: an owner asking about one
    fork (a local mirror, with no network) must not wait on, or fail for, the others (issue 39, row 5). Raises
    UsageError on a bad entry.
    """
    chosen: dict[str, Fork] = {}
    if not extra:
        chosen = {n: Fork(n, u) for n, u in known_forks(config).items()}
        chosen.update(donor_forks(config))
    for text in extra:
        fork = resolve_fork(config, text)
        chosen[fork.name] = fork
    return list(chosen.values())


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


def api_base(config: Config, variables: Mapping[str, str]) -> str:
    """Return the forge API base URL: ``$FWMAN_FORGE_API``, else ``[forks] api_url``, else GitHub's."""
    return (variables.get(API_ENV) or config.get_str("forks", "api_url") or DEFAULT_API).rstrip("/")


def forge_repo(url: str) -> tuple[str, str] | None:
    """Return (owner, repository) for a GitHub URL, None for anything else (local paths, other hosts)."""
    m = _GITHUB_RE.fullmatch(url.strip())
    return (m.group(1), m.group(2)) if m else None


# -- the listing ----------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class ForkBranches:
    """The branches of one fork, where they came from, and when (built by this module's listers from values
    they have checked: a dataclass, so that ``fwman audit`` does not import pydantic)."""

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
        found = {v for v in (r.driver_version() for r in self.revisions) if v is not None}
        return sorted(found)

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


def parse_ls_remote(text: str) -> list[str]:
    """Return the branch names in ``git ls-remote`` output; only ``refs/heads/`` lines count (tags do not).

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    return list(parse_ls_remote_commits(text))


def parse_ls_remote_commits(text: str) -> dict[str, str]:
    """Return {branch: commit} of the ``refs/heads/`` lines of ``git ls-remote`` output, in order.

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    heads: dict[str, str] = {}
    for sha, ref in _ls_remote_refs(text):
        if ref.startswith("refs/heads/"):
            heads[ref[len("refs/heads/") :]] = sha
    return heads


def _ls_remote_refs(text: str) -> Iterator[tuple[str, str]]:
    """Yield (commit, ref) of each ``<sha>\\t<ref>`` line of ``git ls-remote`` output (blank lines skipped).

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sha, sep, ref = line.partition("\t")
        if not sep or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha.strip()):
            raise ParseError("git ls-remote output", "line", f"{line[:60]!r} is not '<sha>\\t<ref>'", number)
        yield sha.strip(), ref.strip()


def parse_link_next(header: str | None) -> str | None:
    """Return the ``rel="next"`` URL of an HTTP ``Link`` header, or None."""
    if not header:
        return None
    for part in header.split(","):
        m = re.match(r"\s*<([^>]*)>\s*;(.*)", part)
        if m and re.search(r'rel\s*=\s*"?next"?', m.group(2)):
            return m.group(1)
    return None


def list_via_git(host: Host, url: str, timeout: float = 30.0) -> dict[str, str]:
    """Return {branch: commit} of ``url`` from ``git ls-remote --heads``.

    Raises FwmanError when git fails, its message ending with git's stderr (the last 40 lines, 4 KiB at most).
    """
    result = host.run(["git", "ls-remote", "--heads", "--", git_target(host, url)], timeout=timeout, env=GIT_ENV)
    if result.missing:
        raise MissingError("git is not installed")
    if not result.ok:  # git's whole reason (bounded): its last line alone can say the opposite of the truth
        raise FwmanError(failure_text(f"git ls-remote {url}", result.rc, result.stderr))
    return parse_ls_remote_commits(result.stdout)


def list_via_api(host: Host, api: str, owner: str, repo: str, timeout: float = 20.0) -> dict[str, str]:
    """Return {branch: commit} of ``owner/repo`` from the forge's paginated branches API (commit "" where the
    answer has none).

    Follows ``Link: rel="next"``; without a Link header, asks for the next ``?page=`` while pages come back full
    (100 names). Goes through the HTTP door, so a replay ``host`` refuses it (UsageError), and each answer is
    read up to the door's cap. Raises FwmanError on a network error, an HTTP error status, a malformed answer,
    an answer over the cap (VerificationError) or a page of more names than asked for.
    """
    from fwman.host.http import HttpError, json_getter  # the door imports requests, which is slow to import

    per_page = 100
    first = f"{api}/repos/{owner}/{repo}/branches?per_page={per_page}&page=1"
    url: str | None = first
    page = 1
    names: dict[str, str] = {}
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "fwman"}
    with json_getter(host, first, headers=headers, timeout=timeout) as get:
        while url is not None:
            if page > _MAX_PAGES:
                raise FwmanError(f"{owner}/{repo}: more than {_MAX_PAGES} pages of branches; stopped")
            try:
                response = get(url)
            except HttpError as e:
                raise FwmanError(f"cannot reach {api}: {e.reason}") from e
            if response.status != 200:
                raise FwmanError(f"{api} answered HTTP {response.status} for {owner}/{repo}")
            try:
                body: Any = response.body
                batch = [(str(item["name"]), _sha_of(item)) for item in body]
            except (ValueError, TypeError, KeyError) as e:
                raise FwmanError(f"{api}: unexpected answer for {owner}/{repo} (not a list of branches)") from e
            if len(batch) > per_page:  # with the page cap, this bounds a listing to _MAX_PAGES * per_page names
                raise FwmanError(f"{api}: {len(batch)} branches in one page for {owner}/{repo}, asked for {per_page}")
            names.update(batch)
            link_next = parse_link_next(response.headers.get("Link"))
            page += 1
            if link_next is not None:
                url = link_next
            elif "Link" not in response.headers and len(batch) == per_page:
                # a full page and no Link header (a forge that does not send one): ask for ?page=N until a
                # short or empty page
                url = f"{api}/repos/{owner}/{repo}/branches?per_page={per_page}&page={page}"
            else:
                url = None
    return names


def _sha_of(item: Any) -> str:
    """Return ``item["commit"]["sha"]`` of a branches-API entry when it is a commit id, else ""."""
    commit = item.get("commit") if isinstance(item, dict) else None
    sha = commit.get("sha") if isinstance(commit, dict) else None
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) else ""


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


# -- cache ----------------------------------------------------------------------------------------------
def _read_cache(host: Host) -> Any:
    """Return the branch cache file's JSON document, or None when there is none, it is over MAX_CACHE_BYTES or
    it does not parse. Never raises."""
    try:
        if not host.exists(paths.BRANCH_CACHE_FILE):
            return None
        return parse_json(read_capped(host, paths.BRANCH_CACHE_FILE, MAX_CACHE_BYTES, "branch cache"), "branch cache")
    except (MissingError, NotRecordedError, ParseError):
        return None


def load_cache(host: Host) -> dict[str, dict[str, Any]]:
    """Return the cached listings keyed by URL ({} when there is no readable cache, or it is over
    MAX_CACHE_BYTES). Never raises."""
    data = _read_cache(host)
    entries = data.get("forks") if isinstance(data, dict) else None
    return {k: v for k, v in entries.items() if isinstance(v, dict)} if isinstance(entries, dict) else {}


def load_trees(host: Host) -> dict[str, dict[str, Any]]:
    """Return the cached reads of branch trees, {commit: {"version", "date", "error"}} ({} when none or
    unreadable). Never raises."""
    data = _read_cache(host)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, dict):
        return {}
    return {k: v for k, v in trees.items() if isinstance(v, dict) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", k)}


def save_cache(host: Host, listings: Sequence[ForkBranches], trees: Mapping[str, Any] | None = None) -> str | None:
    """Merge live ``listings`` and the tree reads ``trees`` ({commit: ...}) into the cache file. Returns None, or
    why it could not be written."""
    entries = load_cache(host)
    all_trees = load_trees(host)
    all_trees.update(trees or {})
    for f in listings:
        if f.source in ("git", "api") and f.fetched_at is not None:
            entries[f.url if f.donor is None else Fork(f.fork, f.url, f.donor).cache_key] = {
                "fork": f.fork,
                "branches": f.branches,
                "commits": f.commits,
                "source": f.source,
                "fetched_at": f.fetched_at.isoformat(),
            }
    doc = {"format": "fwman-branch-cache", "version": 1, "forks": entries, "trees": all_trees}
    try:
        host.write_bytes(paths.BRANCH_CACHE_FILE, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    except (OSError, HostChangeError) as e:
        return f"cannot write {paths.BRANCH_CACHE_FILE}: {e.strerror or e}"
    return None


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
        revisions=with_families(_revisions_of(fork, branches, commits, trees or {})),
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
                heads = list_via_git(host, fork.url, timeout)
                kept = usable_branches(list(heads))
                listing = ForkBranches(
                    fork=fork.name,
                    url=fork.url,
                    branches=kept,
                    commits={b: heads[b] for b in kept},
                    source="git",
                    fetched_at=now,
                )
            except (FwmanError, ParseError) as e:
                errors.append(e.message if isinstance(e, FwmanError) else str(e))
        repo = forge_repo(fork.url)
        if listing is None and repo is not None:
            try:
                found = list_via_api(host, api, *repo, timeout=timeout)
                kept = usable_branches(list(found))
                listing = ForkBranches(
                    fork=fork.name,
                    url=fork.url,
                    branches=kept,
                    commits={b: found[b] for b in kept if found[b]},
                    source="api",
                    fetched_at=now,
                )
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


def _revisions_of(
    fork: Fork, branches: list[str], commits: Mapping[str, str], trees: Mapping[str, Any]
) -> list[Revision]:
    """Return the revisions of a listing: a branch fork's P2P branches, or a donor fork's upstream tags."""
    if fork.donor is None:
        return revisions(branches, commits, trees)
    return donor_revisions(fork.donor, branches, commits, trees)


def donor_revisions(
    donor: DonorPatch, tags: list[str], commits: Mapping[str, str], trees: Mapping[str, Any]
) -> list[Revision]:
    """Return one revision per upstream tag of ``donor.versions`` that ``tags`` has: the version its tree's
    ``version.mk`` says where ``trees`` has its commit, else the tag's (a hint). Never raises."""
    found = []
    for tag in donor.versions:
        if tag not in tags:
            continue
        commit = commits.get(tag)
        tree = trees.get(commit) if commit else None
        version = tree.get("version") if tree else None
        found.append(
            Revision(
                branch=tag,
                commit=commit,
                version=str(version) if version else tag,
                from_tree=bool(version),
                date=str(tree["date"]) if tree and tree.get("date") else None,
                error=str(tree["error"]) if tree and tree.get("error") else None,
                patch_sha256=donor.sha256,
            )
        )
    return found


def parse_ls_remote_tags(text: str, tags: Sequence[str]) -> dict[str, str]:
    """Return {tag: commit} of the ``tags`` that ``git ls-remote --tags`` output ``text`` lists, in ``tags``' order:
    an annotated tag's peeled ``refs/tags/T^{}`` line (its commit) wins over the tag object's own line.

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    found: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for sha, ref in _ls_remote_refs(text):
        name = ref.removeprefix("refs/tags/")
        if name.endswith("^{}"):
            peeled[name[:-3]] = sha
        else:
            found[name] = sha
    return {t: peeled.get(t, found[t]) for t in tags if t in found}


def list_tags(host: Host, url: str, tags: Sequence[str], timeout: float = 30.0) -> dict[str, str]:
    """Return {tag: commit} of the ``tags`` that ``url`` has (``git ls-remote --tags``; an annotated tag's
    commit is its peeled ``^{}`` line).

    Raises MissingError without git, FwmanError when git fails (git's message kept, bounded), ParseError for
    output that is not ``<sha>\\t<ref>`` lines.
    """
    # the peeled line is listed only when asked for by name: an annotated tag's own sha is not a commit
    refs = [ref for t in tags for ref in (f"refs/tags/{t}", f"refs/tags/{t}^{{}}")]
    result = host.run(["git", "ls-remote", "--tags", "--", git_target(host, url), *refs], timeout=timeout, env=GIT_ENV)
    if result.missing:
        raise MissingError("git is not installed")
    if not result.ok:
        raise FwmanError(failure_text(f"git ls-remote {url}", result.rc, result.stderr))
    return parse_ls_remote_tags(result.stdout, tags)


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


def probe_dir(url: str) -> str:
    """Return the bare repository in the source cache where the branches of ``url`` are read."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", re.sub(r"^[a-z]+://", "", url)).strip("_")
    import hashlib  # here: `fwman audit` imports this module and never needs it (OpenSSL's load is not free)

    return f"{paths.SOURCE_CACHE_DIR}/{slug[:80]}-{hashlib.sha256(url.encode()).hexdigest()[:8]}.probe"


def _probe_git(host: Host, args: list[str], cwd: str, timeout: float = 120.0) -> CommandResult:
    return host.run(["git", *args], cwd=cwd, timeout=timeout, env=GIT_ENV)


def read_trees(
    host: Host, url: str, heads: Mapping[str, str], kind: str = "heads"
) -> tuple[dict[str, dict[str, str | None]], str | None]:
    """Fetch ``heads`` ({branch: commit}; with ``kind="tags"``, {tag: commit}) at depth 1 and read each commit's
    version and date.

    One ``git fetch --depth=1`` of every branch asked for into a bare probe repository in the source cache
    (:func:`probe_dir`): it works against ``git daemon``, ``file://``, a path and GitHub alike, where
    ``git archive --remote`` is refused by GitHub and by a ``git daemon`` without ``upload-archive``. Then
    ``git show COMMIT:version.mk`` and the committer date (``%cI``). The caller caches the answer per commit.

    Returns ({commit: {"version": X or None, "date": D or None, "error": why or None}}, None), or ({}, why)
    when the fetch itself failed. Never raises for git's failures (a missing git is a reason, too).
    """
    if not heads:
        return {}, None
    directory = probe_dir(url)
    try:
        host.mkdir(paths.SOURCE_CACHE_DIR)
        if not host.is_dir(directory):
            host.mkdir(directory)
        local = host.local_path(directory)
        if local is None:
            return {}, f"cannot read branch trees on {host.description}"
        init = _probe_git(host, ["init", "-q", "--bare", "--", local], cwd=local)
        if init.missing:
            return {}, "git is not installed"
        probe = "refs/probe" if kind == "heads" else f"refs/probe-{kind}"
        refspecs = [f"+refs/{kind}/{b}:{probe}/{b}" for b in heads]
        fetch = _probe_git(
            host, ["fetch", "-q", "--depth=1", "--", git_target(host, url), *refspecs], cwd=local, timeout=PROBE_TIMEOUT
        )
        if not fetch.ok:
            return {}, failure_text(f"git fetch {url}", fetch.rc, fetch.stderr)
    except (FwmanError, OSError) as e:
        return {}, str(e)
    found: dict[str, dict[str, str | None]] = {}
    for commit in set(heads.values()):
        entry: dict[str, str | None] = {"version": None, "date": None, "error": None}
        date = _probe_git(host, ["log", "-1", "--format=%cI", commit, "--"], cwd=local)
        if date.ok and date.stdout.strip():
            entry["date"] = date.stdout.strip()
        shown = _probe_git(host, ["show", f"{commit}:{VERSION_FILE}"], cwd=local)
        if not shown.ok:
            entry["error"] = f"no {VERSION_FILE} in its tree"
        else:
            try:
                entry["version"] = str(parse_version_mk(shown.stdout))
            except ParseError as e:
                entry["error"] = str(e)
        found[commit] = entry
    return found, None


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
