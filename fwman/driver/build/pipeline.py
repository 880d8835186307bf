"""Building the patched modules for one kernel: source, object cache, ``make modules``, failure report.

The build runs in ``/var/cache/fwman/build/<kver>/``, a fresh copy of the source tree (never the fork checkout
itself, so two kernels never share kbuild state). The kernel tree is always named explicitly: Debian splits its
headers (``/lib/modules/KVER/build`` is the arch directory, ``source`` the common one), and
``SYSSRC=build`` alone makes the fork's conftests fail (``stdarg.h: No such file or directory``), so fwman
passes ``KERNEL_UNAME=KVER`` plus ``SYSSRC=<source> SYSOUT=<build>`` (both as the Host maps them, so a temp
root works too). Without them the build would target the *running* kernel.

:func:`~fwman.driver.build.failure.parse_build_failure` turns a build log into its first cause (a missing tool, a
missing header, the first compiler error).
"""

from __future__ import annotations

import contextlib
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from fwman.core import clock, paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.build import compat, objcache, toolchain
from fwman.driver.build import patches as kpatches
from fwman.driver.build.attempt import Attempt, headers_fingerprint, retry_reason
from fwman.driver.build.checkout import SourceError
from fwman.driver.build.failure import BuildFailure, parse_build_failure
from fwman.driver.build.manifest import Manifest, Marker, build_log_path
from fwman.driver.build.patches import KernelPatch
from fwman.driver.build.progress import PhaseLog, Progress, ProgressSink, end_line, expected_from_log
from fwman.driver.build.source import Source, SourceSpec, resolve_source
from fwman.driver.kernels import headers_present
from fwman.driver.localfs import local_dir
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import RemoveFile, Report, apply_all, silent
from fwman.host.base import CommandResult, Host
from fwman.host.local import cpu_count


def compiler_version(host: Host) -> str:
    """Return the first line of ``cc --version`` (part of the object-cache key). Raises MissingError without cc."""
    result = host.run(["cc", "--version"], timeout=30)
    if result.missing or not result.ok:
        raise MissingError("no C compiler (cc) found", hint="install gcc and make (apt install gcc make)")
    return result.stdout.splitlines()[0].strip() if result.stdout else "unknown"


@dataclass(frozen=True)
class KernelTree:
    """Where a build finds a kernel's headers, and where it works, when that is not the installed kernel's.

    The pre-flight (:mod:`fwman.driver.preflight`) builds against headers unpacked into a scratch root, in a
    build directory and with a log of its own, so that nothing of an installed kernel's build state is touched.
    """

    build: str  #: the headers' build directory (what ``/lib/modules/KVER/build`` points to): SYSOUT
    source: str | None  #: the common headers (``/lib/modules/KVER/source``) when split from ``build``: SYSSRC
    workdir: str  #: the build directory the source tree is copied to
    log: str  #: the build log


def kernel_tree_args(host: Host, kver: str, headers: KernelTree | None = None) -> list[str]:
    """Return the make variables that name ``kver``'s headers (split Debian headers handled).

    ``headers`` names headers outside ``/lib/modules/KVER`` (the pre-flight's scratch root).
    """
    build = headers.build if headers is not None else f"{paths.modules_dir(kver)}/build"
    source = (headers.source or build) if headers is not None else f"{paths.modules_dir(kver)}/source"
    out = local_dir(host, build)
    src = local_dir(host, source) if host.is_dir(f"{source}/include") else out
    return [f"KERNEL_UNAME={kver}", f"SYSSRC={src}", f"SYSOUT={out}"]


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
    #: the patches applied in the tree (a donor patch aside): what the manifest records; a compat patch that did
    #: not apply to this tree is not among them
    patches: list[KernelPatch] = field(default_factory=list)
    #: wall seconds per step (copy_tree, restore_objects, make, store_objects): where a build spends its time
    phases: dict[str, float] = field(default_factory=dict)


def prepare_tree(host: Host, source: Source, kver: str, dest: str | None = None) -> str:
    """Return a fresh build directory for ``kver`` holding a copy of ``source`` (no VCS data, no products).

    A fork's checkout in the source cache is linked, not copied (``cp -al``: new directories, hard links to the
    files; seconds for a tree of tens of thousands of files, where a byte copy takes tens of seconds): builds
    only add files, and a checkout whose files changed all the same fails its verification at the next use and
    is made again (:mod:`fwman.driver.build.checkout`). A local ``--source`` tree is the user's, so it is copied
    (and where hard links cannot be made, another filesystem, the checkout is too). ``dest`` replaces the
    kernel's directory under the build cache (the pre-flight's own). Raises FwmanError when the tree cannot be
    set up.
    """
    tree = dest or f"{paths.BUILD_DIR}/{kver}"
    local_tree = local_dir(host, tree)
    local_src = local_dir(host, source.tree)
    host.mkdir(tree.rsplit("/", 1)[0])
    host.remove_tree(tree)  # the previous build of this kernel: kbuild state is never shared
    host.mkdir(tree)
    if source.fork is not None and source.tree.startswith(paths.SOURCE_CACHE_DIR + "/"):
        entries = [name for name in host.listdir(source.tree) if name != ".git"]
        linked = host.run(["cp", "-al", "--", *(f"{local_src}/{name}" for name in entries), local_tree], timeout=1200)
        if linked.ok:
            return tree
        host.remove_tree(tree)  # EXDEV or the like: copy instead
        host.mkdir(tree)
    # tar keeps the sources' timestamps (older than any cached object) and skips .git and old products
    script = (
        f"tar -C {shlex.quote(local_src)} --exclude=.git --exclude=_out --exclude='*.o_binary' -cf - . | "
        f"tar -C {shlex.quote(local_tree)} -xf -"
    )
    result = host.run(["sh", "-c", script], timeout=1200)
    if not result.ok:
        raise FwmanError(f"cannot copy {source.location} to {tree}: {result.stderr.strip()}")
    return tree


def include_roots(host: Host, kver: str, headers: KernelTree | None = None) -> list[str]:
    """Return the roots of ``kver``'s header trees a header is looked for in, the common tree of split Debian
    headers first (``include/linux/pci.h`` is there), then the build directory."""
    if headers is not None:
        return [r for r in (headers.source, headers.build) if r]
    return [f"{paths.modules_dir(kver)}/source", f"{paths.modules_dir(kver)}/build"]


def kernel_patches(
    host: Host, kver: str, headers: KernelTree | None = None, report: Report = silent
) -> list[KernelPatch]:
    """Return the patches a build for ``kver`` applies: the owner's of ``/etc/fwman/patches.d`` that match the
    release, then fwman's compat patches for what the kernel's headers declare (:mod:`.compat`; the owner's
    win). Raises ParseError for a patch that cannot be read as one."""
    owner = [p for p in kpatches.load_patches(host) if p.applies_to(kver)]
    shipped = compat.select(host, kver, owner, include_roots(host, kver, headers), kpatches.masked_names(host), report)
    return owner + shipped


def _headers_package(host: Host, kver: str) -> str:
    from fwman.driver.headers import advise_host

    return advise_host(host, kver).package


def phase_lines(report: Report) -> ProgressSink:
    """Return the progress sink of hooks and the boot service: whole lines through ``report`` (:class:`PhaseLog`)."""
    return PhaseLog(report)


def _run_make(
    host: Host,
    argv: list[str],
    cwd: str,
    log_path: str,
    header: str,
    kver: str,
    started: float,
    progress: ProgressSink | None,
) -> tuple[CommandResult, str, str | None]:
    """Run make with its output (stderr too) appended to ``log_path`` after ``header``.

    Returns (result, output, phase): make's result, its output, and the build phase it was in when it exited
    (None when no line marked one).

    While it runs, the log is read every second and each new line fed to a :class:`Progress` whose state goes to
    ``progress``; once make exited, ``progress`` is called once more with the state's ``rc`` set. The expected
    counts come from the previous log of this kernel when that build finished (a failed build's log would
    promise the next build its own truncated size). The log ends with :func:`end_line` (make's status and
    time), which the returned output leaves out. Raises what Host.run raises.
    """
    expected: dict[str, int] = {}
    if host.exists(log_path):
        with contextlib.suppress(MissingError):
            expected = expected_from_log(host.read_text(log_path))
    host.write_bytes(log_path, header.encode())
    local_log = host.local_path(log_path)
    if local_log is None:
        raise FwmanError(f"cannot build on {host.description}: no local filesystem path for {log_path}")
    command = ["sh", "-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "fwman-make", local_log, *argv]
    box: list[CommandResult | BaseException] = []

    def run() -> None:
        try:
            box.append(host.run(command, cwd=cwd, timeout=4 * 3600))
        except BaseException as e:  # handed to the caller's thread below
            box.append(e)

    worker = threading.Thread(target=run, name=f"make-{kver}", daemon=True)
    worker.start()
    state = Progress(kver, expected)
    seen = len(header.encode())
    pending = ""

    def drain() -> None:
        nonlocal seen, pending
        with contextlib.suppress(MissingError):
            size = host.stat_size(log_path)
            if size > seen:
                chunk = host.read_bytes(log_path)[seen:size]
                seen = size
                text = pending + chunk.decode("utf-8", errors="replace")
                *lines, pending = text.split("\n")
                for line in lines:
                    started_phase = state.feed(line)
                    if progress is not None and started_phase is not None:
                        progress(state, clock.monotonic() - started, started_phase)
        if progress is not None:  # every second, new lines or not: a sink without a terminal beats on silence
            progress(state, clock.monotonic() - started, None)

    while worker.is_alive():
        worker.join(1.0)
        drain()
    drain()
    outcome = box[0] if box else FwmanError("make did not report a result")
    if isinstance(outcome, BaseException):
        raise outcome
    text = host.read_text(log_path)
    seconds = clock.monotonic() - started
    state.rc = outcome.rc
    if progress is not None:
        progress(state, seconds, None)
    closed = text if text.endswith("\n") else text + "\n"
    host.write_bytes(log_path, (closed + end_line(outcome.rc, seconds) + "\n").encode())
    return outcome, text[len(header) :], state.phase


def compile_for_kernel(
    host: Host,
    source: Source,
    kver: str,
    report: Report = silent,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
    patches: Sequence[KernelPatch] = (),
    headers: KernelTree | None = None,
) -> CompileResult:
    """Build the five modules of ``source`` for ``kver`` and return what happened (never raises on make errors).

    ``headers`` builds against headers that are not installed (the pre-flight), in its own directory and log.

    ``patches`` (those of patches.d for ``kver``) are applied in the build tree first (``patch -p1``); one that
    does not apply is the build's failure (its file and hunks), nothing is compiled. Patches that change
    kernel-independent files are part of the object cache key.

    The kernel-independent objects come from the object cache when an entry for (source, compiler) exists,
    and are stored there after the first build. The whole make output goes to ``/var/log/fwman/build-KVER.log``.
    Raises MissingError when the headers or the compiler are missing, FwmanError when the tree cannot be set up.
    """
    if headers is not None:
        if not host.is_dir(f"{headers.build}/include"):
            raise MissingError(f"no headers for kernel {kver} in {headers.build} (its include/ is missing)")
    elif not headers_present(host, kver):
        raise MissingError(
            f"no headers for kernel {kver} ({paths.modules_dir(kver)}/build/include is missing)",
            hint=f"install the headers: apt install {_headers_package(host, kver)}",
        )
    log_path = headers.log if headers is not None else build_log_path(kver)
    toolchain.check_toolchain(host, patching=bool(patches) or source.donor_patch is not None)
    compiler = compiler_version(host)
    # g++ builds nvidia-modeset's C++ objects, which the cache holds too: another g++ is another entry
    cxx = toolchain.version_line(host, "g++")
    key = objcache.cache_key(source.source_id + kpatches.cache_salt(list(patches)), f"{compiler}\0{cxx}")
    started = clock.monotonic()
    phases: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = clock.monotonic()
        phases[name] = now - since
        return now

    report(f"preparing the build tree for {kver} from {source.label}")
    tree = prepare_tree(host, source, kver, headers.workdir if headers is not None else None)
    mark = lap("copy_tree", started)
    # a donor-patch fork's patch first (the upstream tag becomes the fork's tree), then patches.d's for kver,
    # then fwman's compat patches
    applied: list[KernelPatch] = []
    transcript: list[str] = []  # patch's output: the build log's first part (make's follows)
    todo = [source.donor_patch, *patches] if source.donor_patch is not None else list(patches)
    if todo:
        refused, applied = apply_patches(host, tree, todo, log_path, report, transcript)
        if refused is not None:
            failed = CompileResult(kver, False, tree, log_path, key, False, compiler, 0.0, phases=phases)
            failed.failure = refused
            return failed
        mark = lap("patch", mark)
    applied = [p for p in applied if p is not source.donor_patch]
    hit = objcache.has_entry(host, key)
    if hit:
        report("kernel-independent objects: from the object cache (kernel-open only)")
        objcache.restore(host, key, tree)
        mark = lap("restore_objects", mark)
    else:
        report("kernel-independent objects: not cached, building them (the long part)")
    if host.which("make") is None:
        raise MissingError("make not found", hint="install make and gcc (apt install make gcc)")
    jobs = jobs or cpu_count()
    # --output-sync=target: each target's output comes out whole (errors stay under make's directory lines,
    # which it prints around every block) and as soon as that target is done, so progress can be followed
    skip = objcache.assume_made() if hit else []  # the restored objects: make does not enter their sub-makes
    argv = ["make", f"-j{jobs}", "--output-sync=target", *skip, "modules", *kernel_tree_args(host, kver, headers)]
    report(f"running {' '.join(argv)}")
    header = "".join(f"{t}\n" for t in transcript) + f"$ {' '.join(argv)}\n# in {tree}, {source.label}\n"
    result, output, phase = _run_make(host, argv, local_dir(host, tree), log_path, header, kver, started, progress)
    mark = lap("make", mark)
    seconds = clock.monotonic() - started
    if hit and objcache.rebuilt_anyway(output):
        report("warning: make built the kernel-independent objects again (the fork's Makefile names them otherwise)")
        hit = False
    if not hit and objcache.store(host, key, tree):
        report("kernel-independent objects stored in the object cache")
        lap("store_objects", mark)
    built = {name: f"{tree}/kernel-open/{name}.ko" for name in MODULE_NAMES}
    missing = [name for name, path in built.items() if not host.exists(path)]
    outcome = CompileResult(kver, False, tree, log_path, key, hit, compiler, seconds, phases=phases, patches=applied)
    if not result.ok:
        outcome.failure = parse_build_failure(output, local_dir(host, tree))
        outcome.failure.phase = outcome.failure.phase or phase  # the phase at the cause, else where make stopped
        return outcome
    if missing:
        outcome.failure = BuildFailure(None, None, f"make succeeded but produced no {', '.join(missing)}.ko")
        return outcome
    outcome.ok = True
    outcome.modules = built
    return outcome


def apply_patches(
    host: Host,
    tree: str,
    patches: Sequence[KernelPatch],
    log_path: str,
    report: Report = silent,
    transcript: list[str] | None = None,
) -> tuple[BuildFailure | None, list[KernelPatch]]:
    """Apply ``patches`` in ``tree`` with ``patch -p1``, in order; return (None, the patches applied), or (the
    failure of the first that does not apply (its file and the hunks that failed; the tree is then left to the
    next build), the patches applied before it).

    Each is tried first (``--dry-run``), so a patch that does not apply changes nothing. A compat patch fwman
    ships that does not apply is left out instead (the fork may carry the change already): one report line, and
    the build goes on. The files a patch changes are unlinked and written back first: a fork's build tree is hard
    links to the source cache (:func:`prepare_tree`), which a patch must never change. patch's output goes to
    ``transcript`` when the patches applied (the build log then starts with it: writing it here would replace the
    previous log, whose counts the build's progress expects), else to ``log_path``. Raises MissingError without
    ``patch``.
    """
    if host.which("patch") is None:
        raise toolchain.missing_error([toolchain.PATCH_TOOL])
    local = local_dir(host, tree)
    log: list[str] = []
    applied: list[KernelPatch] = []
    for p in patches:
        # fwman's own compat patches are files of the package, not of the host (a --root does not move them)
        patch_file = p.path if p.declaration is not None else (host.local_path(p.path) or p.path)
        # --fuzz=0: a hunk whose context moved is refused, never applied elsewhere (stricter than DKMS's patch -p1)
        argv = ["patch", "-p1", "--fuzz=0", "--forward", "--batch", "--no-backup-if-mismatch", "-i", patch_file]
        trial = host.run([*argv, "--dry-run"], cwd=local, timeout=120)
        log.append(f"$ {' '.join(argv)} --dry-run\n{trial.stdout}{trial.stderr}")
        if not trial.ok and p.declaration is not None:
            report(f"{p.title} does not apply to this tree (it may carry the change already): left out")
            log.append(f"# {p.title} left out: it does not apply to this tree")
            continue
        if not trial.ok:
            host.write_bytes(log_path, "\n".join(log).encode())
            said = (trial.stdout + trial.stderr).strip()
            hunks = kpatches.failed_hunks(said)
            where = hunks[0].split(": ", 1)[0] if hunks and ": " in hunks[0] else p.files[0]
            text = "; ".join(hunks) or (said.splitlines()[-1] if said else f"patch exited {trial.rc}")
            failure = BuildFailure(
                where, None, f"{p.title} does not apply: {text}", said.splitlines()[-20:], "patch", "patch"
            )
            return failure, applied
        for rel in p.files:
            path = f"{tree}/{rel}"
            if host.exists(path) and not host.is_link(path):
                data = host.read_bytes(path)
                host.unlink(path)
                host.write_bytes(path, data)
        done = host.run(argv, cwd=local, timeout=120)
        log.append(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
        if not done.ok:
            host.write_bytes(log_path, "\n".join(log).encode())
            said = (done.stdout + done.stderr).strip()
            failure = BuildFailure(p.files[0], None, f"{p.title} failed: {said[-300:]}", phase="patch", cause="patch")
            return failure, applied
        kind = "compat" if p.declaration is not None else ("donor" if p.origin else "kernel")
        report(f"applied {kind} patch {p.name} ({', '.join(p.files)})")
        applied.append(p)
    if transcript is None:
        host.write_bytes(log_path, "\n".join(log).encode())
    else:
        transcript.extend(log)
    return None, applied


def donor_record(source: Source) -> dict[str, str] | None:
    """Return the manifest's ``donor_patch`` of ``source``: its upstream tag and patch, None for a branch or tree."""
    patch = source.donor_patch
    if patch is None:
        return None
    return {"tag": source.branch or "", "sha256": patch.sha256, "patch": patch.origin or ""}


def current_attempt(host: Host, kver: str, source_id: str, patches: Sequence[KernelPatch]) -> Attempt:
    """Return what a build of ``source_id`` for ``kver`` with ``patches`` depends on now (runs the compilers'
    ``--version``; reads the headers' identifying files)."""
    return Attempt(
        source_id,
        toolchain.current_toolchain(host).fingerprint,
        ",".join(p.sha256 for p in patches),  # a patch added, changed or now applying is a new attempt
        headers_fingerprint(host, kver),
    )


def current_manifest(host: Host, kver: str, source: Source, patches: Sequence[KernelPatch]) -> Manifest | None:
    """Return ``kver``'s manifest when its modules are installed as recorded (sizes) and were built from ``source``
    (its commit, a donor patch's digest) with the same patches (those applied: a compat patch that did not apply
    to the tree is not recorded, so such a tree is built again); None when a build is due. Never raises."""
    from fwman.driver.build.manifest import load_manifest, manifest_is_current

    try:
        manifest = load_manifest(host, kver)
    except (MissingError, ParseError):
        return None
    if manifest is None or not manifest_is_current(host, kver):
        return None
    if manifest.commit != (source.commit or source.source_id) or manifest.donor_patch != donor_record(source):
        return None
    if [p.get("sha256") for p in manifest.patches] != [p.sha256 for p in patches]:
        return None
    return manifest


def disk_usage(host: Host, paths_: Sequence[str]) -> int | None:
    """Return the bytes the last of ``paths_`` adds to the ones before it (``du -sbc``: a file hard-linked from an
    earlier one counts once, there), None when du cannot tell. Never raises for du."""
    local = [p for p in (host.local_path(x) for x in paths_) if p]
    if len(local) != len(paths_):
        return None
    result = host.run(["du", "-sb", *local], timeout=300)
    lines = result.stdout.strip().splitlines()
    if not result.ok or not lines:
        return None
    first = lines[-1].split("\t", 1)[0]
    return int(first) if first.isdigit() else None


def prune_tree(host: Host, tree: str, source: Source, kver: str, report: Report = silent) -> None:
    """Remove the build tree of a successful build and say what it took and what is kept.

    Kept: the installed modules and fwman's copy of them, the object cache entry the next kernel builds from, the
    build log; a fork's checkout stays in the source cache (the tree's files were hard links into it, so what
    the tree took is its build products only). A failed build's tree stays, to be looked at. Never raises: a tree
    left behind costs disk, not correctness.
    """
    from fwman.driver.build.manifest import store_dir

    linked = source.fork is not None and source.tree.startswith(paths.SOURCE_CACHE_DIR + "/")
    size = disk_usage(host, [source.tree, tree] if linked else [tree])
    try:
        host.remove_tree(tree)
    except FwmanError as e:
        report(f"warning: could not remove the build tree {tree}: {e.message}")
        return
    took = f" ({size / 1e6:.0f} MB{' of build products' if linked else ''})" if size is not None else ""
    kept = disk_usage(host, [store_dir(kver)])
    report(
        f"removed the build tree {tree}{took}; kept: the installed modules and their copy in {store_dir(kver)}"
        f"{f' ({kept / 1e6:.1f} MB)' if kept is not None else ''}, the object cache, the build log "
        f"{build_log_path(kver)}"
    )


def not_retried(failed: Marker, label: str, kver: str) -> str:
    """Return the message of a kernel whose failed build is not retried (nothing it depends on changed)."""
    return (
        f"the build of {label} for {kver} failed before ({failed.at}: {failed.reason}); not retried: the source, "
        f"toolchain, patches and headers are the same (run `fwman modules build --kernel {kver} --force` after "
        "fixing the cause)"
    )


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
    #: what the install changed on the host ([] when the same modules were already in place and in effect)
    changed: list[str] = field(default_factory=list)
    #: why the source could not be had (a SourceError, or a UsageError for a fork name not known); None: it could
    source_error: FwmanError | None = None
    #: wall seconds per step (source, copy_tree, restore_objects, make, store_objects, install); {} when none ran
    phases: dict[str, float] = field(default_factory=dict)
    #: the build tools that are not installed (the kernel is pending until they are); None: none missing
    tool_error: MissingError | None = None


def update_kernel(
    host: Host,
    kver: str,
    spec: SourceSpec,
    *,
    force: bool = False,
    fetch: bool = True,
    report: Report = silent,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
    resolved: Source | FwmanError | None = None,
) -> KernelOutcome:
    """Build, sign, install, depmod and verify the patched modules for ``kver``; record the result.

    ``resolved`` is ``spec`` already resolved by the caller (one fetch or tree hash for every kernel of a
    build), or the error its resolution raised; None resolves it here. Missing headers mark the kernel pending;
    so does a source that cannot be had, its error kept in ``source_error``. A failed build writes the failure
    marker and leaves the previous modules in place; the next attempt is skipped unless ``force`` while the
    source, toolchain, patches and headers are the same (:func:`~fwman.driver.build.attempt.retry_reason`). Modules
    that are current (:func:`current_manifest`) are left alone unless ``force``; missing build tools leave the
    kernel pending (``tool_error``). Success writes the manifest, clears both markers and removes the build tree.
    Never raises for a build problem (the outcome says it); raises FwmanError for what needs a person (disk,
    permissions).
    """
    from fwman.driver.build import install
    from fwman.driver.build.manifest import (
        WriteManifest,
        failed_path,
        now_iso,
        pending_path,
        read_marker,
        write_marker,
    )
    from fwman.driver.kmod import sign
    from fwman.driver.kmod.kofile import read_module

    if not headers_present(host, kver):
        from fwman.driver.headers import advise_host

        advice = advise_host(host, kver)
        message = (
            f"no headers for {kver} yet ({paths.modules_dir(kver)}/build/include missing): marked pending; "
            f"install them: {advice.install_hint()}"
        )
        write_marker(host, pending_path(kver), Marker(kver, "no headers", detail={"package": advice.package}))
        return KernelOutcome(kver, "pending", message)
    began = clock.monotonic()
    try:
        if isinstance(resolved, FwmanError):
            raise resolved
        source = resolved if resolved is not None else resolve_source(host, spec, report, fetch=fetch)
    except FwmanError as e:
        # the source is the problem, not the headers: the outcome carries the error (fork, URL, branch, git's
        # stderr) so that the caller's message and hint say so
        marker = Marker(kver, f"source unavailable: {e.message.splitlines()[0].rstrip(':')}")
        if isinstance(e, SourceError):
            marker.fork, marker.branch = e.fork, e.branch
            marker.detail = {"url": e.url, "git_stderr": e.git_stderr}
        write_marker(host, pending_path(kver), marker)
        message = f"{kver}: marked pending, the source cannot be had: {e.message}"
        return KernelOutcome(kver, "pending", message, source_error=e)
    try:
        patches = kernel_patches(host, kver, report=report)
    except ParseError as e:
        marker = Marker(kver, str(e), commit=source.source_id, fork=source.fork, branch=source.branch)
        write_marker(host, failed_path(kver), marker)
        return KernelOutcome(
            kver, "failed", f"build for {kver} FAILED: {e}", source, failure=BuildFailure(None, None, str(e))
        )
    if not force:
        current = current_manifest(host, kver, source, patches)
        if current is not None:
            return KernelOutcome(
                kver,
                "current",
                f"{kver}: the patched modules installed are current (built {current.built_at} from {source.label}); "
                "nothing to do (--force rebuilds)",
                source,
            )
    missing = toolchain.missing_tools(host.which, patching=bool(patches) or source.donor_patch is not None)
    if missing:
        # the host, not the tree: pending (the catch-up builds once the tools are there), never a failure
        error = toolchain.missing_error(missing)
        tools = " ".join(t.command for t in missing)
        write_marker(
            host,
            pending_path(kver),
            Marker(kver, f"build tools missing: {tools}", detail={"install": toolchain.install_line(missing)}),
        )
        message = f"{kver}: marked pending, {error.message}; {error.hint}"
        return KernelOutcome(kver, "pending", message, source, tool_error=error)
    attempt = current_attempt(host, kver, source.source_id, patches)
    failed = read_marker(host, failed_path(kver))
    if failed is not None and not force:
        why = retry_reason(failed, attempt, lambda tool: host.which(tool) is not None)
        if why is None:
            return KernelOutcome(kver, "skipped", not_retried(failed, source.label, kver), source)
        report(f"{kver}: the last build failed ({failed.reason}); trying again: {why}")
    resolved_at = clock.monotonic()
    result = compile_for_kernel(host, source, kver, report, jobs, progress or phase_lines(report), patches)
    outcome = KernelOutcome(
        kver, "failed", "", source, log_path=result.log_path, cache_hit=result.cache_hit, seconds=result.seconds
    )
    outcome.phases = {"source": resolved_at - began, **result.phases}
    installing = clock.monotonic()

    def fail(failure: BuildFailure) -> KernelOutcome:
        detail = {"log": result.log_path, "message": failure.message, "cause": failure.cause, **attempt.detail()}
        if failure.tool:
            detail["missing_tool"] = failure.tool
        if failure.file:
            detail["file"] = failure.file
        if failure.line is not None:
            detail["line"] = str(failure.line)
        if failure.phase is not None:
            detail["phase"] = failure.phase
        marker = Marker(kver, failure.message, commit=source.source_id, fork=source.fork, branch=source.branch)
        marker.detail = detail
        write_marker(host, failed_path(kver), marker)
        host.unlink(pending_path(kver))
        outcome.failure = failure
        where = (
            (f"{failure.file}:{failure.line}: " if failure.line is not None else f"{failure.file}: ")
            if failure.file
            else ""
        )
        phase = f" in the {failure.phase} phase" if failure.phase else ""
        outcome.message = f"build for {kver} FAILED{phase}: {where}{failure.message}"
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
    entries, changed = install.install_modules(host, kver, built)
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
        patches=[p.to_json() for p in result.patches],
        donor_patch=donor_record(source),
    )
    bad = [c for c in install.check_installed(host, manifest) if not c.ok]
    if bad:
        return fail(BuildFailure(None, None, f"installed but not in effect: {bad[0].name}: {bad[0].problem}"))
    # the manifest is rewritten only when it says something new (built_at alone is not a change)
    changed += apply_all(host, [WriteManifest(manifest), RemoveFile(failed_path(kver)), RemoveFile(pending_path(kver))])
    outcome.changed = changed
    outcome.phases["install"] = clock.monotonic() - installing  # sign, install, depmod, verify, manifest
    prune_tree(host, result.tree, source, kver, report)
    outcome.status = "built"
    hit = "object cache hit" if result.cache_hit else "full build"
    outcome.message = f"built and installed for {kver} from {source.label} ({hit}, {result.seconds:.1f}s)"
    return outcome
