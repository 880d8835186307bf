"""Where the patched modules come from: a local tree or a fork branch, and which one the hooks build.

A :class:`SourceSpec` is what to build from (``--source DIR``, or ``--fork`` + ``--branch``); it is remembered
(``/var/lib/fwman/modules/source.json``) unless ``[modules]`` of ``/etc/fwman/config.toml`` names one.
:func:`resolve_source` turns a spec into a :class:`Source`: a tree on disk and the identity (commit, or a hash
of the files) the object cache and the failure markers key on. Building it is :mod:`fwman.driver.build.pipeline`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.config import load_config
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json
from fwman.driver.build.checkout import cached_commit, ensure_checkout
from fwman.driver.build.donor import donor_patch
from fwman.driver.build.patches import KernelPatch
from fwman.driver.forks.config import resolve_fork
from fwman.driver.forks.model import Fork
from fwman.driver.git import GIT_ENV, failure_text
from fwman.driver.localfs import local_dir
from fwman.driver.versions import parse_p2p_branch, parse_version_mk, revisions
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

#: directories and files that are build products or VCS data, never part of a source identity
_SKIP_DIRS = {".git", "_out", "conftest", ".tmp_versions"}
_SKIP_SUFFIXES = (".o", ".ko", ".mod", ".mod.c", ".cmd", ".o_binary", ".order", ".symvers", ".d", ".a")


@dataclass(frozen=True)
class Source:
    """A source tree ready to build, and what identifies it."""

    tree: str  # host path of the tree
    source_id: str  # the commit, or "tree:<sha256>" for a local directory that is not a clean git checkout
    commit: str | None
    fork: str | None
    branch: str | None
    location: str  # the --source directory or the fork URL
    #: a donor-patch fork: the verified patch applied in the build tree to the upstream tag ``branch``
    donor_patch: KernelPatch | None = None

    @property
    def label(self) -> str:
        """Return a one-line description for messages."""
        if self.fork and self.donor_patch is not None:
            return (
                f"fork {self.fork}: upstream tag {self.branch} ({(self.commit or '?')[:12]}) + patch "
                f"{self.donor_patch.sha256[:12]}"
            )
        if self.fork:
            return f"fork {self.fork} branch {self.branch} at {(self.commit or '?')[:12]}"
        ident = f"commit {self.commit[:12]}" if self.commit else self.source_id[:17]
        return f"local tree {self.location} ({ident})"


def tree_hash(host: Host, tree: str) -> str:
    """Return the SHA-256 over every source file of ``tree`` (relative path and content), build products excluded.

    Raises MissingError when ``tree`` is not a readable directory.
    """
    digest = hashlib.sha256()

    def walk(rel: str) -> None:
        here = f"{tree}/{rel}" if rel else tree
        for name in host.listdir(here):
            child = f"{rel}/{name}" if rel else name
            path = f"{tree}/{child}"
            if host.is_link(path):
                digest.update(f"L {child} {host.readlink(path)}\0".encode())
            elif host.is_dir(path):
                if name not in _SKIP_DIRS:
                    walk(child)
            elif not name.endswith(_SKIP_SUFFIXES):
                digest.update(f"F {child}\0".encode())
                digest.update(hashlib.sha256(host.read_bytes(path)).digest())

    walk("")
    return digest.hexdigest()


def _git(host: Host, args: list[str], cwd: str | None = None, timeout: float = 600) -> str:
    argv = ["git", *args]
    result = host.run(argv, timeout=timeout, cwd=cwd, env=GIT_ENV)
    if result.missing:
        raise MissingError("git not found", hint="install git (apt install git)")
    if not result.ok:
        raise FwmanError(failure_text(f"git {' '.join(args[:2])}", result.rc, result.stderr))
    return result.stdout.strip()


def local_source(host: Host, directory: str) -> Source:
    """Return the Source for a local tree (``--source DIR``, a host path).

    A clean git checkout is identified by its commit; anything else by a hash of its files. Raises
    MissingError when the directory has no top-level Makefile.
    """
    directory = directory.rstrip("/") or "/"
    if not host.exists(f"{directory}/Makefile") or not host.is_dir(f"{directory}/kernel-open"):
        raise MissingError(
            f"{directory} is not an open-gpu-kernel-modules tree (no Makefile and kernel-open/)",
            hint="pass the top directory of a checkout of the P2P fork",
        )
    commit = None
    if host.exists(f"{directory}/.git"):
        cwd = local_dir(host, directory)
        with contextlib.suppress(FwmanError):
            head = _git(host, ["rev-parse", "HEAD"], cwd=cwd)
            commit = head if not _git(host, ["status", "--porcelain", "--untracked-files=no"], cwd=cwd) else None
    source_id = commit or f"tree:{tree_hash(host, directory)}"
    return Source(directory, source_id, commit, None, None, directory)


def fork_source(host: Host, fork: Fork, branch: str, tell: Tell = silent, fetch: bool = True) -> Source:
    """Return the Source of ``branch`` of ``fork``: a verified checkout in the source cache (made when needed).

    The branch is ``refs/heads/<branch>`` (some P2P names also exist as tags); for a donor-patch fork it is the
    upstream tag ``refs/tags/<branch>``, and the fork's pinned patch is had and verified first (VerificationError
    on a sha256 mismatch: nothing is fetched or built). See
    :func:`fwman.driver.build.checkout.ensure_checkout` for when the network is used and how a damaged cache is
    repaired. Raises SourceError when the branch cannot be had.
    """
    if fork.donor is not None:
        # the patch first: one that does not verify stops here, before the upstream tag is fetched
        patch = donor_patch(host, fork, tell)
        checkout = ensure_checkout(host, fork, branch, tell, fetch=fetch, tag=True)
        # the patch's digest is part of the identity: the object cache and the failure markers key on it
        source_id = f"{checkout.commit}+patch:{patch.sha256}"
        return Source(checkout.directory, source_id, checkout.commit, fork.name, branch, fork.url, patch)
    checkout = ensure_checkout(host, fork, branch, tell, fetch=fetch)
    return Source(checkout.directory, checkout.commit, checkout.commit, fork.name, branch, fork.url)


def check_source_options(source_dir: str | None, fork: str | None, branch: str | None) -> None:
    """Raise UsageError unless exactly one of ``--source`` and ``--fork``/``--branch`` is given completely."""
    if source_dir and (fork or branch):
        raise UsageError("--source cannot be combined with --fork/--branch")
    if not source_dir and not (fork and branch):
        raise UsageError(
            "say what to build: --source DIR, or --fork F --branch VERSION-p2p",
            hint="e.g. --fork aikitoria --branch 570.86.16-p2p (a fork name from `fwman driver branches`, "
            "NAME=URL, or a repository URL)",
        )


@dataclass(frozen=True)
class SourceSpec:
    """What to build from: a local tree, or a fork branch.

    ``fork`` is the text that named the fork (a known name, ``NAME=URL`` or a URL), resolved by
    :func:`fwman.driver.forks.config.resolve_fork` each time it is used, so a name follows ``[forks]``; ``origin`` says
    where that text came from, for messages (not recorded).
    """

    source_dir: str | None = None
    fork: str | None = None
    branch: str | None = None
    origin: str = field(default="--fork", compare=False)

    def describe(self) -> str:
        """Return the spec for messages."""
        return f"local tree {self.source_dir}" if self.source_dir else f"fork {self.fork} branch {self.branch}"

    def to_json(self) -> bytes:
        """Return the spec as JSON bytes."""
        doc = {"source": self.source_dir, "fork": self.fork, "branch": self.branch}
        return (json.dumps(doc, indent=2) + "\n").encode()


def load_source_spec(host: Host) -> SourceSpec | None:
    """Return the source the kernel hook and catch-up build from, or None when none is configured.

    ``[modules]`` in ``/etc/fwman/config.toml`` (``fork`` + ``branch``, or ``source``) wins; otherwise the
    source of the last ``fwman modules build`` (recorded in ``/var/lib/fwman/modules/source.json``). Raises
    UsageError when the configuration file is invalid, VerificationError when the record is unreadable.
    """
    config = load_config(host)
    fork, branch = config.get_str("modules", "fork"), config.get_str("modules", "branch")
    source_dir = config.get_str("modules", "source")
    if source_dir:
        return SourceSpec(source_dir, None, None, origin=f"{config.path}: [modules] source")
    if fork and branch:
        return SourceSpec(None, fork, branch, origin=f"{config.path}: [modules] fork")
    if not host.exists(paths.MODULES_SOURCE_RECORD):
        return None

    def unreadable(why: str) -> VerificationError:
        # never "no module source configured": the hook would then mark kernels pending instead of building
        return VerificationError(
            f"unreadable module source record {paths.MODULES_SOURCE_RECORD}: {why}",
            hint="`fwman plan` names the fork and branch for this box; `sudo fwman apply` builds them and records "
            "them again",
        )

    try:
        doc = parse_json(host.read_bytes(paths.MODULES_SOURCE_RECORD), "module source record")
    except ParseError as e:
        raise unreadable(e.detail[:120]) from e
    except MissingError as e:
        raise unreadable((str(e).splitlines() or [type(e).__name__])[0][:120]) from e
    if not isinstance(doc, dict) or not all(
        v is None or isinstance(v, str) for v in (doc.get("source"), doc.get("fork"), doc.get("branch"))
    ):
        raise unreadable("not an object of source/fork/branch strings")
    spec = SourceSpec(
        doc.get("source") or None, doc.get("fork") or None, doc.get("branch") or None, paths.MODULES_SOURCE_RECORD
    )
    if not spec.source_dir and not (spec.fork and spec.branch):
        raise unreadable("names neither a source directory nor a fork and branch")
    return spec


def strict_mode(host: Host) -> bool:
    """Return ``[modules] strict`` from the configuration: a failed hook build then fails the kernel install."""
    return load_config(host).get_bool("modules", "strict", False)


def save_source_spec(host: Host, spec: SourceSpec) -> None:
    """Record ``spec`` as the source of later automatic builds."""
    host.write_bytes(paths.MODULES_SOURCE_RECORD, spec.to_json())


def resolve_fork_of(host: Host, spec: SourceSpec) -> Fork:
    """Return the fork ``spec`` names, resolved against the configuration (the one resolver).

    Raises UsageError for a bad configuration or a name that is not a known fork.
    """
    assert spec.fork
    return resolve_fork(load_config(host), spec.fork, spec.origin)


def resolve_source(host: Host, spec: SourceSpec, tell: Tell = silent, fetch: bool = True) -> Source:
    """Return the buildable Source for ``spec``.

    With ``fetch=False`` (the hook and the boot-time catch-up: a kernel install must not wait on the network) a
    branch already in the source cache is built at its cached commit; only a branch never fetched is fetched.
    Raises UsageError for a fork name that is not known, SourceError when the branch cannot be had,
    MissingError when ``--source`` is not a module tree.
    """
    if spec.source_dir:
        return local_source(host, spec.source_dir)
    assert spec.fork and spec.branch
    return fork_source(host, resolve_fork_of(host, spec), spec.branch, tell, fetch=fetch)


def cached_source_id(host: Host, spec: SourceSpec) -> str | None:
    """Return the identity (:attr:`Source.source_id`) a build of ``spec`` without the network would have, reading
    only: a local tree's commit or hash, a fork branch's cached commit (plus a donor fork's pinned patch digest);
    None when it cannot be known without fetching (never fetched, a fork name not known)."""
    try:
        if spec.source_dir:
            return local_source(host, spec.source_dir).source_id
        fork = resolve_fork_of(host, spec)
    except FwmanError:
        return None
    assert spec.branch
    commit = cached_commit(host, fork.url, spec.branch, tag=fork.donor is not None)
    if commit is None or fork.donor is None:
        return commit
    return f"{commit}+patch:{fork.donor.sha256}"


def tree_version(host: Host, tree: str) -> str | None:
    """Return the ``NVIDIA_VERSION`` the tree's ``version.mk`` (else ``utils.mk``) sets, or None. Never raises for
    a file that is missing or not recorded.

    The line is read by :func:`fwman.driver.versions.parse_version_mk`, the one grammar of it: a whole
    ``NVIDIA_VERSION = X`` line whose X is a driver version; a file without one counts as not saying.
    """
    for rel in ("version.mk", "utils.mk"):
        try:
            return str(parse_version_mk(host.read_text(f"{tree.rstrip('/')}/{rel}")))
        except (MissingError, NotRecordedError, ParseError):
            continue
    return None


def source_version(host: Host, source: Source) -> str | None:
    """Return the driver version a source builds (from its tree's ``version.mk``, else its branch name, a hint),
    or None."""
    found = tree_version(host, source.tree)
    if found is not None:
        return found
    parsed = parse_p2p_branch(source.branch) if source.branch else None
    return str(parsed) if parsed is not None else None


def newer_branches(host: Host, source: Source) -> list[str]:
    """Return ``fork: branch`` for every cached P2P branch newer than ``source``'s version (no network).

    Uses the branch cache of ``fwman driver branches`` (``/var/cache/fwman/branches.json``); [] when the
    version or the cache is unknown.
    """
    from fwman.core.driver_version import DriverVersion
    from fwman.driver.forks.cache import load_cache, load_trees

    text = source_version(host, source)
    if text is None:
        return []
    try:
        current = DriverVersion.parse(text)
    except FwmanError:
        return []
    found: list[tuple[DriverVersion, str]] = []
    trees = load_trees(host)
    for url, entry in load_cache(host).items():
        name = str(entry.get("fork") or url)
        raw = entry.get("commits")
        commits = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        branches = [str(b) for b in entry.get("branches") or []]
        # what each P2P branch's tree builds (read by `fwman driver branches`), else its name's version
        for rev in revisions(branches, commits, trees):
            parsed = rev.driver_version()
            if parsed is not None and current < parsed:
                found.append((parsed, f"{name}: {rev.branch}"))
    return [label for _v, label in sorted(found, key=lambda item: item[0].key)]
