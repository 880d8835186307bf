"""``fwman driver move``: move the patched modules and the NVIDIA user space to another driver version together
(``--to V``), go back (``--rollback``), end the move (``--finish``), or show where the last move stands."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fwman.app.change import ChangeResult, free
from fwman.app.modules.build import BuildRequest, newest_revision_spec
from fwman.app.text import Out, Result, say
from fwman.core import clock, names, paths
from fwman.core.config import load_config
from fwman.core.errors import BlockedError, FwmanError, MissingError, UsageError
from fwman.core.jsonout import meta
from fwman.core.tomltext import toml_value
from fwman.driver import userspace_hold
from fwman.driver.aptsim import apt_root_options
from fwman.driver.boot.initramfs import RegenerateInitramfs, inspect
from fwman.driver.build.lock import module_lock
from fwman.driver.build.manifest import now_iso, sha256_hex
from fwman.driver.build.source import SourceSpec, load_source_spec, resolve_source
from fwman.driver.kernels import installed_kernels
from fwman.driver.localfs import root_prefix
from fwman.driver.move.commit import InstallStaged, RemoveTree, phases
from fwman.driver.move.keep import KeepFiles, kept_paths
from fwman.driver.move.packages import DownloadDebs, InstallDebs, parse_madison, version_for
from fwman.driver.move.record import (
    COMMITTED,
    FINISHED,
    KEPT,
    KEPT_DEBS,
    KEPT_INDEX,
    ROLLBACK_COMMAND,
    ROLLED_BACK,
    STAGED_DEBS,
    STAGED_STAGE,
    WORK,
    MoveRecord,
    MoveRefused,
    PackageMove,
    WriteRecord,
    boot_note,
    module_version,
    read_record,
)
from fwman.driver.move.rollback import rollback_actions
from fwman.driver.move.runfile import InstallRunInContainer, StageRun, container_owned, run_name
from fwman.driver.move.stage import SourceOnce, StageModules
from fwman.host.actions import Action, Tell, WriteFile, apply_all, pending, silent
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file
from fwman.platform.containers import read_cdi_specs, read_containers, read_engine_containers
from fwman.platform.userspace import scan_userspace


@dataclass
class MoveResult(ChangeResult):
    """What a move (or its rollback, or its end) did, or would do, and the move it is about."""

    #: the move, written as "move" (a lambda: move_json is defined below)
    record: MoveRecord | None = field(default=None, metadata=meta(key="move", via=lambda r: move_json(r)))
    #: what the owner must still do (the reboot, the check), or what the move leaves out
    notes: list[str] = field(default_factory=list)
    #: where the run's wall seconds went (:func:`fwman.driver.move.commit.phases`); {} for a dry run or nothing done
    phases: dict[str, float] = field(default_factory=dict)

    def text(self, verbose: int = 0) -> Out:
        """Return the plan or what was done, then the notes (and with -v where the time went)."""
        out = [*super().text(verbose), *(say(n, "loud") for n in self.notes)]
        if verbose and self.phases:
            p = self.phases
            out.append(say(f"took {p['total']:.1f}s: module builds {p['builds']:.1f}s, apt {p['packages']:.1f}s, "
                           f"the move's own {p['own']:.1f}s"))  # fmt: skip
        return out


@dataclass
class RefreshInitramfs:
    """Regenerate ``kver``'s initramfs when it carries NVIDIA modules: once the move (or the rollback) swapped the
    modules, any it carries is the other version's, which would load at boot. Judged on what the image carries, so
    the dry run (before the swap) and the run (after it) agree."""

    kver: str

    def describe(self) -> str:
        """Return the step."""
        return f"regenerate the initramfs of {self.kver} (it carries NVIDIA modules of the other version)"

    def is_needed(self, host: Host) -> bool:
        """Return True when the kernel's initramfs carries an NVIDIA module."""
        return bool(inspect(host, self.kver).modules)

    def command(self, host: Host) -> list[str]:
        """Return the generator's command (for the door's check)."""
        return RegenerateInitramfs(self.kver).command(host)

    def apply(self, host: Host) -> None:
        """Regenerate and check. Raises what :class:`RegenerateInitramfs` raises."""
        RegenerateInitramfs(self.kver).apply(host)


@dataclass
class RegenerateCdiSpec:
    """Write an NVIDIA CDI spec again for the driver now installed (``nvidia-ctk cdi generate --output=PATH``, the
    command NVIDIA's container-toolkit documentation gives after a driver change): the spec names the libraries
    by their versioned host paths, so the old one mounts the old version's files into every container."""

    path: str
    target: str

    def argv(self) -> list[str]:
        """Return the command that writes the spec."""
        return ["nvidia-ctk", "cdi", "generate", f"--output={self.path}"]

    def describe(self) -> str:
        """Return the step."""
        return f"regenerate the CDI spec {self.path} for {self.target} ({' '.join(self.argv())})"

    def is_needed(self, host: Host) -> bool:
        """Return True when the spec mounts libraries of another version than the target (or cannot be read)."""
        specs = [s for s in read_cdi_specs(host, []) if s.path == self.path]
        return not specs or specs[0].error is not None or set(specs[0].libs) != {self.target}

    def command(self, host: Host) -> list[str]:
        """Return the command (for the door's check)."""
        return self.argv()

    def apply(self, host: Host) -> None:
        """Run nvidia-ctk. Raises MissingError without it, FwmanError with its message when it fails."""
        result = host.run(self.argv(), timeout=300)
        if result.missing:
            raise MissingError("nvidia-ctk not found", hint=f"regenerate {self.path} by hand after the move")
        if not result.ok:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise FwmanError(f"{' '.join(self.argv())} failed (exit {result.rc}): {tail[-1] if tail else 'no output'}")


def cdi_specs(host: Host) -> list[str]:
    """Return the NVIDIA CDI specs a move regenerates: those in /etc/cdi that mount NVIDIA libraries (the ones
    in /var/run/cdi are written at boot by nvidia-cdi-refresh). Never raises."""
    try:
        specs = read_cdi_specs(host, [])
    except FwmanError:
        return []
    return [s.path for s in specs if s.error is None and s.libs and s.path.startswith("/etc/cdi/")]


def image_notes(host: Host, target: str) -> list[str]:
    """Return one line per Docker or Podman container whose image carries NVIDIA's libraries of another version
    than ``target`` (they shadow what the toolkit or a CDI spec injects), with how to rebuild it. Never raises:
    an engine that cannot be asked is left out (``fwman audit`` names it)."""
    try:
        found = read_engine_containers(host, [], [])
    except FwmanError:
        return []
    out = []
    for audit, _ in found:
        other = sorted(set(audit.versions) - {target})
        if audit.kind in ("docker", "podman") and other:
            out.append(
                f"{audit.kind} container {audit.name} (image {audit.image or 'unknown'}) carries NVIDIA's libraries "
                f"of {', '.join(other)}: rebuild the image without them (the NVIDIA container toolkit or the CDI spec "
                f"mounts the host's {target}) or from a base image with the {target} user space, then recreate the "
                "container"
            )
    return out


def move_json(record: MoveRecord | None) -> dict[str, Any] | None:
    """Return the JSON form of a move record (None: no move was made)."""
    if record is None:
        return None
    return {
        "from_version": record.from_version, "to_version": record.to_version, "stage": record.stage,
        "kernels": record.kernels, "from_branch": record.from_branch, "to_branch": record.to_branch,
        "fork": record.fork, "hold_moved": record.hold_moved, "at": record.at, "containers": record.containers,
        "packages": {p.name: {"from_version": p.installed, "to_version": p.target} for p in record.packages},
    }  # fmt: skip


@dataclass
class MoveStatus(Result):
    """``fwman driver move`` without a change: the last move's record and whether a kept set is there."""

    record: MoveRecord | None
    kept: bool
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.driver-move/1`` for the status: the move, the kept set, the boot note."""
        return {"dry_run": False, "changed": False, "actions": [], "move": move_json(self.record),
                "kept": self.kept, "notes": [self.note] if self.note else []}  # fmt: skip

    def text(self, verbose: int = 0) -> Out:
        """Return one line per fact of the move."""
        r = self.record
        if r is None:
            return [say("no driver move was made (move with `fwman driver move --to VERSION`)")]
        out: Out = [
            say(f"move {r.from_version or 'unknown'} -> {r.to_version}: {r.stage} (at {r.at})"),
            say(f"kernels: {', '.join(r.kernels) or 'none'}"),
            say(f"branch: {r.from_branch or 'unknown'} -> {r.to_branch or 'unknown'} (fork {r.fork or 'unknown'})"),
        ]
        out += [say(f"package {p.name}: {p.installed} -> {p.target}") for p in r.packages]
        if self.kept:
            out.append(say(f"the previous set is kept in {KEPT}: `{ROLLBACK_COMMAND}` restores it"))
        if self.note:
            out.append(say(f"WARNING: {self.note}", "loud"))
        return out


def move_status(host: Host) -> MoveStatus:
    """Return the last move's record. Raises ParseError when the record is damaged."""
    record = read_record(host)
    if record is None:  # no move was made: nothing kept to look for (a replay need not have recorded the place)
        return MoveStatus(None, False, None)
    return MoveStatus(record, host.exists(KEPT_INDEX), boot_note(host))


def _kernels(host: Host) -> list[str]:
    """Return the installed kernels a move builds for: a module directory and an image (or Debian's modules)."""
    return [
        k
        for k in installed_kernels(host)
        if host.exists(f"/boot/vmlinuz-{k}") or host.exists(f"{paths.modules_dir(k)}/modules.order")
    ]


def _check_config(host: Host, spec: SourceSpec, target: str) -> None:
    """Raise UsageError when /etc/fwman/config.toml pins another branch or version than the move's: the
    configuration wins over the source record, so a later kernel's hook would build the old version."""
    config = load_config(host)
    branch, version = config.get_str("modules", "branch"), config.get_str("modules", "driver-version")
    if (branch and branch != spec.branch) or (version and version != target):
        pinned = f"branch = {branch!r}" if branch else f"driver-version = {version!r}"
        raise UsageError(
            f"{config.path} pins [modules] {pinned}: after the move a new kernel's hook would build that",
            hint=f"set [modules] driver-version = {toml_value(target)} (or remove the line) in {config.path}, "
            "then move",
        )


def _user_space(host: Host, target: str) -> tuple[list[PackageMove], list[str]]:
    """Return (the NVIDIA user-space packages to move and their target versions, notes). Raises MoveRefused when
    apt offers a package not at ``target``, or no longer offers the installed version (it could not be kept)."""
    installed = userspace_hold.installed_packages(host) or {}
    if not installed:
        marker = userspace_hold.run_installer_present(host)
        if marker is not None:
            return [], [
                f"the host user space came from NVIDIA's .run installer ({marker}): not moved here; reinstall "
                f"NVIDIA-Linux-x86_64-{target}.run with --no-kernel-modules (docs/userspace.md)"
            ]
        return [], []
    argv = ["apt-cache", *apt_root_options(root_prefix(host)), "madison", *sorted(installed)]
    result = host.run(argv, timeout=120)
    offered = parse_madison(result.stdout) if result.ok else {}
    out = []
    for name, version in sorted(installed.items()):
        versions = offered.get(name, [])
        wanted = version_for(versions, target)
        if wanted is None:
            raise MoveRefused(
                f"apt offers no {name} at {target} (it offers: {', '.join(versions) or 'none'}); nothing was changed",
                hint="add the repository that carries it (NVIDIA's CUDA repository, or Debian's at that version), "
                "`apt-get update`, then move",
            )
        if version not in versions:
            raise MoveRefused(
                f"apt no longer offers the installed {name} {version}: it could not be kept for a rollback",
                hint="add back the repository that carries it, or hold off the move",
            )
        out.append(PackageMove(name, version, wanted))
    return out, []


@dataclass
class MovePlan:
    """The move's actions in their three parts, and its record."""

    staging: list[Action]
    commit: list[Action]
    record: MoveRecord
    notes: list[str]

    @property
    def actions(self) -> list[Action]:
        """Return every action, in order."""
        return [*self.staging, *self.commit]


@dataclass(frozen=True)
class RunInstaller:
    """NVIDIA's ``.run`` of the target version for the containers with their own user space: the owner's file and
    the SHA-256 the owner copied from where it was downloaded (fwman has no list of NVIDIA's checksums)."""

    path: str
    sha256: str


def container_versions(host: Host, root: str) -> set[str]:
    """Return the driver versions of the libraries a container root carries."""
    return set(scan_userspace(host, root, run_smi=False).versions())


def _containers(host: Host, roots: tuple[str, ...], target: str, run: RunInstaller | None) -> list[str]:
    """Return the roots of the containers whose own user space must move (Proxmox LXC roots that are mounted, and
    ``roots``). Raises MoveRefused when one does and no installer is given, or the installer is not the one the
    checksum names."""
    moving = []
    for audit, us in read_containers(host, list(roots), []):
        if audit.state == "read" and audit.root and us is not None and set(us.versions()) - {target}:
            moving.append(audit.root)
            if run is None:
                raise MoveRefused(
                    f"container {audit.name} ({audit.root}) carries its own user space "
                    f"({', '.join(sorted(us.versions()))}): it must move to {target} too; nothing was changed",
                    hint=f"give NVIDIA's installer: --run {run_name(target)} --run-sha256 HEX (the checksum "
                    "from where you downloaded it)",
                )
    if run is not None and moving:
        digest = sha256_hex(read_user_file(run.path))
        if digest != run.sha256.lower():
            raise MoveRefused(
                f"{run.path}: sha256 {digest} is not the {run.sha256} given; nothing was changed",
                hint="download NVIDIA's installer again and compare its checksum with the one NVIDIA publishes",
            )
    return moving


def plan_move(
    host: Host,
    target: str,
    *,
    variables: Mapping[str, str] | None = None,
    tell: Tell = silent,
    container_roots: tuple[str, ...] = (),
    run: RunInstaller | None = None,
) -> MovePlan | MoveRecord:
    """Return the plan of a move to ``target``, or the record when the move to ``target`` is already committed.
    Raises UsageError for a bad version, a move not finished, a configuration that pins another branch;
    MissingError when no branch of the fork builds ``target`` or no kernel is installed; MoveRefused when the
    user space cannot be had at ``target``."""
    version = str(names.driver_version(target, "--to"))
    record = read_record(host)
    if record is not None and record.stage in (STAGED_STAGE, COMMITTED):
        if record.to_version == version and record.stage == COMMITTED:
            return record
        if record.to_version != version:
            raise UsageError(
                f"the move {record.from_version} -> {record.to_version} is {record.stage}, not finished",
                hint=f"verify it and end it (`fwman driver move --finish`), or go back (`{ROLLBACK_COMMAND}`)",
            )
    kernels = _kernels(host)
    if not kernels:
        raise MissingError("no kernel is installed here (/lib/modules): nothing to move")
    # an interrupted move (its record says staged) goes on from what its record says was there before it
    resume = record if record is not None and record.stage == STAGED_STAGE else None
    current = {k: module_version(host, k) for k in kernels}
    known = {v for v in current.values() if v}
    if resume is None and known == {version} and all(current.values()):
        raise UsageError(f"every kernel's patched modules are already at {version}: nothing to move")
    remembered = load_source_spec(host)
    request = BuildRequest(driver_version=version, variables=dict(variables or {}))
    spec = newest_revision_spec(host, request, tell)
    _check_config(host, spec, version)
    packages, notes = _user_space(host, version)
    containers = _containers(host, container_roots, version, run)
    at = now_iso()
    new = MoveRecord(
        from_version=",".join(sorted(known)) or None, to_version=version, stage=STAGED_STAGE, kernels=kernels,
        from_branch=remembered.branch if remembered else None, to_branch=spec.branch, fork=spec.fork,
        packages=packages, hold_moved=userspace_hold.read_record(host) is not None and bool(packages), at=at,
        containers=containers,
    )  # fmt: skip
    if resume is not None:
        new = replace(resume, to_branch=spec.branch, fork=spec.fork)
        packages, containers = new.packages, new.containers
    once = SourceOnce(spec, lambda: resolve_source(host, spec, tell))
    staging: list[Action] = [StageModules(k, version, once, tell) for k in kernels]
    if packages:
        staging += [
            DownloadDebs(STAGED_DEBS, {p.name: p.target for p in packages}, f"the {version} user space"),
            DownloadDebs(
                KEPT_DEBS, {p.name: p.installed for p in packages}, "the installed user space, kept for a rollback"
            ),
        ]
    if containers:
        assert run is not None
        path = run.path
        staging.append(StageRun(lambda: read_user_file(path), run.sha256.lower(), version))
    specs_kept = cdi_specs(host) if packages else []  # a rollback puts the previous spec back as it was
    owned = [o for root in containers for o in container_owned(root)]
    keep = KeepFiles(kept_paths(host, kernels) + specs_kept, owned)
    commit: list[Action] = [keep, WriteRecord(new)]
    commit += [InstallStaged(k, version, spec.branch) for k in kernels]
    commit += [RefreshInitramfs(k) for k in kernels]
    if packages:
        wanted = {p.name: p.target for p in packages}
        commit.append(InstallDebs(STAGED_DEBS, wanted, f"the {version} user space"))
        if new.hold_moved:
            commit += userspace_hold.hold_actions(wanted, at)
    specs = cdi_specs(host) if packages else []
    if specs and host.which("nvidia-ctk") is None:
        notes.append(f"nvidia-ctk is not installed: regenerate {', '.join(specs)} after the move (`nvidia-ctk cdi "
                     "generate --output=PATH`)")  # fmt: skip
    elif specs:
        commit += [RegenerateCdiSpec(path, version) for path in specs]
    commit += [InstallRunInContainer(root, version, container_versions) for root in containers]
    commit.append(WriteFile(paths.MODULES_SOURCE_RECORD, SourceSpec(None, spec.fork, spec.branch).to_json()))
    commit.append(WriteRecord(replace(new, stage=COMMITTED)))
    notes += image_notes(host, version)
    notes.append(
        f"reboot into the {version} modules, then check (`fwman apply --check`, `fwman p2p`); if it fails: "
        f"`{ROLLBACK_COMMAND}`; once it works: `fwman driver move --finish`"
    )
    return MovePlan(staging, commit, new, notes)


def move_to(
    host: Host,
    target: str,
    *,
    dry_run: bool = False,
    permit: Callable[[], None] = free,
    tell: Tell = silent,
    variables: Mapping[str, str] | None = None,
    container_roots: tuple[str, ...] = (),
    run: RunInstaller | None = None,
) -> MoveResult:
    """Move the modules of every kernel and the user space to driver ``target`` (or, ``dry_run``, say how). Raises as
    :func:`plan_move`, what ``permit`` raises, MoveRefused (exit 3) when a build fails for a kernel or a package cannot
    be downloaded (what was staged is removed, nothing else changed), LockTimeout when a build holds the module lock."""
    plan = plan_move(host, target, variables=variables, tell=tell, container_roots=container_roots, run=run)
    if isinstance(plan, MoveRecord):
        return MoveResult(dry_run, [], f"the move to {plan.to_version} is already {plan.stage}", record=plan)
    if dry_run:
        return MoveResult(True, [a.describe() for a in pending(host, plan.actions)], record=plan.record,
                          notes=plan.notes)  # fmt: skip
    permit()
    was_moving = host.exists(KEPT_INDEX)  # an interrupted move continues; its kept set is not removed
    began = clock.monotonic()
    with module_lock(host):
        try:
            done = apply_all(host, plan.staging, tell)
        except FwmanError:
            if not was_moving:
                host.remove_tree(WORK)  # the refusal changes nothing: what was staged goes
            raise
        done += apply_all(host, plan.commit, tell)
    return MoveResult(False, done, record=replace(plan.record, stage=COMMITTED), notes=plan.notes,
                      done=f"moved to {plan.record.to_version}",
                      phases=phases(plan.actions, clock.monotonic() - began))  # fmt: skip


def _recorded(host: Host, what: str) -> MoveRecord:
    record = read_record(host)
    if record is None:
        raise UsageError(f"no driver move was made: nothing to {what}", hint="fwman driver move --to VERSION")
    return record


def rollback(
    host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent
) -> MoveResult:
    """Put back the modules, user space and hold kept before the last move (or, ``dry_run``, say how).

    Raises UsageError when no move was made or it was finished, MissingError when the kept set is gone,
    ParseError for a damaged record or index, what ``permit`` and the actions raise.
    """
    record = _recorded(host, "roll back")
    if record.stage == ROLLED_BACK:
        return MoveResult(dry_run, [], f"the move to {record.to_version} is already rolled back", record=record)
    if record.stage == FINISHED:
        raise UsageError(
            f"the move to {record.to_version} was finished: its previous set is no longer kept",
            hint=f"move back with `fwman driver move --to {record.from_version}`",
        )
    actions = rollback_actions(host, record, now_iso())
    actions[-2:-2] = [RefreshInitramfs(k) for k in record.kernels]  # after depmod, before the record
    after = replace(record, stage=ROLLED_BACK)
    notes = [f"reboot into the {record.from_version} modules"]
    if dry_run:
        return MoveResult(True, [a.describe() for a in pending(host, actions)], record=after, notes=notes)
    permit()
    with module_lock(host):
        done = apply_all(host, actions, tell)
    return MoveResult(False, done, record=after, notes=notes, done=f"rolled back to {record.from_version}")


def finish(host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free, tell: Tell = silent) -> MoveResult:
    """End a committed move whose new module is the one loaded: the kept set goes (or, ``dry_run``, say so).

    Raises UsageError when no move is committed, BlockedError when the loaded module is not the new version.
    """
    record = _recorded(host, "finish")
    if record.stage == FINISHED:
        return MoveResult(dry_run, [], f"the move to {record.to_version} is already finished", record=record)
    if record.stage != COMMITTED:
        raise UsageError(f"the move to {record.to_version} is {record.stage}: only a committed move is finished")
    note = boot_note(host)
    if note is not None:
        raise BlockedError(f"not finished: {note}")
    actions: list[Action] = [
        WriteRecord(replace(record, stage=FINISHED, at=now_iso())),
        RemoveTree(WORK, "the kept previous set"),
    ]
    after = replace(record, stage=FINISHED)
    if dry_run:
        return MoveResult(True, [a.describe() for a in pending(host, actions)], record=after)
    permit()
    return MoveResult(False, apply_all(host, actions, tell), record=after, done="move finished")
