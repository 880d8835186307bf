"""``fwman plan`` and ``fwman apply``: the box brought to its P2P target in one command. The plan has two halves. **What
fwman does**: each subject's own planner (the kernel hooks, the DKMS block, the patched modules of every installed
kernel, the module options with nova_core kept off, the user-space hold), in that order, each listing the steps it still
needs: the same planners ``fwman hooks install``, ``fwman dkms block``, ``fwman modules build``, ``fwman driver settings
--apply`` and ``fwman userspace hold`` run, so ``fwman plan`` (``fwman apply --dry-run``) prints exactly what ``fwman
apply`` then does, and a second ``apply`` does nothing. **What the owner does**: every step fwman cannot take, from
doctor's chain (firmware, the firmware setup, the kernel command line, ACS, NCCL in a named container), each with the
exact command, file and line doctor names; then the reboot and ``fwman apply --check``, which verifies (doctor's
verdict, the P2P record)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.target import Target, resolve_target
from fwman.app.text import Out, Result, say
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, PartialError, VerificationError
from fwman.core.findings import Finding, Severity
from fwman.core.jsonout import OMIT, encode, meta
from fwman.driver.kernels import headers_present, installed_kernels
from fwman.host.actions import Tell, silent
from fwman.host.base import Host
from fwman.reports.doctor import run_doctor
from fwman.reports.doctor.checks.common import gpu_pairs
from fwman.reports.doctor.facts import Facts, gather

#: doctor's findings that fwman's own steps answer (the rest, blocking or warned with a fix, are the owner's)
ANSWERED = {
    "driver.fork": "modules",  # the fork's module for every kernel; loaded at the reboot
    "p2p.topo": "modules",  # CNS goes with the stock module
    "driver.settings": "settings",
    "driver.settings.initramfs": "settings",
    "driver.nova_core": "settings",
    "driver.nova_core.bound": "settings",
    "driver.dkms": "dkms",
    "p2p.verified": "verify",  # the last step of every plan
}


@dataclass
class Subject:
    """One subject's part of the plan: what it brings about, the steps its planner still needs, and how to run it.

    ``run`` applies the same planner (it plans again at that moment: a host changed since ``plan`` is met as it
    is) and returns the steps it took; ``command``: the fwman command that does this part alone. Its JSON form
    is a ``parts[]`` entry of ``fwman.plan/1``: ``{"part", "goal", "command", "steps", "not_recorded"}``.
    """

    name: str = field(metadata=meta(key="part"))
    goal: str
    command: str
    steps: list[str]
    run: Callable[[Tell], list[str]] = field(repr=False, compare=False, metadata=OMIT)
    #: why the part could not be planned (a replay that lacks what it reads); None: planned
    unknown: str | None = field(default=None, metadata=meta(key="not_recorded"))

    @property
    def needed(self) -> bool:
        """Return True when the planner listed a step."""
        return bool(self.steps)


def _unless_unrecorded(
    name: str, plan: Callable[[], tuple[Subject | None, list[Manual]]]
) -> tuple[Subject | None, list[Manual]]:
    """Return what ``plan`` returns, or, on a replay that did not record what the part reads, the part marked
    ``unknown`` with the path (a replay never guesses a state it was not shown)."""
    try:
        return plan()
    except NotRecordedError as e:
        return Subject(name, "", "", [], _refuse, unknown=e.message), []


def _refuse(tell: Tell) -> list[str]:
    raise FwmanError("a part this replay could not plan cannot run")  # apply never runs on a replay


@dataclass(frozen=True)
class Manual:
    """A step fwman cannot take: what, why (the finding), and the exact command or setting. Its JSON form, an
    ``owner_steps[]`` entry, uses a finding's names for the same things: ``message``, ``fix``, ``before_apply``."""

    id: str
    what: str = field(metadata=meta(key="message"))
    how: str = field(metadata=meta(key="fix"))
    severity: str = "block"
    #: needed before fwman's part can be complete (headers, a module source): said first, and `apply` again after
    first: bool = field(default=False, metadata=meta(key="before_apply"))


def _manual_from(findings: list[Finding]) -> list[Manual]:
    """Return the owner's steps: each blocking or warned finding with a fix that fwman's steps do not answer."""
    out: list[Manual] = []
    for f in findings:
        if f.id in ANSWERED or f.severity not in (Severity.BLOCK, Severity.WARN) or not f.fix:
            continue
        out.append(Manual(f.id, f.message, f.fix, f.severity.value))
    return out


def _hooks(host: Host, permit: Callable[[], None]) -> Subject:
    from fwman.app.hooks import install_hooks

    planned = install_hooks(host, dry_run=True)
    steps = [] if planned.package is not None else planned.actions  # the Debian package's files: dpkg's
    return Subject("hooks", "the kernel hooks, boot checks and catch-up service installed", "fwman hooks install",
                   steps, lambda tell: install_hooks(host, permit=permit, tell=tell).actions)  # fmt: skip


def _dkms(host: Host, permit: Callable[[], None]) -> Subject:
    from fwman.app.dkms.change import block_dkms

    planned = block_dkms(host, dry_run=True).actions
    steps = [s for s in planned if not s.startswith("leave ")]  # "leave the fork registered": nothing to do
    return Subject("dkms", "NVIDIA's stock DKMS modules kept from replacing the patched ones", "fwman dkms block",
                   steps, lambda tell: block_dkms(host, permit=permit, tell=tell).actions)  # fmt: skip


def _modules(host: Host, target: Target, permit: Callable[[], None]) -> tuple[Subject | None, list[Manual]]:
    """Return the modules subject (None without a source) and the owner's steps it needs (headers, a source)."""
    from fwman.app.modules.build import BuildRequest, build_modules, planned_step
    from fwman.driver.headers import advise_host

    spec = target.spec
    if spec is None:
        problem = target.problem or FwmanError(target.why)
        how = problem.hint or "see `fwman driver branches`"
        return None, [Manual("modules.source", problem.message, how, first=True)]
    manual: list[Manual] = []
    kernels: list[str] = []
    steps: list[str] = []
    for kver in installed_kernels(host):
        if not headers_present(host, kver):
            package = advise_host(host, kver).package
            how = f"apt install {package}" if package else f"install the headers of {kver}"
            what = f"kernel {kver} has no headers: its modules cannot be built"
            then = f"{how}, then `fwman apply` again (or the kernel hook builds them)"
            manual.append(Manual("modules.headers", what, then, first=True))
        else:
            step = planned_step(host, kver, spec, False)
            # a build, or a kernel whose build failed and that the same source cannot build yet: the part is not
            # in place for it, so apply runs it too and stops there, naming the kernel and the cause
            if step.startswith("build ") or ": its build failed before" in step:
                kernels.append(kver)
                steps.append(step)
    request = BuildRequest(kernels=tuple(kernels), fork=spec.fork, branch=spec.branch, source_dir=spec.source_dir)

    def run(tell: Tell) -> list[str]:
        permit()
        result = build_modules(host, request, tell)
        result.raise_for_failures()
        # said as the plan said it: the dry run is the plan (a kernel found current by then did not change)
        built = {b.outcome.kver for b in result.builds if b.outcome.changed}
        return [step for kver, step in zip(kernels, steps, strict=True) if kver in built]

    command = f"fwman modules build --all {_source_options(target)}".rstrip()
    return Subject("modules", "the patched modules built for every installed kernel", command, steps, run), manual


def _source_options(target: Target) -> str:
    """Return the ``modules build`` options that name the target's source."""
    spec = target.spec
    if spec is None:
        return ""
    if spec.source_dir:
        return f"--source {spec.source_dir}"
    return f"--fork {spec.fork} --branch {spec.branch}"


def _settings(host: Host, permit: Callable[[], None]) -> Subject:
    from fwman.app.driver.settings import driver_settings

    planned = driver_settings(host, apply=True, dry_run=True).applied
    steps = planned.actions if planned is not None else []

    def run(tell: Tell) -> list[str]:
        done = driver_settings(host, apply=True, permit=permit, tell=tell).applied
        return done.actions if done is not None else []

    return Subject("settings", "the module options these GPUs need, nova_core kept off, the initramfs current",
                   "fwman driver settings --apply", steps, run)  # fmt: skip


def _hold(host: Host, permit: Callable[[], None]) -> tuple[Subject | None, list[Manual]]:
    from fwman.app.userspace import hold_packages

    try:
        planned = hold_packages(host, dry_run=True)
    except MissingError as e:  # no NVIDIA user-space package to hold (NVIDIA's .run installer, or none yet)
        return None, [Manual("userspace.hold", f"user-space hold: {e.message}", e.hint or "", "info")]
    subject = Subject("userspace", "the NVIDIA user-space packages held at their version", "fwman userspace hold",
                      planned.actions, lambda tell: hold_packages(host, permit=permit).actions)  # fmt: skip
    return subject, []


#: the closing steps of every plan
FINISH = "reboot, then `fwman apply --check` (doctor's verdict, the P2P record), then `fwman p2p`"


@dataclass
class Plan(Result):
    """The way to the target: fwman's subjects in order, then the owner's steps; after ``apply``, what was done."""

    host: str
    target: Target
    subjects: list[Subject]
    manual: list[Manual]
    #: doctor's chain could not run (no GPU here, an unreadable host): the owner's half is then unknown
    doctor_error: str | None = None
    dry_run: bool = True
    done: list[str] = field(default_factory=list)  # the steps applied (apply)
    error: FwmanError | None = None  # where apply stopped
    stopped_at: str | None = None  # the subject that failed
    #: doctor's findings, in chain order (empty when it could not run)
    findings: list[Finding] = field(default_factory=list, repr=False)
    #: why this box needs none of fwman's parts (one GPU; P2P already working with another driver); None: it does
    not_needed: str | None = None

    @property
    def todo(self) -> list[Subject]:
        """Return the subjects with steps still needed (planned)."""
        return [s for s in self.subjects if s.needed]

    def aim(self) -> str:
        """Return the target in one line: the module source, or the driver as it is when fwman's part is not needed."""
        if self.not_needed:
            return f"the {self.target.version or 'loaded'} driver as it is"
        return self.target.describe()

    @property
    def unknown(self) -> list[Subject]:
        """Return the parts a replay could not plan (what they read was not recorded)."""
        return [s for s in self.subjects if s.unknown is not None]

    @property
    def changed(self) -> bool:
        """Return True when ``apply`` changed the host."""
        return bool(self.done) and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.plan/1`` (``fwman plan``, ``fwman apply``)."""
        error = self.error
        return {
            "host": self.host,
            "dry_run": self.dry_run,
            "changed": self.changed,
            "target": self.target.to_json(),
            "parts": encode([s for s in self.subjects if s.needed or s.unknown]),
            "applied": self.done,
            "owner_steps": encode(self.manual),
            "doctor_error": self.doctor_error,
            "stopped": None if error is None else {"part": self.stopped_at, "message": error.message},
            "not_needed": self.not_needed,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the target, fwman's steps (to do, or done), and the owner's steps, numbered in one sequence."""
        out: Out = [say(f"fwman {'plan' if self.dry_run else 'apply'}: {self.host}"), say(f"target: {self.aim()}")]
        n = 0
        if self.not_needed:
            out += [say(), say(f"fwman's part: not needed: {self.not_needed}", "good")]
        elif self.dry_run:
            busy = self.todo or self.unknown
            out += [say(), say("fwman does (`fwman apply`):" if busy else "fwman's part: nothing to do", "bold")]
            for s in self.todo:
                n += 1
                out.append(say(f"{n:>2} {s.name}: {s.goal}  [{s.command}]"))
                out += [say(f"     would {step}") for step in s.steps]
            out += [say(f"   {s.name}: not known from this replay: {s.unknown}", "yellow") for s in self.unknown]
        elif self.error is None:
            out.append(say("applied" if self.changed else "nothing to do: fwman's part is in place", "good"))
        first = [m for m in self.manual if m.first]
        if first:
            out += [say(), say("you do first (fwman's part waits for it):", "bold")]
        for m in first:
            n += 1
            out += [say(f"{n:>2} {m.what}")] + ([say(f"     how: {m.how}")] if m.how else [])
        later = [m for m in self.manual if not m.first]
        if later or self.doctor_error:
            out += [say(), say("you do (fwman cannot):", "bold")]
        if self.doctor_error:
            out.append(say(f"   doctor could not run here: {self.doctor_error}", "yellow"))
        for m in later:
            if m.severity == "info":  # nothing to do for peer-to-peer: said, not numbered
                out.append(say(f"   note: {m.what}" + (f" ({m.how})" if m.how else "")))
                continue
            n += 1
            out += [say(f"{n:>2} {m.what}")] + ([say(f"     how: {m.how}")] if m.how else [])
        return out if self.not_needed else [*out, say(), say(f"then: {FINISH}")]

    def failure(self) -> FwmanError | None:
        """Return where ``apply`` stopped (PartialError when something was done before, the step's own error
        otherwise), None when it did not stop."""
        error = self.error
        if error is None:
            return None
        done = "; ".join(self.done) or "nothing"
        not_done = ", ".join(s.name for s in self.subjects[self._stop_index() :] if s.needed) or "nothing"
        message = f"apply stopped at {self.stopped_at}: {error.message} (done: {done}; not done: {not_done})"
        if self.done:
            return PartialError(message, hint=error.hint or "fix it and run `fwman apply` again: it continues")
        return type(error)(message, hint=error.hint or "fix it and run `fwman apply` again")

    def _stop_index(self) -> int:
        names = [s.name for s in self.subjects]
        return names.index(self.stopped_at) if self.stopped_at in names else len(names)


def make_plan(host: Host, *, permit: Callable[[], None] | None = None) -> Plan:
    """Return the plan for ``host``: each subject's needed steps and the owner's steps from doctor's chain.

    ``permit``: what a subject's run asks first (the CLI's root check). Raises what a planner raises for a host
    it cannot read (UsageError for an invalid config.toml, RootDoorError for a step that would act on this
    machine from under --root); the doctor's own failure (no GPU) is kept as ``doctor_error``.
    """
    allow = permit if permit is not None else (lambda: None)
    audit = None
    doctor_error = None
    findings: list[Finding] = []
    unneeded = None
    try:
        facts = gather(host, None)
        report = run_doctor(host, facts=facts)
        findings = report.findings
        audit = facts.audit.get()
        unneeded = _fork_not_needed(report.gpus, facts)
    except FwmanError as e:
        doctor_error = e.message
    if unneeded is not None:  # nothing of fwman's to install: the owner's steps are doctor's warnings, if any
        none = Target(None, audit.loaded.version if audit and audit.loaded else None, unneeded)
        return Plan(host.description, none, [], _manual_from(findings), None, findings=findings, not_needed=unneeded)
    target = resolve_target(host, audit)
    modules, manual = _unless_unrecorded("modules", lambda: _modules(host, target, allow))
    hold, hold_manual = _unless_unrecorded("userspace", lambda: _hold(host, allow))
    parts = [_unless_unrecorded("hooks", lambda: (_hooks(host, allow), []))[0],
             _unless_unrecorded("dkms", lambda: (_dkms(host, allow), []))[0], modules,
             _unless_unrecorded("settings", lambda: (_settings(host, allow), []))[0], hold]  # fmt: skip
    subjects = [s for s in parts if s is not None]
    owner = [*manual, *hold_manual, *_manual_from(findings)]
    return Plan(host.description, target, subjects, owner, doctor_error, findings=findings)


def _fork_not_needed(gpus: int, facts: Facts) -> str | None:
    """Return why this box needs none of fwman's P2P parts (one GPU; peer-to-peer that already works with a driver
    fwman did not install), None when it does or that cannot be told."""
    if gpus < 2:
        return "one GPU: peer-to-peer between GPUs does not apply, so the P2P fork is not needed"
    try:
        audit, matrix = facts.audit.get(), facts.p2p_read.get()
    except FwmanError:
        return None
    pairs = gpu_pairs(matrix.gpus)
    running = [m for m in audit.modules if m.kernel == audit.running_kernel and m.name == "nvidia"]
    fwmans = bool(running) and running[0].origin == "patched"  # fwman's fork: keep it for every kernel
    if pairs and all(matrix.cell(a, b) == "OK" for a, b in pairs) and not fwmans:
        version = audit.loaded.version if audit.loaded else "loaded"
        return f"the {version} driver already reads OK for every GPU pair (topo -p2p r): the P2P fork is not needed"
    return None


def apply_plan(plan: Plan, *, permit: Callable[[], None], tell: Tell = silent) -> Plan:
    """Apply ``plan``'s subjects in order, saying each as it starts; return the plan with what was done.

    Stops at the first subject that fails: ``error`` and ``stopped_at`` say where, ``done`` what was done before
    (it stays done; running ``apply`` again continues). Raises what ``permit`` raises before anything is done.
    """
    permit()
    plan.dry_run = False
    for subject in plan.todo:
        tell(f"== {subject.name}: {subject.goal}")
        try:
            plan.done += subject.run(tell)
        except FwmanError as e:
            plan.error, plan.stopped_at = e, subject.name
            break
    return plan


@dataclass
class Check(Result):
    """``fwman apply --check``: what is still missing after the reboot (fwman's steps, the owner's, doctor's)."""

    plan: Plan
    blockers: list[Finding]
    warnings: list[Finding]

    @property
    def ready(self) -> bool:
        """Return True when fwman's part is in place and doctor finds nothing that blocks peer-to-peer."""
        plan = self.plan
        return not plan.todo and not plan.unknown and not self.blockers and plan.doctor_error is None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.apply-check/1``: ``findings`` are doctor's blockers and warnings."""
        return {
            "host": self.plan.host,
            "at_target": self.ready,
            "target": self.plan.target.to_json(),
            "parts": encode([*self.plan.todo, *self.plan.unknown]),
            "findings": encode([*self.blockers, *self.warnings]),
            "doctor_error": self.plan.doctor_error,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the verdict and each thing still missing with its fix."""
        out: Out = [say(f"fwman apply --check: {self.plan.host}"), say(f"target: {self.plan.aim()}")]
        for s in self.plan.todo:
            out.append(say(f"missing: {s.name}: {s.goal} (`fwman apply` does it: {'; '.join(s.steps)})", "red"))
        out += [
            say(f"cannot verify {s.name}: not known from this replay: {s.unknown}", "red") for s in self.plan.unknown
        ]
        if self.plan.doctor_error:
            out.append(say(f"cannot verify: {self.plan.doctor_error}", "red"))
        for f in self.blockers:
            out += [say(f"blocked: {f.message}", "red"), say(f"     fix: {f.fix}" if f.fix else "     (no fix known)")]
        for f in self.warnings:
            out += [say(f"warning: {f.message}", "yellow")] + ([say(f"     fix: {f.fix}")] if f.fix else [])
        verdict = "ready: the box is at its P2P target" if self.ready else "not ready: see above"
        return [*out, say(verdict, "good" if self.ready else "bad")]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when something is still missing."""
        if self.ready:
            return None
        missing = (
            len(self.plan.todo) + len(self.plan.unknown) + len(self.blockers) + (1 if self.plan.doctor_error else 0)
        )
        first = self.plan.todo[0].command if self.plan.todo else (self.blockers[0].fix if self.blockers else None)
        return VerificationError(f"the box is not at its P2P target ({missing} missing)", hint=first or "")


def check(host: Host) -> Check:
    """Return what is still missing on ``host``: the plan's pending steps, doctor's blockers, and a P2P copy test
    never recorded for this configuration (``fwman p2p`` records it; --check reads the record and does not
    load the GPUs itself). Raises what :func:`make_plan` raises."""
    plan = make_plan(host)
    blockers = [f for f in plan.findings if f.severity is Severity.BLOCK]
    # P2P never verified on this configuration (info in doctor) is missing here: the target is a verified box
    if plan.not_needed is None:
        blockers += [f for f in plan.findings if f.id == "p2p.verified" and f.severity is Severity.INFO and f.fix]
    warnings = [f for f in plan.findings if f.severity is Severity.WARN]
    return Check(plan, blockers, warnings)
