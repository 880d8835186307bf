"""The source cache of a fork: one checkout per fork URL, there complete and verified, or not there at all.

``/var/cache/fwman/src/<slug>/`` holds a git checkout of one branch of one fork at one commit. It is never
changed in place: every clone, every move of the branch and every switch to another branch is made in a scratch
directory beside it (``<slug>.partial``), verified (the commit wanted is checked out, every tracked file is
there unchanged, the module tree has its ``Makefile`` and ``kernel-open/``), and only then renamed into place
(the previous checkout moved aside to ``<slug>.old`` first and removed after). A run killed at any point leaves
the old checkout, the new one, or none, plus a scratch directory the next run removes.

Before every use the checkout is verified again; one that fails (left half-made by an older fwman, a full disk,
hands in the directory) is removed through the Host and made again, with one line saying so. The callers hold
the module lock (:mod:`fwman.driver.build.lock`), so two runs never build the same scratch directory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from fwman.core import names, paths
from fwman.core.errors import MissingError
from fwman.driver.forks.model import Fork
from fwman.driver.git import GIT_ENV, failure_text, git_target, stderr_tail
from fwman.driver.localfs import local_dir
from fwman.host.actions import Tell, silent
from fwman.host.base import CommandResult, Host

FETCH_TIMEOUT = 1800.0  # a depth-1 fetch of the real fork is ~100 MB
LIST_TIMEOUT = 60.0


class SourceError(MissingError):
    """The fork's source cannot be had: the remote cannot be reached, it has no such branch, or what was fetched
    does not verify. Not a missing-headers problem: it names the fork, the URL, the branch and git's reason.

    ``git_stderr`` is the end of git's stderr (bounded: :func:`fwman.driver.git.stderr_tail`), "" when git was
    not the problem.
    """

    def __init__(self, message: str, *, fork: str, url: str, branch: str, git_stderr: str = "") -> None:
        super().__init__(message, source_hint(fork, branch))
        self.fork = fork
        self.url = url
        self.branch = branch
        self.git_stderr = git_stderr

    def for_kernel(self, kver: str) -> SourceError:
        """Return this error with a hint whose command names ``kver``."""
        again = SourceError(self.message, fork=self.fork, url=self.url, branch=self.branch, git_stderr=self.git_stderr)
        again.hint = source_hint(self.fork, self.branch, kver)
        return again

    def to_json(self) -> dict[str, str]:
        """Return the ``source_error`` object of ``fwman.modules-build/2``."""
        return {k: getattr(self, k) for k in ("message", "fork", "url", "branch", "git_stderr")} | {
            "hint": self.hint or ""
        }


def _source_error(fork: Fork, branch: str, message: str, git_stderr: str = "") -> SourceError:
    """Return the SourceError ``message`` about ``branch`` of ``fork``."""
    return SourceError(message, fork=fork.name, url=fork.url, branch=branch, git_stderr=git_stderr)


def source_hint(fork: str, branch: str, kver: str | None = None) -> str:
    """Return what to run about a source that cannot be had (the headers are not the problem)."""
    target = f"--kernel {kver}" if kver else "--all"
    return (
        f"the kernel headers are not the problem: check that fork {fork} is reachable and has branch {branch} "
        f"(`fwman driver branches --fork {fork}`), then run `fwman modules build {target}`; another source: "
        "[modules] fork/branch in /etc/fwman/config.toml, or --fork F --branch B"
    )


@dataclass(frozen=True)
class Checkout:
    """A verified checkout in the source cache."""

    directory: str  # host path
    commit: str


def cache_dir(url: str) -> str:
    """Return the host directory of the cached checkout of ``url``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", re.sub(r"^[a-z]+://", "", url)).strip("_")
    return f"{paths.SOURCE_CACHE_DIR}/{slug[:80]}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def _git(host: Host, args: Sequence[str], cwd: str | None = None, timeout: float = 600.0) -> CommandResult:
    """Run git; raises MissingError when git is not installed."""
    result = host.run(["git", *args], cwd=cwd, timeout=timeout, env=GIT_ENV)
    if result.missing:
        raise MissingError("git not found", hint="install git (apt install git)")
    return result


def verify(host: Host, directory: str, target: str, commit: str | None = None) -> str | None:
    """Return why ``directory`` is not a complete checkout of ``target`` (at ``commit`` when given), or None.

    Complete: a git repository whose ``origin`` is ``target``, with a commit checked out, every tracked file
    present and unchanged (``git status``), and the module tree's ``Makefile`` and ``kernel-open/``.
    """
    if not host.is_dir(f"{directory}/.git"):
        return "no .git directory"
    local = local_dir(host, directory)
    head = _git(host, ["rev-parse", "--verify", "-q", "HEAD^{commit}"], cwd=local)
    if not head.ok:
        return "no commit checked out"
    origin = _git(host, ["config", "--get", "remote.origin.url"], cwd=local).stdout.strip()
    if origin != target:
        return f"its origin is {origin or 'not set'}, not {target}"
    if commit is not None and head.stdout.strip() != commit:
        return f"{head.stdout.strip()[:12]} is checked out, not {commit[:12]}"
    if not host.exists(f"{directory}/Makefile") or not host.is_dir(f"{directory}/kernel-open"):
        return "no Makefile and kernel-open/ (not an open-gpu-kernel-modules tree)"
    status = _git(host, ["status", "--porcelain", "--untracked-files=no"], cwd=local)
    if not status.ok:
        return failure_text("git status", status.rc, status.stderr)
    changed = [line for line in status.stdout.splitlines() if line.strip()]
    if changed:
        return f"{len(changed)} tracked files missing or changed (first: {changed[0].strip()})"
    return None


def _rev(host: Host, directory: str, ref: str) -> str | None:
    result = _git(host, ["rev-parse", "--verify", "-q", f"{ref}^{{commit}}"], cwd=local_dir(host, directory))
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def cached_commit(host: Host, url: str, branch: str, tag: bool = False) -> str | None:
    """Return the commit of ``branch`` (a tag with ``tag``) in the source cache of fork ``url``, or None when it is
    not cached. Reads only (a dry run's question: which commit would a build without the network use)."""
    cache = cache_dir(url)
    if not host.is_dir(f"{cache}/.git"):
        return None
    return _rev(host, cache, refs(branch, tag)[1])


def refs(branch: str, tag: bool = False) -> tuple[str, str]:
    """Return (the remote ref, the ref it is fetched to in the checkout) of ``branch``, or of tag ``branch``."""
    if tag:  # a donor-patch fork builds NVIDIA's upstream tag (fwman.driver.forks.model.DonorPatch)
        return f"refs/tags/{branch}", f"refs/fwman-tags/{branch}"
    return f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"


def remote_commit(host: Host, fork: Fork, branch: str, tag: bool = False) -> str:
    """Return the commit ``refs/heads/<branch>`` (``refs/tags/<branch>`` with ``tag``: an annotated tag's commit)
    of ``fork`` points at now (``git ls-remote``; no download).

    Raises SourceError when the remote cannot be listed or has no such branch (tag).
    """
    ref = refs(branch, tag)[0]
    kind = "--tags" if tag else "--heads"
    asked = [ref, f"{ref}^{{}}"] if tag else [ref]  # an annotated tag's commit is listed only when asked for
    result = _git(host, ["ls-remote", kind, "--", git_target(host, fork.url), *asked], timeout=LIST_TIMEOUT)
    if not result.ok:
        raise _source_error(
            fork,
            branch,
            f"cannot reach fork {fork.name} ({fork.url}) for branch {branch}: "
            + failure_text("git ls-remote", result.rc, result.stderr),
            stderr_tail(result.stderr),
        )
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() in (ref, ref + "^{}") and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha.strip()):
            found[name.strip()] = sha.strip()
    if found:  # an annotated tag's ^{} line is its commit
        return found.get(ref + "^{}", found.get(ref, ""))
    what = f"tag {branch}" if tag else f"branch {branch} (a tag of that name does not count)"
    raise _source_error(fork, branch, f"fork {fork.name} ({fork.url}) has no {what}")


def ensure_checkout(
    host: Host, fork: Fork, branch: str, tell: Tell = silent, fetch: bool = True, tag: bool = False
) -> Checkout:
    """Return a verified checkout of ``branch`` of ``fork`` in the source cache, making it when needed.

    With ``fetch`` the remote is asked (``git ls-remote``) which commit the branch is at, and that commit is
    checked out; when the remote cannot be reached but the branch is cached, the cached commit is used with a
    warning. Without ``fetch`` (the hook and the boot-time catch-up: a kernel install must not wait on the
    network) the cached commit of the branch is used, and only a branch never fetched is fetched. A cached
    checkout that does not verify is removed and made again (one report line). With ``tag``, ``branch`` is a tag
    (a donor-patch fork's upstream release), fetched and checked out the same way. Raises SourceError when the
    branch cannot be had, UsageError for a URL git must not be handed, MissingError without git.
    """
    names.branch_name(branch)
    cache = cache_dir(fork.url)
    target = git_target(host, fork.url)
    scratch, old = f"{cache}.partial", f"{cache}.old"  # the names _swap_in uses
    host.mkdir(paths.SOURCE_CACHE_DIR)
    if host.exists(scratch) or host.is_link(scratch):
        host.remove_tree(scratch)  # left by a run that was killed while fetching
    if not host.exists(cache) and host.exists(old) and verify(host, old, target) is None:
        host.rename(old, cache)  # a swap killed between its two renames: the previous checkout is whole
    if host.exists(old) or host.is_link(old):
        host.remove_tree(old)
    if host.exists(cache) or host.is_link(cache):
        problem = verify(host, cache, target)
        if problem is not None:
            tell(f"source cache {cache} is not a complete checkout ({problem}): removed, fetching {branch} again")
            host.remove_tree(cache)
    present = host.exists(cache)
    cached = _rev(host, cache, refs(branch, tag)[1]) if present else None
    head = _rev(host, cache, "HEAD") if present else None
    wanted = cached
    if fetch or cached is None:
        try:
            wanted = remote_commit(host, fork, branch, tag)
        except SourceError as e:
            if cached is None:
                raise
            tell(f"warning: {e.message}\nbuilding the cached {branch} ({cached[:12]})")
    if present and wanted is not None and wanted == head:
        return Checkout(cache, wanted)
    seed = local_dir(host, cache) if present and wanted is not None and wanted == cached else None
    try:
        return _swap_in(host, fork, branch, target, cache, seed, tell, present, tag)
    except SourceError as e:
        if seed is not None or cached is None:
            raise
        # the branch moved, but fetching it failed: build the commit fetched before, as when it cannot be listed
        tell(f"warning: {e.message}\nbuilding the cached {branch} ({cached[:12]})")
        if head == cached:
            return Checkout(cache, cached)
        return _swap_in(host, fork, branch, target, cache, local_dir(host, cache), tell, present, tag)


def _swap_in(
    host: Host,
    fork: Fork,
    branch: str,
    target: str,
    cache: str,
    seed: str | None,
    tell: Tell,
    present: bool,
    tag: bool = False,
) -> Checkout:
    """Make the checkout in ``<cache>.partial``, verify it, and rename it into place (the old one aside first).

    Raises SourceError when it cannot be made or does not verify; the scratch directory is gone either way.
    """
    scratch, old = f"{cache}.partial", f"{cache}.old"
    try:
        commit = _make_scratch(host, fork, branch, target, scratch, seed, tell, tag)
        problem = verify(host, scratch, target, commit)
        if problem is not None:
            raise _source_error(
                fork, branch, f"the checkout of {branch} of fork {fork.name} ({fork.url}) does not verify: {problem}"
            )
        if present:
            host.rename(cache, old)
        host.rename(scratch, cache)
    except BaseException:
        if host.exists(scratch):
            host.remove_tree(scratch)
        raise
    if present:
        host.remove_tree(old)
    return Checkout(cache, commit)


def _make_scratch(
    host: Host, fork: Fork, branch: str, target: str, scratch: str, seed: str | None, tell: Tell, tag: bool = False
) -> str:
    """Fetch ``branch`` into a new repository at ``scratch`` and check it out; return the commit checked out.

    ``seed`` is the local path of the current checkout when it already holds the commit wanted (a switch back to
    a cached branch: no network), else None (fetched from ``target``). Raises SourceError when git fails.
    """
    host.mkdir(scratch)
    local = local_dir(host, scratch)
    upstream_ref, remote_ref = refs(branch, tag)

    def fail(what: str, result: CommandResult) -> SourceError:
        git = f"git {result.argv[1] if len(result.argv) > 1 else ''}".strip()
        message = f"cannot {what} branch {branch} of fork {fork.name} ({fork.url}): "
        return _source_error(
            fork, branch, message + failure_text(git, result.rc, result.stderr), stderr_tail(result.stderr)
        )

    for args in (["init", "-q", "--", local], ["remote", "add", "--", "origin", target]):
        result = _git(host, args, cwd=local)
        if not result.ok:
            raise fail("set up a checkout for", result)
    if seed is not None:
        tell(f"checking out the cached {branch} of {fork.name}")
        refspec = [seed, f"+{remote_ref}:{remote_ref}"]
    else:
        tell(f"fetching {branch} from {fork.url}")
        refspec = ["origin", f"+{upstream_ref}:{remote_ref}"]
    result = _git(host, ["fetch", "-q", "--depth=1", "--", *refspec], cwd=local, timeout=FETCH_TIMEOUT)
    if not result.ok:
        raise fail("fetch", result)
    commit = _rev(host, scratch, remote_ref)
    if commit is None:
        raise fail("fetch", result)
    # a commit, never a ref name: nothing git could read as a path
    result = _git(host, ["-c", "advice.detachedHead=false", "checkout", "-q", "--force", "--detach", commit], cwd=local)
    if not result.ok:
        raise fail("check out", result)
    return commit
