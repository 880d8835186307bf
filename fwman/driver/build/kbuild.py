"""One kernel's kbuild run: a fresh build tree, the patches applied in it, ``make modules`` with progress.

The build runs in ``/var/cache/fwman/build/<kver>/``, a fresh copy of the source tree (never the fork checkout
itself, so two kernels never share kbuild state). The kernel tree is always named explicitly: Debian splits its
headers (``/lib/modules/KVER/build`` is the arch directory, ``source`` the common one), and
``SYSSRC=build`` alone makes the fork's conftests fail (``stdarg.h: No such file or directory``), so fwman
passes ``KERNEL_UNAME=KVER`` plus ``SYSSRC=<source> SYSOUT=<build>`` (both as the Host maps them, so a temp
root works too). Without them the build would target the *running* kernel.

:func:`~fwman.driver.build.failure.parse_build_failure` turns a build log into its first cause (a missing tool, a
missing header, the first compiler error). What is done with the modules built (sign, install, record) is
:mod:`fwman.driver.build.pipeline`'s.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from fwman.core import clock, paths
from fwman.core.errors import FwmanError, MissingError
from fwman.driver.build import compat, objcache, toolchain
from fwman.driver.build import patches as kpatches
from fwman.driver.build.failure import BuildFailure, parse_build_failure
from fwman.driver.build.manifest import build_log_path
from fwman.driver.build.patches import KernelPatch
from fwman.driver.build.progress import Progress, ProgressSink, end_line, expected_from_log
from fwman.driver.build.source import Source
from fwman.driver.kernels import headers_present
from fwman.driver.localfs import local_dir
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Tell, silent
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


def kernel_patches(host: Host, kver: str, headers: KernelTree | None = None, tell: Tell = silent) -> list[KernelPatch]:
    """Return the patches a build for ``kver`` applies: the owner's of ``/etc/fwman/patches.d`` that match the
    release, then fwman's compat patches for what the kernel's headers declare (:mod:`.compat`; the owner's
    win). Raises ParseError for a patch that cannot be read as one."""
    owner = [p for p in kpatches.load_patches(host) if p.applies_to(kver)]
    shipped = compat.select(host, kver, owner, include_roots(host, kver, headers), kpatches.masked_names(host), tell)
    return owner + shipped


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
    tell: Tell = silent,
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
        from fwman.driver.headers import advise_host

        raise MissingError(
            f"no headers for kernel {kver} ({paths.modules_dir(kver)}/build/include is missing)",
            hint=f"install the headers: apt install {advise_host(host, kver).package}",
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

    tell(f"preparing the build tree for {kver} from {source.label}")
    tree = prepare_tree(host, source, kver, headers.workdir if headers is not None else None)
    mark = lap("copy_tree", started)
    # a donor-patch fork's patch first (the upstream tag becomes the fork's tree), then patches.d's for kver,
    # then fwman's compat patches
    applied: list[KernelPatch] = []
    transcript: list[str] = []  # patch's output: the build log's first part (make's follows)
    todo = [source.donor_patch, *patches] if source.donor_patch is not None else list(patches)
    if todo:
        refused, applied = apply_patches(host, tree, todo, log_path, tell, transcript)
        if refused is not None:
            return CompileResult(kver, False, tree, log_path, key, False, compiler, 0.0, phases=phases, failure=refused)
        mark = lap("patch", mark)
    applied = [p for p in applied if p is not source.donor_patch]
    hit = objcache.has_entry(host, key)
    if hit:
        tell("kernel-independent objects: from the object cache (kernel-open only)")
        objcache.restore(host, key, tree)
        mark = lap("restore_objects", mark)
    else:
        tell("kernel-independent objects: not cached, building them (the long part)")
    if host.which("make") is None:
        raise MissingError("make not found", hint="install make and gcc (apt install make gcc)")
    jobs = jobs or cpu_count()
    # --output-sync=target: each target's output comes out whole (errors stay under make's directory lines,
    # which it prints around every block) and as soon as that target is done, so progress can be followed
    skip = objcache.assume_made() if hit else []  # the restored objects: make does not enter their sub-makes
    argv = ["make", f"-j{jobs}", "--output-sync=target", *skip, "modules", *kernel_tree_args(host, kver, headers)]
    tell(f"running {' '.join(argv)}")
    header = "".join(f"{t}\n" for t in transcript) + f"$ {' '.join(argv)}\n# in {tree}, {source.label}\n"
    result, output, phase = _run_make(host, argv, local_dir(host, tree), log_path, header, kver, started, progress)
    mark = lap("make", mark)
    seconds = clock.monotonic() - started
    if hit and objcache.rebuilt_anyway(output):
        tell("warning: make built the kernel-independent objects again (the fork's Makefile names them otherwise)")
        hit = False
    if not hit and objcache.store(host, key, tree):
        tell("kernel-independent objects stored in the object cache")
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
    tell: Tell = silent,
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
            tell(f"{p.title} does not apply to this tree (it may carry the change already): left out")
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
        tell(f"applied {kind} patch {p.name} ({', '.join(p.files)})")
        applied.append(p)
    if transcript is None:
        host.write_bytes(log_path, "\n".join(log).encode())
    else:
        transcript.extend(log)
    return None, applied
