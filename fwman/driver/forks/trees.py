"""What a branch's tree builds: one depth-1 fetch of the branches into a bare probe repository in the source
cache, then each commit's ``version.mk`` and committer date.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fwman.core import paths
from fwman.core.errors import FwmanError, ParseError
from fwman.driver.git import GIT_ENV, failure_text, git_target
from fwman.driver.versions import VERSION_FILE, parse_version_mk
from fwman.host.base import CommandResult, Host

PROBE_TIMEOUT = 1800.0  # depth-1 fetches of real fork branches, ~100 MB each


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
