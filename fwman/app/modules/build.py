"""``fwman modules build``: build, sign, install and verify the patched modules for the kernels asked for.
A :class:`BuildRequest` in, a :class:`BuildResult` out (each kernel's outcome told as it comes); no click."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, Any

from fwman.app.driver.branches import gpu_family
from fwman.app.modules.check_boot import boot_doc
from fwman.app.text import Out, Result, say
from fwman.core import names
from fwman.core.config import load_config
from fwman.core.errors import FwmanError, MissingError, ParseError, PartialError, UsageError, VerificationError
from fwman.core.jsonout import encode
from fwman.core.termtext import visible
from fwman.driver.boot.initramfs import InitramfsState
from fwman.driver.boot.pin import BootCheck
from fwman.driver.build.checkout import SourceError
from fwman.driver.build.kbuild import kernel_patches
from fwman.driver.build.lock import module_lock
from fwman.driver.build.lockstep import build_target, gather, refuse_unless_forced
from fwman.driver.build.pipeline import KernelOutcome, donor_record, phase_lines
from fwman.driver.build.progress import ProgressSink
from fwman.driver.build.source import (
    Source,
    SourceSpec,
    check_source_options,
    load_source_spec,
    newer_branches,
    resolve_fork_of,
    resolve_source,
    save_source_spec,
    source_version,
)
from fwman.driver.build.toolchain import check_toolchain, install_line, missing_error, missing_tools
from fwman.driver.families import describe
from fwman.driver.forks.forge import api_base
from fwman.driver.forks.listing import choose_revision, list_branches
from fwman.driver.kernels import headers_present, installed_kernels
from fwman.driver.lifecycle import BUILD, BuildOptions, RunSummary, Situation, converge, kernel_step, plan, still_needed
from fwman.host.actions import Tell, silent
from fwman.host.base import Host
from fwman.platform.containers import read_cdi_specs
from fwman.platform.userspace import scan_userspace
from fwman.reports.audit.cdi_rows import cdi_spec_rows


@dataclass(frozen=True)
class BuildRequest:
    """What ``fwman modules build`` was asked: which kernels, from which source, how."""

    kernels: tuple[str, ...] = ()
    all_kernels: bool = False
    fork: str | None = None
    branch: str | None = None
    source_dir: str | None = None
    force: bool = False
    jobs: int | None = None
    #: the build progress sink (a live line on a terminal); None: phase lines and a heartbeat via ``tell``
    progress: ProgressSink | None = None
    #: ``--driver-version``: build the newest revision (branch) of the fork whose tree builds this version
    driver_version: str | None = None
    #: the environment (``$FWMAN_FORGE_API``) for listing the fork's branches
    variables: Mapping[str, str] = field(default_factory=dict)
    #: say what would be built (the source resolved by name, nothing fetched, built or remembered)
    dry_run: bool = False


@dataclass
class KernelBuild:
    """One kernel's outcome, with the newer cached P2P branches when its build failed."""

    outcome: KernelOutcome
    newer: list[str] = field(default_factory=list)
    initramfs: InitramfsState | None = None  # the kernel's initramfs after the build (regenerated if stale)

    def to_json(self) -> dict[str, Any]:
        """Return the ``kernels[]`` entry of ``fwman.modules-build/2``."""
        doc = outcome_json(self.outcome, self.newer)
        doc["initramfs"] = self.initramfs.to_dict() if self.initramfs and self.initramfs.path else None
        return doc

    def text(self, verbose: int = 0) -> Out:
        """Return the kernel's outcome for people: the failure report, or the outcome's message."""
        if self.outcome.status == "failed":
            return failure_text(self.outcome, self.newer)
        return [say(self.outcome.message)]


@dataclass
class BuildResult(Result):
    """Every kernel's build and the boot check that followed (each kernel's text is shown as it comes)."""

    builds: list[KernelBuild]
    boot: BootCheck | None
    #: a dry run: what would be built (nothing was); None: a real run
    plan: list[str] | None = None
    #: after an install: the CDI specs that no longer match (one line each, with the command that rewrites them)
    cdi: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-build/2`` (``dry_run`` and ``actions`` only in a dry run)."""
        doc = {"kernels": [b.to_json() for b in self.builds], "boot": boot_json(self.boot), "changed": self.changed}
        return doc if self.plan is None else {**doc, "dry_run": True, "actions": self.plan}

    @property
    def changed(self) -> bool:
        """Return True when any kernel's install or the boot check changed the host."""
        return any(b.outcome.changed for b in self.builds) or bool(self.boot is not None and self.boot.changed)

    def text(self, verbose: int = 0) -> Out:
        """Return what the boot check did (the kernels' outcomes were shown as they came), or the dry run's plan."""
        if self.plan is not None:
            return [say(f"would {step}") for step in self.plan] or [say("nothing to build")]
        return boot_text(self.boot) + [say(line, "yellow") for line in self.cdi]

    def failure(self) -> FwmanError | None:
        """Return the error of :meth:`raise_for_failures` (None when every kernel built)."""
        try:
            self.raise_for_failures()
        except FwmanError as e:
            return e
        return None

    def raise_for_failures(self) -> None:
        """Return when every kernel built; raise PartialError (some built), the source's own error (SourceError:
        the fork cannot be had; UsageError: a fork name that is not known), MissingError (no headers), or
        VerificationError (a build failed) otherwise."""
        outcomes = [b.outcome for b in self.builds]
        bad = [o for o in outcomes if o.status not in ("built", "current")]
        if not bad:
            return
        if len(bad) < len(outcomes):
            raise PartialError(f"{len(bad)} of {len(outcomes)} kernels not built: {', '.join(o.kver for o in bad)}")
        first = bad[0]
        if first.source_error is not None:  # the source is the problem, not the headers: its own error and hint
            error = first.source_error
            raise error.for_kernel(first.kver) if isinstance(error, SourceError) else error
        if first.tool_error is not None:  # the build tools, not the headers: the tools and the apt line
            raise first.tool_error
        if first.status == "pending":
            raise MissingError(first.message, hint=f"install the headers for {first.kver}, then run this again")
        raise VerificationError(first.message, hint="see the report above and the build log")


def newest_revision_spec(host: Host, request: BuildRequest, tell: Tell = silent) -> SourceSpec:
    """Return the branch of the fork (``--fork``, else the remembered one) with the newest commit of those whose
    tree builds ``request.driver_version``. Raises UsageError for ``--branch`` or ``--source`` with it, a bad
    version, or no fork; MissingError when the fork cannot be listed or no branch of it builds the version."""
    assert request.driver_version is not None
    version = names.driver_version(request.driver_version, "--driver-version")
    if request.branch or request.source_dir:
        raise UsageError("--driver-version picks the branch itself: give it without --branch and --source")
    fork_text = request.fork
    if fork_text is None:
        remembered = load_source_spec(host)
        fork_text = remembered.fork if remembered is not None else None
    if fork_text is None:
        raise UsageError("--driver-version needs a fork: --fork F (or one remembered by an earlier build)")
    spec = SourceSpec(None, fork_text, None)
    fork = resolve_fork_of(host, spec)
    listing = list_branches(host, [fork], api=api_base(load_config(host), request.variables)).forks[0]
    if not listing.available:
        raise MissingError(
            f"cannot list the branches of fork {fork.name} ({fork.url}): {listing.error}",
            hint=f"check `fwman driver branches --fork {fork_text}`, or name the branch with --branch",
        )
    revisions = listing.revisions_of(version)
    if not revisions:
        carried = ", ".join(str(v) for v in listing.p2p_versions()) or "none"
        raise MissingError(
            f"no {'upstream tag' if fork.donor else 'branch'} of fork {fork.name} builds driver version {version} "
            f"(its P2P {'tags' if fork.donor else 'branches'} build: {carried})",
            hint=f"see `fwman driver branches --fork {fork_text} --version {version}`",
        )
    if fork.donor is None:  # a branch fork: the family this host's GPUs need (a 48 GB 4090: -p2p-48g, only it)
        family = gpu_family(host)
        if family is None:
            raise UsageError(
                f"this host's GPUs need different branch families for driver {version}; one module serves them all",
                hint="name the branch with --branch (see `fwman driver branches`)",
            )
        mine = choose_revision(revisions, family)
        if not mine:
            have = ", ".join(sorted({f"{r.branch} ({r.family})" for r in revisions}))
            raise MissingError(
                f"no branch of fork {fork.name} for {describe(family)} (family {family}) builds driver version "
                f"{version} (its branches of that version: {have})",
                hint="name the branch with --branch if you know it serves these GPUs",
            )
        revisions = mine
    newest = revisions[0]
    if fork.donor is not None:  # a donor-patch fork: NVIDIA's tag of the version, with the pinned patch
        tell(
            f"driver {version}: building fork {fork.name}: upstream tag {newest.branch} of {fork.url} + patch "
            f"{fork.donor.location} (sha256 {fork.donor.sha256[:12]})"
        )
        return SourceSpec(None, fork_text, names.branch_name(newest.branch))
    others = ", ".join(r.branch for r in revisions[1:])
    tell(
        f"driver {version}: building {newest.branch} of {fork.name}, the newest of its revisions ({newest.family}) "
        f"(committed {newest.date or 'at an unknown date'}{'; older: ' + others if others else ''})"
    )
    return SourceSpec(None, fork_text, names.branch_name(newest.branch))


def configured_driver_version(host: Host) -> tuple[str | None, str] | None:
    """Return ([modules] fork or None, [modules] driver-version) of /etc/fwman/config.toml, None without a
    driver-version. Raises UsageError when it is given with ``branch`` or ``source`` (it picks the branch)."""
    config = load_config(host)
    version = config.get_str("modules", "driver-version")
    if version is None:
        return None
    if config.get_str("modules", "branch") or config.get_str("modules", "source"):
        raise UsageError(
            f"{config.path}: [modules] driver-version picks the branch itself: give it without branch and source",
            hint=f"edit {config.path}",
        )
    return config.get_str("modules", "fork"), version


def source_spec(host: Host, request: BuildRequest, tell: Tell = silent) -> SourceSpec:
    """Return the source to build from: the one the request names (its fork kept as named), else the remembered
    one. Raises UsageError for an incomplete source, an unknown fork, or none named and none remembered."""
    if request.driver_version is not None:
        return newest_revision_spec(host, request, tell)
    if not (request.source_dir or request.fork or request.branch):
        configured = configured_driver_version(host)
        if configured is not None:  # [modules] driver-version: as --driver-version, of [modules] fork
            fork, version = configured
            return newest_revision_spec(host, replace(request, fork=fork, driver_version=version), tell)
    if request.source_dir or request.fork or request.branch:
        check_source_options(request.source_dir, request.fork, request.branch)
        if request.branch is not None:
            names.branch_name(request.branch)  # checked here: a bad name is never fetched, nor remembered
        spec = SourceSpec(request.source_dir, request.fork, request.branch)
        if spec.fork:
            resolve_fork_of(host, spec)  # an unknown name is a usage error now, before anything is fetched
        return spec
    remembered = load_source_spec(host)
    if remembered is None:
        check_source_options(None, None, None)  # raises the usage error that says what to pass
    assert remembered is not None
    return remembered


def build_modules(
    host: Host, request: BuildRequest, tell: Tell = silent, on_outcome: Callable[[KernelBuild], None] | None = None
) -> BuildResult:
    """Build for every kernel of ``request`` under the module lock (``on_outcome`` after each), remember a named
    source once it resolved, then keep the next boot safe; return the builds. Raises UsageError without kernels
    or source or for a ``--source`` that is no module tree, LockTimeout when another build holds the lock; a
    failed build is an outcome (:meth:`BuildResult.raise_for_failures`)."""
    spec = source_spec(host, request, tell)
    try:
        fork_url = resolve_fork_of(host, spec).url if spec.fork else None
    except FwmanError:
        fork_url = None  # a remembered fork no longer configured: its resolution below says so, per kernel
    planned = build_target(host, spec.branch, spec.source_dir, fork_url)
    target = planned.version
    # a fork branch whose tree was never read (by `driver branches`): its name is only a hint (a 575.64.05-p2p
    # whose version.mk says 570.86.16), so the gate waits for the tree, once checked out
    deferred = spec.fork is not None and not planned.from_tree
    if not deferred:
        warning = refuse_unless_forced(gather(host, target), request.force)
        if warning:
            tell(warning)
    targets = list(request.kernels)
    if request.all_kernels:
        targets += [k for k in installed_kernels(host) if headers_present(host, k) and k not in targets]
    if not targets:
        raise UsageError("name a kernel: --kernel KVER (repeatable) or --all", hint="e.g. --kernel $(uname -r)")
    # the tools first: a missing g++ must not cost a fetch and minutes of compiling to be found (exit 5)
    try:
        patching = any(kernel_patches(host, k) for k in targets if headers_present(host, k))
    except ParseError:
        patching = True  # a patch that is not one fails each kernel's build, naming it (below); patch is needed

    situation = Situation(tuple(targets), BUILD, force=request.force)
    options = BuildOptions(fetch=True, jobs=request.jobs, progress=request.progress, headline=True)
    if request.dry_run:
        missing = missing_tools(host.which, patching)
        if missing:  # a run would refuse up front; a dry run needs no tools, so it says so
            return BuildResult([], None, [f"refuse: {missing_error(missing).message} ({install_line(missing)})"])
        return BuildResult([], None, still_needed(host, plan(host, situation, spec=spec, options=options)))
    check_toolchain(host, patching)
    builds: list[KernelBuild] = []

    def built(outcome: KernelOutcome) -> None:
        newer = newer_branches(host, outcome.source) if outcome.status == "failed" and outcome.source else []
        builds.append(KernelBuild(outcome, newer))
        if on_outcome is not None:
            on_outcome(builds[-1])

    options.on_outcome = built
    with module_lock(host):
        if request.source_dir or request.fork or request.driver_version:
            options.resolved = remember_if_resolved(host, spec, tell)
        elif deferred:
            options.resolved = resolve_or_error(host, spec, tell)
        if spec.fork is not None and options.resolved is None:
            options.resolved = resolve_or_error(host, spec, tell)
        resolved = options.resolved
        tree_version = source_version(host, resolved) if isinstance(resolved, Source) else None
        # the name is a hint: a tree that builds another version than its name says is gated on the tree's
        if isinstance(resolved, Source) and (deferred or (tree_version is not None and tree_version != target)):
            warning = refuse_unless_forced(gather(host, tree_version), request.force)
            if warning:
                tell(warning)
        summary = converge(host, plan(host, situation, spec=spec, options=options, tell=tell))
    for build in builds:
        build.initramfs = summary.initramfs.get(build.outcome.kver)
    stale = stale_cdi_specs(host) if any(b.outcome.status == "built" for b in builds) else []
    return BuildResult(builds, summary.boot, cdi=stale)


def stale_cdi_specs(host: Host) -> list[str]:
    """Return one line per NVIDIA CDI spec that no longer matches this host (libraries of another driver than the
    host's user space, host paths gone, device major numbers drifted), with the command that rewrites it: checked
    after every module install (docs/audit.md, "CDI specs"). Never raises."""
    try:
        specs = read_cdi_specs(host, [])
        versions = list(scan_userspace(host, run_smi=False).versions()) if specs else []
    except FwmanError:
        return []
    ref = versions[0] if len(versions) == 1 else None
    return [
        f"CDI spec {row.where}: {row.detail}; {row.fix}"
        for row in cdi_spec_rows([s for s in specs if s.error is None], ref)
        if row.status == "mismatch" and row.fix
    ]


def planned_step(host: Host, kver: str, spec: SourceSpec, force: bool) -> str:
    """Return what a build of ``kver`` would do (``fwman plan``'s modules part): the step of the lifecycle's plan
    (:func:`fwman.driver.lifecycle.kernel_step`) that ``modules build`` applies."""
    return kernel_step(host, kver, spec, force, RunSummary(), BuildOptions(), current=True).describe()


def resolve_or_error(host: Host, spec: SourceSpec, tell: Tell = silent) -> Source | FwmanError:
    """Return the Source of ``spec``, or the error resolving it raised (each kernel is then pending with it).

    Raises UsageError for a fork name that is not known.
    """
    try:
        return resolve_source(host, spec, tell)
    except UsageError:
        raise
    except FwmanError as e:
        return e


def remember_if_resolved(host: Host, spec: SourceSpec, tell: Tell = silent) -> Source | FwmanError:
    """Resolve the source the user named and remember it for the hook and the catch-up; return it, or the error
    of a fork branch that cannot be had now (not remembered: a typo must not replace the working source).
    Raises UsageError when ``--source`` is no open-gpu-kernel-modules tree or the fork name is not known."""
    source = resolve_or_error(host, spec, tell)
    if isinstance(source, FwmanError):
        if spec.source_dir:
            raise UsageError(f"--source {source.message}", hint=source.hint) from source
        tell(f"warning: {spec.describe()} cannot be had, so it is not remembered as the source of later builds")
        return source
    save_source_spec(host, spec)
    return source


def outcome_json(outcome: KernelOutcome, newer: list[str] | None = None) -> dict[str, Any]:
    """Return one kernel's outcome as ``fwman.modules-build/2`` shows it."""
    source = outcome.source
    return {
        "kernel": outcome.kver,
        "status": outcome.status,
        "message": outcome.message,
        "log": outcome.log_path,
        "object_cache_hit": outcome.cache_hit,
        "seconds": round(outcome.seconds, 1) if outcome.seconds is not None else None,
        "phases": {name: round(seconds, 2) for name, seconds in outcome.phases.items()},
        "source": None
        if source is None
        else {
            "fork": source.fork,
            "branch": source.branch,
            "commit": source.commit,
            "location": source.location,
            "donor_patch": donor_record(source),
        },
        "failure": encode(outcome.failure),
        "newer_branches": newer or [],
        "source_error": source_error_json(outcome.source_error),
        "changed": bool(outcome.changed),
        "actions": outcome.changed,  # what the install changed, one line each (docs/json.md)
    }


def source_error_json(error: FwmanError | None) -> dict[str, str] | None:
    """Return why the source could not be had, as the ``source_error`` object of a kernel (None: it could)."""
    if error is None:
        return None
    if isinstance(error, SourceError):
        return error.to_json()
    return {"message": error.message, "fork": "", "url": "", "branch": "", "git_stderr": "", "hint": error.hint or ""}


def boot_json(check: BootCheck | None) -> dict[str, Any] | None:
    """Return a boot check as the ``boot`` object of ``fwman.modules-build/2`` (None stays None): the shape of
    ``modules check-boot`` (:func:`fwman.app.modules.check_boot.boot_doc`)."""
    if check is None:
        return None
    safety = check.safety
    return boot_doc(check.default, safety.safe if safety else None, safety.reason if safety else None, check)


def boot_text(check: BootCheck | None) -> Out:
    """Return the lines that say what a boot check did: the pin it made, the problem it could not fix."""
    if check is None:
        return []
    out: Out = []
    if check.pinned is not None:
        out.append(say(f"boot default pinned to {check.pinned.kernel} ({check.pinned.method})", "yellow"))
    if check.problem and not check.deferred:  # deferred: apt's check at the end of its run says it, once
        out.append(say(f"WARNING: {check.problem}" + (f"; fix: {check.fix}" if check.fix else ""), "bad"))
    return out


def failure_text(outcome: KernelOutcome, newer: list[str], *, err: bool = False) -> Out:
    """Return the lines that explain a failed build: phase, file, first error, source, log, ``newer`` branches."""
    lines = [f"FAILED: patched modules for {outcome.kver} did not build"]
    f = outcome.failure
    if f is not None:
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "(no file named)")
        if f.phase:
            lines.append(f"  failed in:     the {f.phase} phase")
        lines.append(f"  failing file:  {where}")
        lines.append(f"  first error:   {f.message}")
        if f.hint:
            lines.append(f"  fix:           {f.hint}")
    s = outcome.source
    if s is not None:
        if s.fork:
            built_from = (
                f"upstream tag {s.branch} + donor patch {s.donor_patch.origin} (sha256 {s.donor_patch.sha256})"
                if s.donor_patch is not None
                else f"branch {s.branch}"
            )
            lines.append(f"  source:        fork {s.fork}, {built_from}, commit {s.commit}")
        else:
            lines.append(f"  source:        {s.location} ({s.commit or s.source_id})")
    if outcome.log_path:
        lines.append(f"  build log:     {outcome.log_path}")
    if newer:
        lines.append("  newer P2P branches that may build (cached list; check `fwman driver branches`):")
        lines.extend(f"    {b}" for b in newer[-5:])
    else:
        lines.append("  newer P2P branches: none known (run `fwman driver branches` to refresh the list)")
    # a person's terminal gets the headline in red; on stderr (the hook, the catch-up) the text is plain
    return [say(text, "red" if text.startswith("FAILED") and not err else "", err=err) for text in lines]


def progress_sink(stream: IO[str], *, as_json: bool, live: bool, tell: Tell) -> ProgressSink:
    """Return the build progress sink: a live line on ``stream`` when it is a terminal (``live``), whole lines
    through ``tell`` otherwise (a hook, the boot service, a redirected stderr), nothing under ``--json``."""
    if as_json:
        return lambda state, elapsed, started: None
    if not live:
        return phase_lines(tell)

    def draw(state: Any, elapsed: float, started: str | None) -> None:
        try:
            if state.rc is not None:
                return  # make exited: the caller ends the line and reports the outcome
            if started is not None and elapsed > 0:
                stream.write("\n")  # keep the finished phase's last line on screen
            stream.write("\r\033[K" + visible(state.line(elapsed)))  # the line may quote a tool's output
            stream.flush()
        except (OSError, ValueError):  # the terminal went away: the build goes on, unseen
            pass

    return draw
