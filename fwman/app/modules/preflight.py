"""``fwman modules preflight``: will the patched modules build for the kernels apt installs next? Typed arguments in
(:class:`PreflightRequest`), a result model out (:class:`PreflightResult`, which owns the ``fwman.modules-preflight/1``
document); no click. The work is :mod:`fwman.driver.preflight` (download, unpack, build, record) and
:mod:`fwman.driver.kernel_hold` (fwman's apt pin)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import plan_or_apply
from fwman.app.text import Out, Result, Span, line, say
from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError, UsageError, VerificationError
from fwman.core.jsonout import OMIT, meta
from fwman.driver import kernel_hold
from fwman.driver import preflight as pf
from fwman.driver.build.kbuild import compiler_version
from fwman.driver.build.lock import module_lock
from fwman.driver.build.manifest import now_iso
from fwman.driver.build.pipeline import phase_lines
from fwman.driver.build.progress import ProgressSink
from fwman.driver.build.source import Source, load_source_spec, resolve_source
from fwman.driver.kernels import version_key
from fwman.host.actions import Tell, apply_all, pending, silent
from fwman.host.base import Host


def phase_progress(tell: Tell) -> ProgressSink:
    """Return the progress sink of a pre-flight's (short) builds: each phase a line through ``tell``."""
    return phase_lines(tell)


@dataclass(frozen=True)
class PreflightRequest:
    """What ``fwman modules preflight`` was asked."""

    hold: bool = False  #: hold the kernels that will not build (fwman's apt pin)
    release: bool = False  #: only lift fwman's holds
    dry_run: bool = False
    jobs: int | None = None
    #: the build progress sink; None: phase lines through ``tell``
    progress: ProgressSink | None = None


@dataclass
class KernelCheck:
    """One kernel of the pre-flight: what apt offers, the verdict (None in a dry run without a record), held."""

    offer: pf.KernelOffer
    verdict: pf.KernelVerdict | None
    held: bool = False
    plan: str | None = None  #: a dry run: what a real run would do for it

    def to_json(self) -> dict[str, Any]:
        """Return the ``kernels[]`` entry of ``fwman.modules-preflight/1``."""
        doc: dict[str, Any] = {
            "kernel": self.offer.kernel,
            "packages": dict(sorted(self.offer.packages.items())),
            "offered": not self.offer.held,
            "held": self.held,
            "plan": self.plan,
        }
        verdict = self.verdict.to_dict() if self.verdict is not None else None
        doc["status"] = verdict["status"] if verdict else None
        doc["verdict"] = verdict["verdict"] if verdict else None
        doc["result"] = verdict
        return doc


def _source_json(source: Source) -> dict[str, str | None]:
    """Return the module source as a pre-flight shows it: its label, commit (a tree's id when none), fork, branch."""
    return {"label": source.label, "commit": source.commit or source.source_id, "fork": source.fork,
            "branch": source.branch}  # fmt: skip


@dataclass
class PreflightResult(Result):
    """The pre-flight of every kernel apt offers (and fwman holds), and what changed in fwman's hold.

    Its fields in their order are the payload of ``fwman.modules-preflight/1`` (:func:`fwman.core.jsonout.fields_of`;
    ``changed`` after ``dry_run``, ``safe`` last, ``release_only`` left out).
    """

    dry_run: bool = field(metadata=meta(then=("changed",)))
    actions: list[str] = field(default_factory=list)  #: the hold's changes: done, or to do in a dry run
    source: Source | None = field(default=None, metadata=meta(via=_source_json))
    kernels: list[KernelCheck] = field(default_factory=list)
    #: kernels held back once it is done
    held: list[str] = field(default_factory=list, metadata=meta(key="held_kernels"))
    newly_held: list[str] = field(default_factory=list)
    #: kernels whose hold was (or would be) lifted
    released: list[str] = field(default_factory=list, metadata=meta(key="released_kernels"))
    #: what apt's simulation keeps back
    kept_back: list[str] = field(default_factory=list, metadata=meta(then=("safe",)))
    release_only: bool = field(default=False, metadata=OMIT)

    @property
    def changed(self) -> bool:
        """Return True when fwman's apt pin changed (never in a dry run; the verdict record does not count)."""
        return bool(self.actions) and not self.dry_run

    @property
    def safe(self) -> bool:
        """Return True when every kernel checked builds (also when apt offers none)."""
        return all(k.verdict is not None and k.verdict.status == pf.SAFE for k in self.kernels if k.verdict)

    def failure(self) -> FwmanError | None:
        """Return the error the command ends with: VerificationError (exit 4) when a kernel will not build,
        MissingError (exit 5) when one could not be checked (its headers could not be had); None when every
        kernel is safe to install, and for a dry run or ``--release``."""
        if self.release_only or self.dry_run:
            return None
        verdicts = [k.verdict for k in self.kernels if k.verdict is not None]
        broken = [v for v in verdicts if v.status == pf.BROKEN]
        if broken:
            first = broken[0]
            held = "held back (fwman modules preflight --release lifts it)" if self.held else None
            return VerificationError(
                f"the patched modules will not build for {', '.join(v.kernel for v in broken)}: "
                f"{first.kernel}: {first.line_text()}",
                hint=held
                or "hold the kernel until a fork builds it: `fwman modules preflight --hold`; see the build log "
                f"{first.log or pf.log_path(first.kernel)}",
            )
        unchecked = [v for v in verdicts if v.status == pf.UNCHECKED]
        if unchecked:
            return MissingError(
                f"could not pre-flight {', '.join(v.kernel for v in unchecked)}: {unchecked[0].message}",
                hint="check the apt sources (`apt-get update`) and run it again",
            )
        return None

    def text(self, verbose: int = 0) -> Out:
        """Return one line per kernel (its verdict, recorded or new, and whether it is held), then what happened
        to fwman's hold; for ``--release``, only the hold."""
        if self.release_only:
            if self.dry_run:
                return [say(f"would {a}") for a in self.actions] or [say("fwman holds no kernel back")]
            if self.changed:
                return [say(f"released fwman's hold of {', '.join(self.released) or 'the kernels it held'}")]
            return [say("fwman holds no kernel back")]
        out: Out = []
        if not self.kernels:
            out.append(say("no new kernel to pre-flight: apt would install none (`apt-get -s dist-upgrade`)"))
        for check in self.kernels:
            offer, verdict = check.offer, check.verdict
            where = "held back by fwman" if offer.held else "offered by apt"
            if verdict is None:
                out.append(say(f"{offer.kernel} ({where}): would {check.plan}"))
                continue
            good = verdict.status == pf.SAFE and not verdict.nova_problem
            styled = Span(verdict.line_text(), "green" if good else "bad")
            cached = " (recorded)" if verdict.cached else ""
            held = ", HELD" if check.held else ""
            out.append(line(f"{offer.kernel} ({where}{held}): ", styled, cached))
        if self.dry_run:
            return out + [say(f"would {a}") for a in self.actions]
        out += [
            say(f"held back {kver} (apt pin {paths.APT_KERNEL_PREFLIGHT_PIN}); lift: fwman modules preflight --release",
                "yellow")
            for kver in self.newly_held
        ]  # fmt: skip
        out += [say(f"released fwman's hold of {kver}: the patched modules build for it") for kver in self.released]
        return out


def release_holds(host: Host, dry_run: bool, tell: Tell = silent) -> PreflightResult:
    """Lift every hold fwman placed (its pin file and record); return what changed. Nothing else is touched.

    Raises ParseError when fwman's hold record is damaged (the pin file is then removed all the same).
    """
    result = PreflightResult(dry_run, release_only=True)
    try:
        result.released = sorted(kernel_hold.read_record(host).kernels, key=version_key)
    except ParseError as e:
        tell(f"warning: {e.message}: removing fwman's pin all the same")
    actions = kernel_hold.hold_actions(kernel_hold.HoldRecord())
    result.actions = plan_or_apply(host, actions, dry_run=dry_run, tell=tell).actions
    return result


def run_preflight(host: Host, request: PreflightRequest, tell: Tell = silent) -> PreflightResult:
    """Pre-flight every kernel a simulated upgrade would install (and every kernel fwman holds back): build what is not
    recorded yet (under the module lock), record the verdicts, release a kernel that now builds and, with
    ``request.hold``, hold one that will not; a dry run builds and writes nothing. Returns the verdicts (a kernel's
    failure is its verdict, :meth:`PreflightResult.failure`). Raises UsageError with no module source, MissingError
    without apt-get or a compiler, SourceError when the source cannot be had, FwmanError when apt-get fails."""
    if request.release:
        if request.hold:
            raise UsageError("--hold and --release ask for opposite things: give one")
        return release_holds(host, request.dry_run, tell)
    result = PreflightResult(request.dry_run)
    offers, sim = pf.offered_kernels(host)
    result.kept_back = sim.kept_back
    record = kernel_hold.read_record(host)
    offered = {o.kernel for o in offers}
    for kver, held in record.kernels.items():
        if kver not in offered:  # apt no longer offers it: fwman's own pin is why
            offers.append(pf.KernelOffer(kver, dict(held.packages), held=True))
    offers.sort(key=lambda o: version_key(o.kernel))
    try:
        state = pf.read_state(host)
    except ParseError as e:
        tell(f"warning: {e.message}: starting a new pre-flight record")
        state = pf.State()
    if not offers:  # nothing to build: no source needed (a host that uses fwman for firmware only)
        tell("apt offers no kernel that is not installed (`apt-get -s dist-upgrade`)")
        if not request.dry_run:
            state.last_at, state.last_kernels = now_iso(), []
            apply_all(host, [pf.state_action(state)])
        _update_hold(host, request, result, record)
        return result
    spec = load_source_spec(host)
    if spec is None:
        raise UsageError(
            "no module source configured: the pre-flight builds what the kernel hook would",
            hint="`fwman plan` names the fork and branch for this box and `sudo fwman apply` builds them (or set "
            "[modules] in /etc/fwman/config.toml)",
        )
    with module_lock(host):
        source = resolve_source(host, spec, tell, fetch=False)  # the commit the kernel hook would build
        result.source = source
        compiler = compiler_version(host)
        for offer in offers:
            result.kernels.append(_check(host, request, offer, source, compiler, state, tell))
        if not request.dry_run:
            state.last_at = now_iso()
            state.last_kernels = [k.offer.kernel for k in result.kernels]
            apply_all(host, [pf.state_action(state)])
    _update_hold(host, request, result, record)
    return result


def _check(
    host: Host,
    request: PreflightRequest,
    offer: pf.KernelOffer,
    source: Source,
    compiler: str,
    state: pf.State,
    tell: Tell,
) -> KernelCheck:
    """Return the check of one kernel: its recorded verdict when it still holds, else (not in a dry run) a build."""
    kver = offer.kernel
    try:
        patches = pf.kernel_patches(host, kver)
    except ParseError as e:
        verdict = pf.KernelVerdict(
            kver, pf.UNCHECKED, f"a patch of /etc/fwman/patches.d cannot be read: {e}", at=now_iso()
        )
        return KernelCheck(offer, verdict)
    package, version = offer.headers(host)
    version = version or pf.candidate_version(host, package)
    if version is not None and package not in offer.packages:
        offer.packages.setdefault(package, version)
    key = pf.verdict_key(kver, version, source.source_id, patches, compiler)
    cached = pf.cached_verdict(state, key, kver)
    if cached is not None:
        pf.judge_nova_core(host, cached)
        tell(f"{kver}: {cached.line_text()} (recorded {cached.at}; same headers, commit and patches)")
        return KernelCheck(offer, cached)
    if request.dry_run:
        plan = f"download {package}{'=' + version if version else ''} and build {source.label} against it"
        return KernelCheck(offer, None, plan=plan)
    tell(f"== {kver}: pre-flight of {package}{' ' + version if version else ''}")
    verdict = pf.check_kernel(host, offer, source, patches, compiler, key, tell, request.jobs, request.progress)
    if verdict.status != pf.UNCHECKED or kver not in state.kernels:
        state.kernels[kver] = verdict  # a download that failed does not replace a verdict
    pf.judge_nova_core(host, verdict)
    tell(f"{kver}: {verdict.line_text()}")
    return KernelCheck(offer, verdict)


def _update_hold(
    host: Host, request: PreflightRequest, result: PreflightResult, record: kernel_hold.HoldRecord
) -> None:
    """Release the held kernels that now build; with ``--hold``, hold the ones that will not; fill ``result``."""
    after = kernel_hold.HoldRecord(dict(record.kernels))
    for check in result.kernels:
        kver, verdict = check.offer.kernel, check.verdict
        if verdict is None:
            continue
        if verdict.status == pf.SAFE and kver in after.kernels:
            del after.kernels[kver]
            result.released.append(kver)
        elif verdict.status == pf.BROKEN and request.hold:
            packages = dict(check.offer.packages)
            previous = after.kernels.get(kver)
            reason = verdict.line_text()
            if previous is not None and previous.packages == packages and previous.reason == reason:
                continue  # held already for the same reason: the record (and its date) stays
            after.kernels[kver] = kernel_hold.HeldKernel(kver, packages, reason, now_iso(), verdict.commit)
            if previous is None:
                result.newly_held.append(kver)
    actions = kernel_hold.hold_actions(after)
    if request.dry_run:
        result.actions = [a.describe() for a in pending(host, actions)]
    else:
        result.actions = apply_all(host, actions)
    result.held = sorted(after.kernels, key=version_key)
    for check in result.kernels:
        check.held = check.offer.kernel in after.kernels


def last_preflight(host: Host) -> dict[str, Any] | None:
    """Return the last pre-flight's result for ``modules status`` and the metrics: {"at", "kernels": [...],
    "held_kernels": [...], "error"}; None when no pre-flight ran. Never raises for a damaged record (it says so)."""
    try:
        state = pf.read_state(host)
    except NotRecordedError:  # a snapshot that did not record fwman's state: no pre-flight to show
        return None
    except (ParseError, MissingError) as e:
        return {"at": None, "kernels": [], "held_kernels": [], "error": e.message}
    try:
        held = sorted(kernel_hold.read_record(host).kernels, key=version_key)
    except ParseError as e:
        return {
            "at": state.last_at,
            "kernels": [v.to_dict() for v in state.last()],
            "held_kernels": [],
            "error": e.message,
        }
    if state.last_at is None and not held:
        return None
    for verdict in state.last():  # nova_core is judged against today's modprobe files, not the record's day
        pf.judge_nova_core(host, verdict)
    return {"at": state.last_at, "kernels": [v.to_dict() for v in state.last()], "held_kernels": held, "error": None}
