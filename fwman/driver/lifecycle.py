"""The kernel lifecycle as one plan of actions: the one place that decides what a kernel hook, the boot-time
catch-up, ``fwman modules build`` and a bundle import do to the kernels.

:func:`plan` takes the situation (:class:`Situation`: which kernels, who runs it, ``force``, ``defer``,
``hash_files``) and returns a :class:`Plan`: a list of actions in the form of :mod:`fwman.host.actions` (put
back modules DKMS replaced, build a kernel, mark one pending, leave a failed one, refresh an initramfs, keep the
next boot safe, record the boot fast path's stamp) and the :class:`RunSummary` they fill as they are applied.
A ``--dry-run`` lists the ``describe()`` of the same objects the run applies (:func:`fwman.host.actions.pending`),
so the two cannot drift. A kernel's manifest and markers are written only through
:class:`~fwman.driver.build.manifest.KernelRecord`.

The module imports the standard library's and the fast path's modules only: the catch-up's nothing-to-do path
(:func:`fwman.driver.hooks.run.catchup`) imports it without loading the build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.kernels import headers_present, installed_kernels, version_key
from fwman.host.actions import Action, Tell, Tracked, apply_all, pending, silent
from fwman.host.base import Host

if TYPE_CHECKING:  # imported for the annotations only: the boot fast path must not load them
    from fwman.driver.boot.initramfs import InitramfsState
    from fwman.driver.boot.pin import BootCheck
    from fwman.driver.build.manifest import Manifest
    from fwman.driver.build.pipeline import KernelOutcome
    from fwman.driver.build.progress import ProgressSink
    from fwman.driver.build.source import Source, SourceSpec

#: who runs the lifecycle: the kernel hooks (their ``--origin``), the boot-time catch-up, ``modules build``, an
#: import of a bundle
HOOK_ORIGINS = ("postinst", "header_postinst", "kernel-install", "manual")
CATCHUP = "catchup"
BUILD = "build"
IMPORT = "import"
#: what the boot check's action says (the last step of every plan that can change a kernel)
CHECK_BOOT = "check that the next boot has working patched modules"


@dataclass(frozen=True)
class Situation:
    """What the lifecycle is asked to converge: ``kernels`` (the hook's kernel, the catch-up's every installed
    kernel, the kernels ``modules build`` names, a bundle's kernel), who runs it (``origin``: a hook origin,
    :data:`CATCHUP`, :data:`BUILD`, :data:`IMPORT`), ``force`` (rebuild what is current or failed before),
    ``defer`` (inside an apt run: a next boot nothing can make safe is left to apt's check) and ``hash_files``
    (False: sizes and depmod's resolution, at boot)."""

    kernels: tuple[str, ...]
    origin: str
    force: bool = False
    defer: bool = False
    hash_files: bool = True


@dataclass
class RunSummary:
    """What a lifecycle run did, for the CLI to render and map to an exit status (filled as the actions apply)."""

    outcomes: list[KernelOutcome] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    boot: BootCheck | None = None
    fast_path: bool = False
    no_source: bool = False
    #: kernels without current modules left as they are, kernel -> why (pending: no headers yet): booting one
    #: comes up without the patched driver, so the summary must name them
    waiting: dict[str, str] = field(default_factory=dict)
    #: why the remembered module source cannot be read (the build the headers wait for would fail), or None
    source_problem: str | None = None
    #: the descriptions of the actions applied, in order (what a dry run of the same plan listed)
    applied: list[str] = field(default_factory=list)
    #: kernels whose stored copy cannot put back what DKMS replaced: rebuilt (predicted, then found)
    broken: set[str] = field(default_factory=set)
    #: each built kernel's initramfs after the refresh
    initramfs: dict[str, InitramfsState] = field(default_factory=dict)

    @property
    def failed(self) -> list[KernelOutcome]:
        """Return the outcomes that failed or stay pending."""
        return [o for o in self.outcomes if o.status in ("failed", "pending", "skipped")]

    @property
    def changed(self) -> list[str]:
        """Return what the run changed on the host: repairs, installs, a boot pin made or released ([]: none)."""
        done = [f"reinstalled fwman's stored modules for {kver}" for kver in self.repaired]
        done += [line for outcome in self.outcomes for line in outcome.changed]
        return done + (self.boot.changed if self.boot is not None else [])

    def outcome(self, kver: str) -> KernelOutcome | None:
        """Return the last outcome of ``kver`` in this run (None: not built or decided yet)."""
        return next((o for o in reversed(self.outcomes) if o.kver == kver), None)


@dataclass
class BuildOptions:
    """How a kernel is built: ``modules build`` fetches and shows progress; the hooks build from the cache."""

    fetch: bool = False
    jobs: int | None = None
    progress: ProgressSink | None = None
    #: the source resolved once for every kernel (or the error resolving it raised); None: resolved per kernel
    resolved: Source | FwmanError | None = None
    #: called with each kernel's outcome as it comes (``modules build`` prints it)
    on_outcome: Callable[[KernelOutcome], None] | None = None
    #: said before each kernel's build (``modules build``'s ``== KVER``)
    headline: bool = False
    #: each outcome's message said after it (the catch-up)
    say_outcome: bool = False


@dataclass
class Plan:
    """The actions of one lifecycle run, in order, and the summary they fill when applied."""

    actions: list[Action]
    summary: RunSummary


# -- the actions -------------------------------------------------------------------------------------------
@dataclass
class RepairModules:
    """Put fwman's stored copy of ``kver``'s modules back where DKMS (or a package) replaced them; a copy that
    turns out unusable leaves the kernel to its rebuild (:class:`BuildKernel` with ``if_broken``)."""

    kver: str
    manifest: Manifest
    problem: str
    summary: RunSummary
    tell: Tell = silent

    def describe(self) -> str:
        """Return what is put back."""
        return f"reinstall fwman's stored modules for {self.kver} (DKMS or a package replaced them)"

    def is_needed(self, host: Host) -> bool:
        """Return True until the repair ran (the plan found the modules replaced and the stored copy usable)."""
        return self.kver not in self.summary.repaired and self.kver not in self.summary.broken

    def apply(self, host: Host) -> None:
        """Reinstall the stored copy (depmod runs) and verify it (hashing); else mark the kernel broken."""
        from fwman.driver.build.install import check_installed, repair_from_store

        self.tell(f"WARNING: {self.kver}: {self.problem} (DKMS or a package replaced it): reinstalling fwman's modules")
        if repair_from_store(host, self.manifest) and all(c.ok for c in check_installed(host, self.manifest)):
            self.summary.repaired.append(self.kver)
            self.tell(f"{self.kver}: fwman's modules are back in place and verified")
            return
        self.tell(f"{self.kver}: fwman's stored copy is missing or differs from the manifest: rebuilding")
        self.summary.broken.add(self.kver)


@dataclass
class BuildKernel:
    """Run the build of ``kver`` (:func:`~fwman.driver.build.pipeline.update_kernel`) and record its outcome;
    ``text`` is what the plan decided it will do (build, or the build's own finding: pending, left failed)."""

    kver: str
    spec: SourceSpec
    text: str
    summary: RunSummary
    options: BuildOptions
    force: bool = False
    #: only when the repair before it found the stored copy unusable (a rebuild of a kernel DKMS replaced)
    if_broken: bool = False
    #: said before the build (the hook's "building the patched NVIDIA modules for ...")
    intro: tuple[str, ...] = ()
    tell: Tell = silent
    done: bool = False

    def describe(self) -> str:
        """Return what the plan decided for the kernel."""
        return self.text

    def installed(self) -> bool:
        """Return True when it ran and built and installed the modules."""
        outcome = self.summary.outcome(self.kver) if self.done else None
        return outcome is not None and outcome.status == "built"

    def is_needed(self, host: Host) -> bool:
        """Return True until it ran; a rebuild only for a kernel found broken."""
        return not self.done and (not self.if_broken or self.kver in self.summary.broken)

    def apply(self, host: Host) -> None:
        """Build (its outcome, failed or pending too, is recorded: the run goes on). Raises FwmanError for what
        needs a person (disk, permissions)."""
        from fwman.driver.build.pipeline import update_kernel

        if self.options.headline:
            self.tell(f"== {self.kver}")
        for line in self.intro:
            self.tell(line)
        o = self.options
        force = self.force or self.kver in self.summary.broken
        outcome = update_kernel(host, self.kver, self.spec, force=force, fetch=o.fetch, tell=self.tell,
                                jobs=o.jobs, progress=o.progress, resolved=o.resolved)  # fmt: skip
        self.done = True
        self.summary.outcomes.append(outcome)
        if o.say_outcome:
            self.tell(outcome.message)
        if o.on_outcome is not None:
            o.on_outcome(outcome)


class MarkPending(BuildKernel):
    """A kernel the build leaves pending (no headers, build tools missing): the build's own check writes the
    marker with what it waits for, so the run is the same call."""


class LeaveFailed(BuildKernel):
    """A kernel whose last build failed while nothing it was built with changed: the build's own check leaves it
    (``skipped``) unless forced."""


class LeaveCurrent(BuildKernel):
    """A kernel whose modules are current (``modules build``): the build's own check leaves them (``current``)."""


@dataclass
class MarkNoSource:
    """Mark ``kver`` pending: no module source is configured (a build has nothing to build from)."""

    kver: str
    summary: RunSummary
    said: str
    tell: Tell = silent

    def describe(self) -> str:
        """Return the marker and the way out."""
        return f"mark {self.kver} pending: no module source configured (run `fwman modules build` once)"

    def is_needed(self, host: Host) -> bool:
        """Return True: the summary must say ``no_source`` each run (the marker is written only when new)."""
        return True

    def apply(self, host: Host) -> None:
        """Write the pending marker and say so."""
        from fwman.driver.build.manifest import KernelRecord, Marker

        KernelRecord(self.kver).pending(host, Marker(self.kver, "no module source configured"))
        self.summary.no_source = True
        self.tell(self.said)


class Install(Action, Protocol):
    """An action that installs a kernel's modules (a build, a bundle import): an initramfs refresh follows it."""

    done: bool

    @property
    def kver(self) -> str:
        """Return the kernel whose modules it installs."""
        ...

    def installed(self) -> bool:
        """Return True when it ran and put new modules in place."""
        ...


@dataclass
class RefreshInitramfs:
    """Regenerate ``kver``'s initramfs after its modules were installed where it carries NVIDIA modules that are
    not fwman's (:func:`~fwman.driver.boot.initramfs.refresh_initramfs`)."""

    build: Install
    summary: RunSummary
    tell: Tell = silent
    done: bool = False

    def describe(self) -> str:
        """Return whose initramfs is checked."""
        return f"refresh the initramfs of {self.build.kver} where it carries other NVIDIA modules"

    def is_needed(self, host: Host) -> bool:
        """Return True when the install before it is planned (a dry run) or ran (the run), until it ran: a dry
        run cannot know whether a build will install, so the step follows the build either way."""
        return not self.done and (self.build.done or self.build.is_needed(host))

    def apply(self, host: Host) -> None:
        """Regenerate when the install put new modules in place and the image is stale; never raises."""
        from fwman.driver.boot.initramfs import refresh_initramfs

        self.done = True
        if self.build.installed():
            self.summary.initramfs[self.build.kver] = refresh_initramfs(host, self.build.kver, self.tell)


@dataclass
class EnsureSafeBoot:
    """Keep the next boot on a kernel with working modules: release a pin whose reason is gone, pin otherwise
    (:func:`~fwman.driver.boot.pin.ensure_safe_boot`). Needed when a step before it changes a kernel, or the
    boot is not settled (:func:`~fwman.driver.boot.pin.boot_settled`)."""

    before: Sequence[Tracked]
    summary: RunSummary
    situation: Situation
    tell: Tell = silent

    def describe(self) -> str:
        """Return what is checked."""
        return CHECK_BOOT

    def is_needed(self, host: Host) -> bool:
        """Return True when it has not run and a kernel step is (or was) applied, or the boot is not settled."""
        from fwman.driver.boot.pin import boot_settled

        if self.summary.boot is not None:
            return False
        return stepped(self.before, host) or not boot_settled(host, self.situation.hash_files)

    def apply(self, host: Host) -> None:
        """Run the boot check and keep it in the summary (never raises for a pin that cannot be made)."""
        from fwman.driver.boot.pin import ensure_safe_boot

        s = self.situation
        self.summary.boot = ensure_safe_boot(host, self.tell, hash_files=s.hash_files, defer=s.defer)


@dataclass
class RecordStamp:
    """Write what the boot fast path (``fwman-catchup``) checks once every kernel is settled and no pin is left;
    remove it otherwise (the next boot runs the whole catch-up)."""

    kernels: list[str]
    before: Sequence[Tracked] = ()

    def describe(self) -> str:
        """Return the stamp."""
        return f"update the boot fast path's record of the kernels and fwman's module files ({paths.MODULES_STAMP})"

    def wanted(self, host: Host) -> bytes | None:
        """Return the stamp's bytes as they should be now, None when there should be none."""
        from fwman.driver.build.manifest import load_manifest, manifest_is_current

        settled = all(manifest_is_current(host, k) or not headers_present(host, k) for k in self.kernels)
        if not settled or host.exists(paths.BOOT_PIN_STATE):
            return None
        lines = ["fwman-catchup-stamp 1", "kernels " + " ".join(sorted(self.kernels))]
        for kver in sorted(self.kernels):
            if not headers_present(host, kver):
                lines.append(f"noheaders {kver}")  # the script runs the full catch-up once they appear
                continue
            manifest = load_manifest(host, kver)
            if manifest is not None:
                lines += [f"file {entry.path}" for entry in manifest.modules.values()]
        # surrogateescape: a directory name that is not UTF-8 is written back as the bytes the shell fast path lists
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")

    def is_needed(self, host: Host) -> bool:
        """Return True when a kernel step before it was (or would be) applied, or the stamp differs from what it
        should be (absent, other bytes, or one too many)."""
        if stepped(self.before, host):
            return True
        want = self.wanted(host)
        if want is None:
            return host.exists(paths.MODULES_STAMP)
        try:
            return host.read_bytes(paths.MODULES_STAMP) != want
        except MissingError:
            return True

    def apply(self, host: Host) -> None:
        """Write or remove the stamp."""
        want = self.wanted(host)
        if want is None:
            host.unlink(paths.MODULES_STAMP)
        else:
            host.write_bytes(paths.MODULES_STAMP, want)


def stepped(before: Sequence[Tracked], host: Host) -> bool:
    """Return True when one of the kernel steps ``before`` was applied, or (a dry run) would be: what follows
    them (the boot check, the stamp) is then judged again on the kernels as they turned out."""
    return any(a.applied or a.is_needed(host) for a in before)


# -- the one decision ----------------------------------------------------------------------------------------
def replaced_modules(host: Host, kernels: Sequence[str]) -> list[tuple[str, Manifest, str]]:
    """Return (kernel, manifest, first problem) for each of ``kernels`` whose installed modules depmod no longer
    resolves to fwman's (DKMS replaced them): sizes and resolution only, no hashing. Never raises."""
    from fwman.driver.build.install import check_installed
    from fwman.driver.build.manifest import load_manifest

    found = []
    for kver in kernels:
        try:
            manifest = load_manifest(host, kver)
        except ParseError:
            continue
        if manifest is None:
            continue
        bad = [c for c in check_installed(host, manifest, hash_files=False) if not c.ok]
        if bad:
            found.append((kver, manifest, bad[0].problem or "not fwman's module"))
    return found


def kernel_step(
    host: Host, kver: str, spec: SourceSpec, force: bool, summary: RunSummary, options: BuildOptions,
    *, current: bool = False, tell: Tell = silent, intro: tuple[str, ...] = (),
) -> BuildKernel:  # fmt: skip
    """Return the action for ``kver`` (headers or not): build it; or, as the build's own checks will find, mark
    it pending (no headers, build tools missing), leave it because its last build failed and nothing it
    depended on changed, or (``current``: ``modules build``) leave it because its modules are current. Asked
    without fetching or building (:func:`~fwman.driver.build.attempt.retry_reason`, ``current_manifest``)."""
    from fwman.driver.build import toolchain
    from fwman.driver.build.attempt import retry_reason
    from fwman.driver.build.kbuild import kernel_patches
    from fwman.driver.build.manifest import failed_path, read_marker
    from fwman.driver.build.pipeline import current_attempt, current_manifest
    from fwman.driver.build.source import Source, cached_source_id, resolve_source

    def step(kind: type[BuildKernel], text: str) -> BuildKernel:
        return kind(kver, spec, text, summary, options, force, intro=intro, tell=tell)

    build = build_text(kver, spec)
    if not headers_present(host, kver):
        return step(MarkPending, f"mark {kver} pending until its headers are installed")
    try:
        patches = kernel_patches(host, kver)
    except ParseError:
        return step(BuildKernel, build)  # the run fails it on the patch, naming it
    source_id = cached_source_id(host, spec)
    if current and not force and source_id is not None:
        # a local tree is read as the run reads it; a fork branch at its cached commit (a donor fork's build is
        # not judged without its verified patch: the plan says build, the run may find it current)
        source: Source | None = None
        try:
            if spec.source_dir:
                source = resolve_source(host, spec, fetch=False)
            elif "+patch:" not in source_id:
                source = Source("", source_id, source_id, spec.fork, spec.branch, "")
        except FwmanError:  # the run says what is wrong with the tree
            source = None
        if source is not None and current_manifest(host, kver, source, patches) is not None:
            return step(LeaveCurrent, f"leave {kver} as it is: its patched modules are current (--force rebuilds)")
    missing = toolchain.missing_tools(host.which, patching=bool(patches))
    if missing:
        tools = ", ".join(t.command for t in missing)
        text = f"mark {kver} pending: the build tools {tools} are missing ({toolchain.install_line(missing)})"
        return step(MarkPending, text)
    failed = read_marker(host, failed_path(kver))
    if failed is None or force or source_id is None:
        return step(BuildKernel, build)
    why = retry_reason(failed, current_attempt(host, kver, source_id, patches), lambda t: host.which(t) is not None)
    if why is None:
        return step(
            LeaveFailed,
            f"leave {kver} as it is: its build failed before ({failed.reason}) and the source, toolchain, patches "
            f"and headers are the same (run `fwman modules build --kernel {kver} --force` after fixing the cause)",
        )
    return step(BuildKernel, f"{build} (its last build failed; trying again: {why})")


def build_text(kver: str, spec: SourceSpec) -> str:
    """Return the plan's line for a build of ``kver`` from ``spec``."""
    return f"build the patched modules for {kver} from {spec.describe()}"


def plan(
    host: Host,
    situation: Situation,
    *,
    spec: SourceSpec | None = None,
    options: BuildOptions | None = None,
    install: Install | None = None,
    tell: Tell = silent,
) -> Plan:
    """Return the actions that converge ``situation``'s kernels, in order, with the summary they fill.

    A hook (``origin`` in :data:`HOOK_ORIGINS`): put back what DKMS replaced for any kernel, build the hook's
    kernel unless current (pending without a source), rebuild the kernels whose stored copy is unusable,
    refresh their initramfs (not the hook's own kernel from ``postinst``: initramfs-tools runs after it), keep
    the boot safe. The catch-up (:data:`CATCHUP`): the same for every kernel without current modules, then the
    stamp. ``modules build`` (:data:`BUILD`, ``spec`` given): each kernel built unless current, its initramfs
    refreshed, the boot kept safe. A bundle import (:data:`IMPORT`): its ``install``, the initramfs refreshed,
    the boot kept safe. Reads the host (no hashing but the stored copies of replaced modules);
    changes nothing. Raises FwmanError for a module source record that cannot be read.
    """
    from fwman.driver.build.install import stored_copy
    from fwman.driver.build.manifest import manifest_is_current
    from fwman.driver.build.source import load_source_spec

    s = situation
    summary = RunSummary()
    opts = options or BuildOptions(say_outcome=s.origin == CATCHUP)
    actions: list[Action] = []
    refreshes: list[Action] = []

    def kernel(kver: str, force: bool, *, refresh: bool = True, intro: tuple[str, ...] = ()) -> None:
        assert spec is not None
        step = kernel_step(host, kver, spec, force, summary, opts, current=s.origin == BUILD, tell=tell,
                           intro=intro)  # fmt: skip
        actions.append(step)
        if refresh and type(step) is BuildKernel:
            (actions if s.origin == BUILD else refreshes).append(RefreshInitramfs(step, summary, tell))

    def rebuild_if_broken(kver: str, *, refresh: bool = True) -> None:
        assert spec is not None
        step = BuildKernel(kver, spec, build_text(kver, spec), summary, opts, True, True, tell=tell)
        actions.append(step)
        if refresh:
            refreshes.append(RefreshInitramfs(step, summary, tell))

    def finish(stamp: bool = False) -> Plan:
        steps = [Tracked(a) for a in actions]  # the boot check follows a step that was (or would be) applied
        after: list[Action] = [RecordStamp(kernels, steps)] if stamp else []
        return Plan([*steps, EnsureSafeBoot(steps, summary, s, tell), *after], summary)

    if s.origin == IMPORT:  # a bundle's modules installed the way a build installs them
        assert install is not None
        actions += [install, RefreshInitramfs(install, summary, tell)]
    elif s.origin == BUILD:
        assert spec is not None
        for kver in s.kernels:
            kernel(kver, s.force)
    kernels = installed_kernels(host)
    if s.origin in (IMPORT, BUILD):
        return finish()

    replaced = replaced_modules(host, kernels)
    repairable = [k for k, m, _ in replaced if stored_copy(host, m) is not None]
    summary.broken = {k for k, _, _ in replaced if k not in repairable}
    for kver, manifest, problem in replaced:
        if kver in repairable:
            actions.append(RepairModules(kver, manifest, problem, summary, tell))
    problems = {k: p for k, _, p in replaced}

    def broken_intro(kver: str) -> tuple[str, ...]:
        if kver not in summary.broken:
            return ()
        return (f"WARNING: {kver}: {problems[kver]} (DKMS or a package replaced it): reinstalling fwman's modules",
                f"{kver}: fwman's stored copy is missing or differs from the manifest: rebuilding")  # fmt: skip

    if s.origin in HOOK_ORIGINS:
        (named,) = s.kernels
        spec = load_source_spec(host)
        if spec is None:
            said = f"no module source configured: {named} marked pending (run `fwman modules build` once)"
            actions.append(MarkNoSource(named, summary, said, tell))
        elif (manifest_is_current(host, named) or named in repairable) and named not in summary.broken:
            from fwman.driver.build.pipeline import KernelOutcome

            summary.outcomes.append(KernelOutcome(named, "current", f"{named}: patched modules already current"))
            if named in repairable:
                rebuild_if_broken(named, refresh=s.origin != "postinst")
        else:
            intro = f"{s.origin}: building the patched NVIDIA modules for {named} from {spec.describe()}"
            kernel(named, named in summary.broken, refresh=s.origin != "postinst", intro=(*broken_intro(named), intro))
        if spec is not None:
            for kver in (k for k in kernels if k in problems and k != named):
                if kver in summary.broken:
                    kernel(kver, True, intro=broken_intro(kver))
                else:
                    rebuild_if_broken(kver)
    else:
        assert s.origin == CATCHUP, s.origin
        stale = [k for k in kernels if s.force or k in summary.broken
                 or (not manifest_is_current(host, k) and k not in repairable)]  # fmt: skip
        spec = load_source_spec(host) if stale or repairable else None
        for kver in sorted(set(stale) | set(repairable), key=version_key):
            if kver not in stale:
                if spec is not None:
                    rebuild_if_broken(kver)
            elif spec is None:
                said = f"{kver}: no module source configured (run `fwman modules build` once): pending"
                actions.append(MarkNoSource(kver, summary, said, tell))
            else:
                kernel(kver, s.force or kver in summary.broken, intro=broken_intro(kver))
    actions += refreshes
    return finish(stamp=s.origin == CATCHUP)


def still_needed(host: Host, plan: Plan) -> list[str]:
    """Return the descriptions of the plan's actions the host still needs: what its run would apply (the same
    objects). Raises RootDoorError (:func:`fwman.host.actions.pending`)."""
    return [a.describe() for a in pending(host, plan.actions)]


def converge(host: Host, plan: Plan) -> RunSummary:
    """Apply the plan's actions in order and return the summary (``applied``: what a dry run listed). The boot
    check is read even when nothing needed it (it then changes nothing), for the summary's ``boot``. Raises what
    an action raises (the actions before it stay applied; running again continues)."""
    plan.summary.applied = apply_all(host, plan.actions)
    boot = next((a for a in plan.actions if isinstance(a, EnsureSafeBoot)), None)
    if boot is not None and plan.summary.boot is None:
        boot.apply(host)
    return plan.summary
