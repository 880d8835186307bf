"""Building the patched modules for one kernel, start to end: source, the decision to build (current, pending,
a failure not retried), the kbuild run (:mod:`fwman.driver.build.kbuild`), then sign, install, verify and record
the result (the manifest, or the pending and failed markers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fwman.core import clock, paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.build import install, toolchain
from fwman.driver.build.attempt import Attempt, headers_fingerprint, retry_reason
from fwman.driver.build.checkout import SourceError
from fwman.driver.build.failure import BuildFailure
from fwman.driver.build.kbuild import compile_for_kernel, kernel_patches
from fwman.driver.build.manifest import KernelRecord, Manifest, Marker, build_log_path, store_dir
from fwman.driver.build.patches import KernelPatch
from fwman.driver.build.progress import PhaseLog, ProgressSink
from fwman.driver.build.source import Source, SourceSpec, resolve_source
from fwman.driver.kernels import headers_present
from fwman.driver.kmod import sign
from fwman.driver.kmod.kofile import read_module
from fwman.host.actions import Tell, apply_all, silent
from fwman.host.base import Host


def phase_lines(tell: Tell) -> ProgressSink:
    """Return the progress sink of hooks and the boot service: whole lines through ``tell`` (:class:`PhaseLog`)."""
    return PhaseLog(tell)


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


def prune_tree(host: Host, tree: str, source: Source, kver: str, tell: Tell = silent) -> None:
    """Remove the build tree of a successful build and say what it took and what is kept.

    Kept: the installed modules and fwman's copy of them, the object cache entry the next kernel builds from, the
    build log; a fork's checkout stays in the source cache (the tree's files were hard links into it, so what
    the tree took is its build products only). A failed build's tree stays, to be looked at. Never raises: a tree
    left behind costs disk, not correctness.
    """
    linked = source.fork is not None and source.tree.startswith(paths.SOURCE_CACHE_DIR + "/")
    size = disk_usage(host, [source.tree, tree] if linked else [tree])
    try:
        host.remove_tree(tree)
    except FwmanError as e:
        tell(f"warning: could not remove the build tree {tree}: {e.message}")
        return
    took = f" ({size / 1e6:.0f} MB{' of build products' if linked else ''})" if size is not None else ""
    kept = disk_usage(host, [store_dir(kver)])
    tell(
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
    tell: Tell = silent,
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
    from fwman.driver.build.manifest import failed_path, now_iso, read_marker

    record = KernelRecord(kver)  # the kernel's manifest and markers: written only through it
    if not headers_present(host, kver):
        from fwman.driver.headers import advise_host

        advice = advise_host(host, kver)
        message = (
            f"no headers for {kver} yet ({paths.modules_dir(kver)}/build/include missing): marked pending; "
            f"install them: {advice.install_hint()}"
        )
        record.pending(host, Marker(kver, "no headers", detail={"package": advice.package}))
        return KernelOutcome(kver, "pending", message)
    began = clock.monotonic()
    try:
        if isinstance(resolved, FwmanError):
            raise resolved
        source = resolved if resolved is not None else resolve_source(host, spec, tell, fetch=fetch)
    except FwmanError as e:
        # the source is the problem, not the headers: the outcome carries the error (fork, URL, branch, git's
        # stderr) so that the caller's message and hint say so
        marker = Marker(kver, f"source unavailable: {e.message.splitlines()[0].rstrip(':')}")
        if isinstance(e, SourceError):
            marker.fork, marker.branch = e.fork, e.branch
            marker.detail = {"url": e.url, "git_stderr": e.git_stderr}
        record.pending(host, marker)
        message = f"{kver}: marked pending, the source cannot be had: {e.message}"
        return KernelOutcome(kver, "pending", message, source_error=e)
    try:
        patches = kernel_patches(host, kver, tell=tell)
    except ParseError as e:
        record.failed(host, Marker(kver, str(e), commit=source.source_id, fork=source.fork, branch=source.branch))
        return KernelOutcome(
            kver, "failed", f"build for {kver} FAILED: {e}", source, failure=BuildFailure(None, None, str(e))
        )
    if not force:
        current = current_manifest(host, kver, source, patches)
        if current is not None:
            built_from = f"built {current.built_at} from {source.label}"
            message = (
                f"{kver}: the patched modules installed are current ({built_from}); nothing to do (--force rebuilds)"
            )
            return KernelOutcome(kver, "current", message, source)
    missing = toolchain.missing_tools(host.which, patching=bool(patches) or source.donor_patch is not None)
    if missing:
        # the host, not the tree: pending (the catch-up builds once the tools are there), never a failure
        error = toolchain.missing_error(missing)
        tools = " ".join(t.command for t in missing)
        record.pending(
            host, Marker(kver, f"build tools missing: {tools}", detail={"install": toolchain.install_line(missing)})
        )
        message = f"{kver}: marked pending, {error.message}; {error.hint}"
        return KernelOutcome(kver, "pending", message, source, tool_error=error)
    attempt = current_attempt(host, kver, source.source_id, patches)
    failed = read_marker(host, failed_path(kver))
    if failed is not None and not force:
        why = retry_reason(failed, attempt, lambda tool: host.which(tool) is not None)
        if why is None:
            return KernelOutcome(kver, "skipped", not_retried(failed, source.label, kver), source)
        tell(f"{kver}: the last build failed ({failed.reason}); trying again: {why}")
    resolved_at = clock.monotonic()
    result = compile_for_kernel(host, source, kver, tell, jobs, progress or phase_lines(tell), patches)
    outcome = KernelOutcome(
        kver, "failed", "", source, log_path=result.log_path, cache_hit=result.cache_hit, seconds=result.seconds
    )
    outcome.phases = {"source": resolved_at - began, **result.phases}
    installing = clock.monotonic()

    def fail(failure: BuildFailure) -> KernelOutcome:
        detail = {"log": result.log_path, "message": failure.message, "cause": failure.cause, **attempt.detail()}
        line = str(failure.line) if failure.line is not None else None
        known = {
            "missing_tool": failure.tool or None,
            "file": failure.file or None,
            "line": line,
            "phase": failure.phase,
        }
        detail |= {k: v for k, v in known.items() if v is not None}
        marker = Marker(kver, failure.message, commit=source.source_id, fork=source.fork, branch=source.branch)
        marker.detail = detail
        record.failed(host, marker)
        outcome.failure = failure
        where = f"{failure.file}: " if failure.file else ""
        if failure.file and line is not None:
            where = f"{failure.file}:{line}: "
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
        tell(f"signed the modules with {key.cert} ({signed})")
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
    changed += apply_all(host, record.installed(manifest))
    outcome.changed = changed
    outcome.phases["install"] = clock.monotonic() - installing  # sign, install, depmod, verify, manifest
    prune_tree(host, result.tree, source, kver, tell)
    outcome.status = "built"
    hit = "object cache hit" if result.cache_hit else "full build"
    outcome.message = f"built and installed for {kver} from {source.label} ({hit}, {result.seconds:.1f}s)"
    return outcome
