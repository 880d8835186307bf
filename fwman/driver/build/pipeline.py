"""Building the patched modules for one kernel: source, object cache, ``make modules``, failure report.

The build runs in ``/var/cache/fwman/build/<kver>/``, a fresh copy of the source tree (never the fork checkout
itself, so two kernels never share kbuild state). The kernel tree is always named explicitly: Debian splits its
headers (``/lib/modules/KVER/build`` is the arch directory, ``source`` the common one), and
``SYSSRC=build`` alone makes the fork's conftests fail (``stdarg.h: No such file or directory``), so fwman
passes ``KERNEL_UNAME=KVER`` plus ``SYSSRC=<source> SYSOUT=<build>`` (both as the Host maps them, so a temp
root works too). Without them the build would target the *running* kernel.

:func:`parse_build_failure` turns a build log into the failing file and the compiler's first error.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.core import clock, paths
from fwman.core.errors import FwmanError, MissingError, UsageError
from fwman.driver.build import objcache
from fwman.driver.build.manifest import build_log_path
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.base import Host

Report = Callable[[str], None]

#: directories and files that are build products or VCS data, never part of a source identity
_SKIP_DIRS = {".git", "_out", "conftest", ".tmp_versions"}
_SKIP_SUFFIXES = (".o", ".ko", ".mod", ".mod.c", ".cmd", ".o_binary", ".order", ".symvers", ".d", ".a")


def _nothing(_: str) -> None:
    return None


@dataclass(frozen=True)
class Source:
    """A source tree ready to build, and what identifies it."""

    tree: str  # host path of the tree
    source_id: str  # the commit, or "tree:<sha256>" for a local directory that is not a clean git checkout
    commit: str | None
    fork: str | None
    branch: str | None
    location: str  # the --source directory or the fork URL

    @property
    def label(self) -> str:
        """Return a one-line description for messages."""
        if self.fork:
            return f"fork {self.fork} branch {self.branch} at {(self.commit or '?')[:12]}"
        ident = f"commit {self.commit[:12]}" if self.commit else self.source_id[:17]
        return f"local tree {self.location} ({ident})"


def _local(host: Host, path: str) -> str:
    local = host.local_path(path)
    if local is None:
        raise FwmanError(f"cannot build on {host.description}: no local filesystem path for {path}")
    return local


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
    result = host.run(argv, timeout=timeout, cwd=cwd, env={"GIT_TERMINAL_PROMPT": "0"})
    if result.missing:
        raise MissingError("git not found", hint="install git (apt install git)")
    if not result.ok:
        raise FwmanError(f"git {' '.join(args[:2])} failed: {result.stderr.strip().splitlines()[-1:] or '?'}")
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
        cwd = _local(host, directory)
        try:
            head = _git(host, ["rev-parse", "HEAD"], cwd=cwd)
            dirty = _git(host, ["status", "--porcelain", "--untracked-files=no"], cwd=cwd)
            commit = head if not dirty else None
        except FwmanError:
            commit = None
    source_id = commit or f"tree:{tree_hash(host, directory)}"
    return Source(directory, source_id, commit, None, None, directory)


def fork_url(fork: str) -> str:
    """Return a clonable URL for ``fork`` (``owner/name`` means GitHub; URLs and paths are used as given)."""
    if re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", fork) and not os.path.isabs(fork):
        return f"https://github.com/{fork}.git"
    return fork


def fork_cache_dir(url: str) -> str:
    """Return the host directory of the cached checkout of ``url``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", re.sub(r"^[a-z]+://", "", url)).strip("_")
    return f"{paths.SOURCE_CACHE_DIR}/{slug[:80]}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def fork_source(host: Host, fork: str, branch: str, report: Report = _nothing, fetch: bool = True) -> Source:
    """Clone or fetch ``branch`` of ``fork`` into the source cache, check it out and return the Source.

    The branch is resolved as ``refs/heads/<branch>`` (some P2P names also exist as tags). When the fetch
    fails but the branch was fetched before, the cached commit is used with a warning. Raises FwmanError
    when the branch cannot be had at all.
    """
    url = fork_url(fork)
    cache = fork_cache_dir(url)
    local = _local(host, cache)
    if not host.exists(f"{cache}/.git"):
        report(f"cloning {url} into {cache}")
        host.mkdir(cache)
        _git(host, ["init", "-q", local])
        _git(host, ["remote", "add", "origin", url], cwd=local)
    remote_ref = f"refs/remotes/origin/{branch}"
    if fetch:
        report(f"fetching {branch} from {url}")
        result = host.run(
            ["git", "fetch", "-q", "--depth=1", "origin", f"+refs/heads/{branch}:{remote_ref}"],
            cwd=local,
            timeout=1800,
            env={"GIT_TERMINAL_PROMPT": "0"},
        )
        if not result.ok:
            have = host.run(["git", "rev-parse", "--verify", "-q", remote_ref], cwd=local)
            if not have.ok:
                raise FwmanError(
                    f"cannot fetch branch {branch} of {url}: {result.stderr.strip().splitlines()[-1:] or '?'}",
                    hint="check the fork and branch names (`fwman driver branches`) and the network",
                )
            report(f"warning: fetch failed, building the cached {branch} ({have.stdout.strip()[:12]})")
    _git(host, ["checkout", "-q", "--force", "--detach", remote_ref], cwd=local)
    commit = _git(host, ["rev-parse", "HEAD"], cwd=local)
    return Source(cache, commit, commit, fork, branch, url)


def compiler_version(host: Host) -> str:
    """Return the first line of ``cc --version`` (part of the object-cache key). Raises MissingError without cc."""
    result = host.run(["cc", "--version"], timeout=30)
    if result.missing or not result.ok:
        raise MissingError("no C compiler (cc) found", hint="install gcc and make (apt install gcc make)")
    return result.stdout.splitlines()[0].strip() if result.stdout else "unknown"


def headers_present(host: Host, kver: str) -> bool:
    """Return True when kernel ``kver`` has headers to build against (``/lib/modules/KVER/build/include``)."""
    return host.is_dir(f"/lib/modules/{kver}/build/include")


def kernel_tree_args(host: Host, kver: str) -> list[str]:
    """Return the make variables that name ``kver``'s headers (split Debian headers handled)."""
    build = f"/lib/modules/{kver}/build"
    source = f"/lib/modules/{kver}/source"
    out = _local(host, build)
    src = _local(host, source) if host.is_dir(f"{source}/include") else out
    return [f"KERNEL_UNAME={kver}", f"SYSSRC={src}", f"SYSOUT={out}"]


@dataclass
class BuildFailure:
    """Where a build failed, as a person wants to read it."""

    file: str | None  # path relative to the source tree, e.g. kernel-open/nvidia/nv-pci.c
    line: int | None
    message: str  # the compiler's first error (or the tool's first complaint)
    excerpt: list[str] = field(default_factory=list)


_GCC_ERROR = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.+)$")
_CMDLINE_ERROR = re.compile(r"^<command-line>: (?:fatal )?error: (?P<msg>.+)$")
_LD_ERROR = re.compile(r"^(?:ld|.*/ld|ERROR): (?P<msg>.+)$")
_ENTERING = re.compile(r"^make(?:\[\d+\])?: (Entering|Leaving) directory '([^']+)'")
_MAKE_ERROR = re.compile(r"^make(?:\[\d+\])?: \*\*\* (?P<msg>.+)$")


def parse_build_failure(log: str, tree: str | None = None) -> BuildFailure:
    """Return the first error of a build log: the failing file (relative to ``tree``) and the message.

    Tries, in order: a compiler ``file:line:col: error:`` line, a ``<command-line>`` error, a linker or modpost
    ``ERROR:``, a line of the fork's conftest, make's first ``***`` line. Never raises.
    """
    lines = log.splitlines()
    prefix = (tree.rstrip("/") + "/") if tree else None

    def rel(path: str, directory: str | None) -> str:
        if not path.startswith("/") and directory:
            path = f"{directory.rstrip('/')}/{path}"  # relative to the sub-make's directory
        if prefix and path.startswith(prefix):
            return path[len(prefix) :]
        return path

    directories: list[str] = []
    for i, line in enumerate(lines):
        entering = _ENTERING.match(line)
        if entering:
            if entering.group(1) == "Entering":
                directories.append(entering.group(2))
            elif directories:
                directories.pop()
            continue
        m = _GCC_ERROR.match(line)
        if m:
            file = rel(m.group("file"), directories[-1] if directories else None)
            return BuildFailure(file, int(m.group("line")), m.group("msg").strip(), lines[i : i + 6])
    for pattern in (_CMDLINE_ERROR, _LD_ERROR):
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if m:
                return BuildFailure(None, None, m.group("msg").strip(), lines[i : i + 4])
    for i, line in enumerate(lines):
        if line.startswith("conftest:"):
            return BuildFailure(None, None, line.strip(), lines[max(0, i - 3) : i + 1])
    for i, line in enumerate(lines):
        m = _MAKE_ERROR.match(line)
        if m:
            return BuildFailure(None, None, m.group("msg").strip(), lines[max(0, i - 3) : i + 1])
    tail = [ln for ln in lines if ln.strip()][-1:] or ["the build failed without output"]
    return BuildFailure(None, None, tail[0].strip(), tail)


@dataclass
class CompileResult:
    """What ``make modules`` produced for one kernel."""

    kver: str
    ok: bool
    tree: str  # the build directory (host path)
    log_path: str
    cache_key: str
    cache_hit: bool
    compiler: str
    seconds: float
    modules: dict[str, str] = field(default_factory=dict)  # name -> host path of the built .ko
    failure: BuildFailure | None = None


def prepare_tree(host: Host, source: Source, kver: str) -> str:
    """Return a fresh build directory for ``kver`` holding a copy of ``source`` (no VCS data, no products)."""
    tree = f"{paths.BUILD_DIR}/{kver}"
    local_tree = _local(host, tree)
    local_src = _local(host, source.tree)
    host.mkdir(paths.BUILD_DIR)
    # tar keeps the sources' timestamps (older than any cached object) and skips .git and old products
    script = (
        f"rm -rf {shlex.quote(local_tree)} && mkdir -p {shlex.quote(local_tree)} && "
        f"tar -C {shlex.quote(local_src)} --exclude=.git --exclude=_out --exclude='*.o_binary' -cf - . | "
        f"tar -C {shlex.quote(local_tree)} -xf -"
    )
    result = host.run(["sh", "-c", script], timeout=1200)
    if not result.ok:
        raise FwmanError(f"cannot copy {source.location} to {tree}: {result.stderr.strip()}")
    return tree


def compile_for_kernel(
    host: Host, source: Source, kver: str, report: Report = _nothing, jobs: int | None = None
) -> CompileResult:
    """Build the five modules of ``source`` for ``kver`` and return what happened (never raises on make errors).

    The kernel-independent objects come from the object cache when an entry for (source, compiler) exists,
    and are stored there after the first build. The whole make output goes to ``/var/log/fwman/build-KVER.log``.
    Raises MissingError when the headers or the compiler are missing, FwmanError when the tree cannot be set up.
    """
    if not headers_present(host, kver):
        raise MissingError(
            f"no headers for kernel {kver} (/lib/modules/{kver}/build/include is missing)",
            hint=f"install the headers package (Debian: linux-headers-{kver}, Proxmox: proxmox-headers-{kver})",
        )
    compiler = compiler_version(host)
    key = objcache.cache_key(source.source_id, compiler)
    started = clock.monotonic()
    report(f"preparing the build tree for {kver} from {source.label}")
    tree = prepare_tree(host, source, kver)
    hit = objcache.has_entry(host, key)
    if hit:
        report("kernel-independent objects: from the object cache (kernel-open only)")
        objcache.restore(host, key, tree)
    else:
        report("kernel-independent objects: not cached, building them (the long part)")
    if host.which("make") is None:
        raise MissingError("make not found", hint="install make and gcc (apt install make gcc)")
    jobs = jobs or os.cpu_count() or 1
    # --output-sync=recurse: each sub-make's output comes out whole, so errors sit under their directory
    argv = ["make", f"-j{jobs}", "--output-sync=recurse", "modules", *kernel_tree_args(host, kver)]
    report(f"running {' '.join(argv)}")
    # stderr into stdout, so compiler errors stay next to make's "Entering directory" lines in the log
    result = host.run(["sh", "-c", 'exec "$@" 2>&1', "fwman-make", *argv], cwd=_local(host, tree), timeout=4 * 3600)
    seconds = clock.monotonic() - started
    log = f"$ {' '.join(argv)}\n# in {tree}, {source.label}\n{result.stdout}{result.stderr}"
    log_path = build_log_path(kver)
    host.write_bytes(log_path, log.encode())
    if not hit and objcache.store(host, key, tree):
        report("kernel-independent objects stored in the object cache")
    built = {name: f"{tree}/kernel-open/{name}.ko" for name in MODULE_NAMES}
    missing = [name for name, path in built.items() if not host.exists(path)]
    outcome = CompileResult(kver, False, tree, log_path, key, hit, compiler, seconds)
    if not result.ok:
        outcome.failure = parse_build_failure(result.stdout + result.stderr, _local(host, tree))
        return outcome
    if missing:
        outcome.failure = BuildFailure(None, None, f"make succeeded but produced no {', '.join(missing)}.ko")
        return outcome
    outcome.ok = True
    outcome.modules = built
    return outcome


def check_source_options(source_dir: str | None, fork: str | None, branch: str | None) -> None:
    """Raise UsageError unless exactly one of ``--source`` and ``--fork``/``--branch`` is given completely."""
    if source_dir and (fork or branch):
        raise UsageError("--source cannot be combined with --fork/--branch")
    if not source_dir and not (fork and branch):
        raise UsageError(
            "say what to build: --source DIR, or --fork OWNER/NAME --branch VERSION-p2p",
            hint="e.g. --fork aikitoria/open-gpu-kernel-modules --branch 570.86.16-p2p",
        )


# -- one kernel, end to end ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceSpec:
    """What to build from: a local tree, or a fork branch."""

    source_dir: str | None = None
    fork: str | None = None
    branch: str | None = None

    def describe(self) -> str:
        """Return the spec for messages."""
        return f"local tree {self.source_dir}" if self.source_dir else f"fork {self.fork} branch {self.branch}"

    def to_json(self) -> bytes:
        """Return the spec as JSON bytes."""
        import json

        doc = {"source": self.source_dir, "fork": self.fork, "branch": self.branch}
        return (json.dumps(doc, indent=2) + "\n").encode()


def load_source_spec(host: Host) -> SourceSpec | None:
    """Return the source the kernel hook and catch-up build from, or None when none is configured.

    ``[modules]`` in ``/etc/fwman/config.toml`` (``fork`` + ``branch``, or ``source``) wins; otherwise the
    source of the last ``fwman modules build`` (recorded in ``/var/lib/fwman/modules/source.json``). Raises
    UsageError when the configuration file is invalid.
    """
    import json

    from fwman.core.config import load_config

    config = load_config(host)
    fork, branch = config.get_str("modules", "fork"), config.get_str("modules", "branch")
    source_dir = config.get_str("modules", "source")
    if source_dir or (fork and branch):
        return SourceSpec(source_dir, None if source_dir else fork, None if source_dir else branch)
    if not host.exists(paths.MODULES_SOURCE_RECORD):
        return None
    try:
        doc = json.loads(host.read_bytes(paths.MODULES_SOURCE_RECORD).decode())
    except (ValueError, UnicodeDecodeError, MissingError):
        return None
    if not isinstance(doc, dict):
        return None
    spec = SourceSpec(doc.get("source") or None, doc.get("fork") or None, doc.get("branch") or None)
    if not spec.source_dir and not (spec.fork and spec.branch):
        return None
    return spec


def strict_mode(host: Host) -> bool:
    """Return ``[modules] strict`` from the configuration: a failed hook build then fails the kernel install."""
    from fwman.core.config import load_config

    return load_config(host).get_bool("modules", "strict", False)


def save_source_spec(host: Host, spec: SourceSpec) -> None:
    """Record ``spec`` as the source of later automatic builds."""
    host.write_bytes(paths.MODULES_SOURCE_RECORD, spec.to_json())


def resolve_source(host: Host, spec: SourceSpec, report: Report = _nothing, fetch: bool = True) -> Source:
    """Return the buildable Source for ``spec``. Raises as the two resolvers do.

    With ``fetch=False`` (the hook and the boot-time catch-up: a kernel install must not wait on the network) a
    fork already in the source cache is built at its cached commit; only a fork never fetched is cloned.
    """
    if spec.source_dir:
        return local_source(host, spec.source_dir)
    assert spec.fork and spec.branch
    cached = host.exists(f"{fork_cache_dir(fork_url(spec.fork))}/.git")
    return fork_source(host, spec.fork, spec.branch, report, fetch=fetch or not cached)


@dataclass
class KernelOutcome:
    """What happened for one kernel: built, current, pending (cannot build yet), failed, or skipped."""

    kver: str
    status: str  # "built" | "current" | "pending" | "failed" | "skipped"
    message: str
    source: Source | None = None
    failure: BuildFailure | None = None
    log_path: str | None = None
    cache_hit: bool | None = None
    seconds: float | None = None


def update_kernel(
    host: Host,
    kver: str,
    spec: SourceSpec,
    *,
    force: bool = False,
    fetch: bool = True,
    report: Report = _nothing,
    jobs: int | None = None,
) -> KernelOutcome:
    """Build, sign, install, depmod and verify the patched modules for ``kver``; record the result.

    Missing headers (or a source that cannot be fetched) mark the kernel pending. A failed build writes the
    failure marker and leaves the previous modules in place; the next attempt for the same (commit, kernel)
    is skipped unless ``force``. Success writes the manifest and clears both markers. Never raises for a
    build problem (the outcome says it); raises FwmanError for what needs a person (disk, permissions).
    """
    from fwman.driver.build import install
    from fwman.driver.build.manifest import (
        Manifest,
        Marker,
        failed_path,
        now_iso,
        pending_path,
        read_marker,
        write_manifest,
        write_marker,
    )
    from fwman.driver.kmod import sign
    from fwman.driver.kmod.kofile import read_module

    if not headers_present(host, kver):
        message = f"no headers for {kver} yet (/lib/modules/{kver}/build/include missing): marked pending"
        write_marker(host, pending_path(kver), Marker(kver, "no headers"))
        return KernelOutcome(kver, "pending", message)
    try:
        source = resolve_source(host, spec, report, fetch=fetch)
    except FwmanError as e:
        write_marker(host, pending_path(kver), Marker(kver, f"source unavailable: {e.message}"))
        return KernelOutcome(kver, "pending", f"cannot get the source ({e.message}): marked pending")
    failed = read_marker(host, failed_path(kver))
    if failed is not None and failed.commit == source.source_id and not force:
        message = (
            f"the build of {source.label} for {kver} failed before ({failed.at}: {failed.reason}); not retried "
            f"(run `fwman modules build --kernel {kver} --force` after fixing the cause)"
        )
        return KernelOutcome(kver, "skipped", message, source)
    result = compile_for_kernel(host, source, kver, report, jobs)
    outcome = KernelOutcome(
        kver, "failed", "", source, log_path=result.log_path, cache_hit=result.cache_hit, seconds=result.seconds
    )

    def fail(failure: BuildFailure) -> KernelOutcome:
        detail = {"log": result.log_path, "message": failure.message}
        if failure.file:
            detail["file"] = failure.file
        if failure.line is not None:
            detail["line"] = str(failure.line)
        marker = Marker(kver, failure.message, commit=source.source_id, fork=source.fork, branch=source.branch)
        marker.detail = detail
        write_marker(host, failed_path(kver), marker)
        host.unlink(pending_path(kver))
        outcome.failure = failure
        where = f"{failure.file}:{failure.line}: " if failure.file else ""
        outcome.message = f"build for {kver} FAILED: {where}{failure.message}"
        return outcome

    if not result.ok:
        assert result.failure is not None
        return fail(result.failure)
    built = {name: host.read_bytes(path) for name, path in result.modules.items()}
    for name, data in built.items():
        info = read_module(data)
        if info.kernel_release != kver:
            return fail(BuildFailure(None, None, f"{name}.ko has vermagic {info.vermagic!r}, not for {kver}"))
    signed: str | None = None
    key = sign.configured_key(host)
    if key is not None:
        built, signed = sign.sign_for_kernel(host, kver, built, key)
        report(f"signed the modules with {key.cert} ({signed})")
    entries = install.install_modules(host, kver, built)
    install.run_depmod(host, kver)
    manifest = Manifest(
        kernel=kver,
        fork=source.fork,
        branch=source.branch,
        commit=source.commit or source.source_id,
        modules=entries,
        built_at=now_iso(),
        source=source.location,
        compiler=result.compiler,
        signed=signed,
        object_cache_hit=result.cache_hit,
    )
    bad = [c for c in install.check_installed(host, manifest) if not c.ok]
    if bad:
        return fail(BuildFailure(None, None, f"installed but not in effect: {bad[0].name}: {bad[0].problem}"))
    write_manifest(host, manifest)
    host.unlink(failed_path(kver))
    host.unlink(pending_path(kver))
    outcome.status = "built"
    hit = "object cache hit" if result.cache_hit else "full build"
    outcome.message = f"built and installed for {kver} from {source.label} ({hit}, {result.seconds:.1f}s)"
    return outcome


def source_version(host: Host, source: Source) -> str | None:
    """Return the driver version a source builds (from its branch name, else its ``version.mk``), or None."""
    from fwman.driver.versions import parse_p2p_branch

    if source.branch:
        parsed = parse_p2p_branch(source.branch)
        if parsed is not None:
            return str(parsed)
    for rel in ("version.mk", "utils.mk"):
        path = f"{source.tree}/{rel}"
        if host.exists(path):
            m = re.search(r"^NVIDIA_VERSION\s*[:?]?=\s*(\S+)", host.read_text(path), re.MULTILINE)
            if m:
                return m.group(1)
    return None


def newer_branches(host: Host, source: Source) -> list[str]:
    """Return ``fork: branch`` for every cached P2P branch newer than ``source``'s version (no network).

    Uses the branch cache of ``fwman driver branches`` (``/var/cache/fwman/branches.json``); [] when the
    version or the cache is unknown.
    """
    from fwman.driver import forks
    from fwman.driver.versions import DriverVersion, parse_p2p_branch

    text = source_version(host, source)
    if text is None:
        return []
    try:
        current = DriverVersion.parse(text)
    except FwmanError:
        return []
    found: list[tuple[DriverVersion, str]] = []
    for url, entry in forks.load_cache(host).items():
        name = str(entry.get("fork") or url)
        for branch in entry.get("branches") or []:
            parsed = parse_p2p_branch(str(branch))
            if parsed is not None and current < parsed:
                found.append((parsed, f"{name}: {branch}"))
    return [label for _v, label in sorted(found, key=lambda item: item[0].key)]
