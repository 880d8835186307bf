"""``fwman modules ...``: the P2P-patched modules for every installed kernel, and never booting without them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.errors import BlockedError, PartialError, VerificationError
from fwman.core.termtext import visible

if TYPE_CHECKING:
    from fwman.driver.hooks.run import RunSummary


@click.group()
def modules() -> None:
    """Build, install and check the P2P-patched NVIDIA modules for each kernel.

    \b
    Examples:
      fwman modules build --kernel 6.1.0-50-amd64 --fork aikitoria --branch 570.86.16-p2p
      fwman modules build --kernel 6.1.0-53-amd64 --source ~/src/open-gpu-kernel-modules
      fwman modules status                  per kernel: headers, modules, DKMS, safe to boot
      fwman modules catchup                 build for every kernel that lacks its modules (what boot runs)
      fwman modules check-boot              exit 0 only if the next boot has working modules
      fwman modules check-boot --pin        and pin a kernel that has them if it has not
      fwman modules unpin                   undo a boot pin fwman made
      fwman modules remove --all            take fwman's installed modules off (before a purge)
      fwman modules keygen                  Secure Boot: make a signing key and enroll it with mokutil

    Docs: docs/modules.md, docs/hooks.md, docs/boot-safety.md, docs/signing.md, docs/dkms.md.
    """


def _say(app: AppContext) -> Any:
    return lambda text: app.echo(text, err=True)


def failure_report(app: AppContext, outcome: Any, newer: list[str] | None = None) -> list[str]:
    """Return the lines that explain a failed build: file, first error, source, log, newer branches.

    ``newer`` is the list of newer cached P2P branches when the caller has it already (else it is looked up).
    """
    from fwman.driver.build.source import newer_branches

    lines = [f"FAILED: patched modules for {outcome.kver} did not build"]
    f = outcome.failure
    if f is not None:
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "(no file named)")
        if f.phase:
            lines.append(f"  failed in:     the {f.phase} phase")
        lines.append(f"  failing file:  {where}")
        lines.append(f"  first error:   {f.message}")
    s = outcome.source
    if s is not None:
        if s.fork:
            lines.append(f"  source:        fork {s.fork}, branch {s.branch}, commit {s.commit}")
        else:
            lines.append(f"  source:        {s.location} ({s.commit or s.source_id})")
    if outcome.log_path:
        lines.append(f"  build log:     {outcome.log_path}")
    if newer is None:
        newer = newer_branches(app.host, s) if s is not None else []
    if newer:
        lines.append("  newer P2P branches that may build (cached list; check `fwman driver branches`):")
        lines.extend(f"    {b}" for b in newer[-5:])
    else:
        lines.append("  newer P2P branches: none known (run `fwman driver branches` to refresh the list)")
    return lines


def _progress(app: AppContext, as_json: bool) -> Any:
    """Return the build progress sink: a live line on a terminal, whole lines otherwise (PhaseLog), none in --json."""
    from fwman.driver.build.pipeline import phase_lines

    if as_json:
        return lambda state, elapsed, started: None
    if not app.env.stderr_isatty:
        return phase_lines(_say(app))
    stream = app.env.stderr

    def live(state: Any, elapsed: float, started: str | None) -> None:
        try:
            if state.rc is not None:
                return  # make exited: the caller ends the line and reports the outcome
            if started is not None and elapsed > 0:
                stream.write("\n")  # keep the finished phase's last line on screen
            stream.write("\r\033[K" + visible(state.line(elapsed)))  # the line may quote a tool's output
            stream.flush()
        except (OSError, ValueError):  # the terminal went away: the build goes on, unseen
            pass

    return live


def _render_boot(app: AppContext, check: Any) -> None:
    if check is None:
        return
    if check.pinned is not None:
        app.echo(app.style(f"boot default pinned to {check.pinned.kernel} ({check.pinned.method})", fg="yellow"))
    if check.problem:
        app.echo(app.style(f"WARNING: {check.problem}", fg="red", bold=True))


@modules.command()
@click.option("--kernel", "kernels", multiple=True, metavar="KVER", help="Kernel release to build for (repeatable).")
@click.option("--all", "all_kernels", is_flag=True, help="Every installed kernel with headers.")
@click.option(
    "--fork",
    metavar="FORK",
    help="Fork: a known name (aikitoria, a [forks] name), NAME=URL, owner/name on GitHub, or a git URL or path.",
)
@click.option("--branch", metavar="B", help="Branch of the fork, e.g. 570.86.16-p2p.")
@click.option(
    "--driver-version",
    metavar="V",
    help="Instead of --branch: the newest branch of the fork whose tree builds driver version V (e.g. 570.86.16).",
)
@click.option("--source", "source_dir", metavar="DIR", help="Build a local tree instead of a fork branch.")
@click.option(
    "--force",
    is_flag=True,
    help="Retry a (commit, kernel) whose build failed before; build a version the user space does not match.",
)
@click.option("-j", "--jobs", type=int, metavar="N", help="Parallel make jobs (default: all CPUs).")
@json_option
@common_options
@pass_app
def build(
    app: AppContext,
    kernels: tuple[str, ...],
    all_kernels: bool,
    fork: str | None,
    branch: str | None,
    driver_version: str | None,
    source_dir: str | None,
    force: bool,
    jobs: int | None,
    as_json: bool,
) -> None:
    """Build, sign (when configured), install and verify the patched modules for kernels.

    The kernel-independent objects are built once per (source commit, compiler) and reused for every kernel
    (/var/cache/fwman/objects); only kernel-open/ is rebuilt per kernel. Modules go to
    /lib/modules/KVER/updates/fwman (staged, swapped in atomically) with /etc/depmod.d/fwman.conf overrides;
    depmod runs, and each name must resolve to the new file with a vermagic naming KVER before the manifest
    (/var/lib/fwman/modules/KVER.json) is written. A failed build leaves the previous modules in place.

    The source given here is remembered once it resolved: the kernel hook and `fwman modules catchup` build from it.

    Patches in /etc/fwman/patches.d/*.patch (-p1 diffs; a `Kernels: REGEX` line before the diff says which
    kernel releases) are applied in the build tree of the kernels they match, like DKMS PATCH[#]/PATCH_MATCH[#];
    one that does not apply fails that kernel's build, naming the file and hunk (docs/modules.md).

    \b
    Examples:
      fwman modules build --kernel 6.1.0-50-amd64 --fork aikitoria --branch 570.86.16-p2p
      fwman modules build --all --fork aikitoria --driver-version 570.86.16   (its newest revision)
      fwman modules build --kernel "$(uname -r)" --source ~/src/open-gpu-kernel-modules
      fwman modules build --all                 (the remembered source, every kernel with headers)
      fwman modules build --kernel 6.1.0-53-amd64 --force

    --driver-version V builds, of the fork's branches whose tree builds V (`fwman driver branches`: -p2p,
    -p2p-v2, -p2p-v3 or any name with p2p in it), the one with the newest commit.

    The branch's driver version (its tree's version.mk; the name is a hint) must equal the user space's on the
    host and in every readable container (else NVML fails: "Driver/library version mismatch"): a mismatch is
    refused unless --force. After a build,
    an initramfs that carries other NVIDIA modules is regenerated. On a terminal a live line shows the phase
    (kernel-independent objects, conftest, kernel-open, linking), objects done and the time; without one (a hook,
    the boot service, a redirected stderr) a line says when each phase starts and ends, a heartbeat comes every
    30 seconds of silence, and a failure names its phase (docs/hooks.md, "Build progress").

    Exit status: 0 built, 4 a build failed (the report names the file and first error), 5 no headers, or the
    fork's branch cannot be had (the error names fork, URL and branch, with git's own message), 6 some kernels
    built and some did not, 3 the user space does not match (without --force), 2 a fork name that is not known.
    """
    from fwman.app.modules_build import BuildRequest, KernelBuild, build_modules
    from fwman.core.names import kernel_release

    for kver in kernels:  # before anything else: a kernel release becomes a path (/lib/modules/KVER, .pending)
        kernel_release(kver)
    app.require_change("fwman modules build")
    request = BuildRequest(
        kernels,
        all_kernels,
        fork,
        branch,
        source_dir,
        force,
        jobs,
        _progress(app, as_json),
        driver_version=driver_version,
        variables=app.env.variables,
    )

    def show(build: KernelBuild) -> None:
        if app.env.stderr_isatty and not as_json:
            app.env.stderr.write("\n")  # end the live progress line
        if as_json:
            return
        if build.outcome.status == "failed":
            for line in failure_report(app, build.outcome, build.newer):
                app.echo(app.style(line, fg="red") if line.startswith("FAILED") else line)
        else:
            app.echo(build.outcome.message)

    result = build_modules(app.host, request, _say(app), show)
    if as_json:
        app.emit_json("modules-build", result.to_json())
    else:
        _render_boot(app, result.boot)
    result.raise_for_failures()


@modules.command()
@json_option
@common_options
@pass_app
def status(app: AppContext, as_json: bool) -> None:
    """Show, per installed kernel: headers, patched modules, DKMS conflict, pending/failed, safe to boot.

    "Safe to boot" means fwman's manifest exists, depmod resolves nvidia, nvidia-uvm, nvidia-modeset,
    nvidia-drm and nvidia-peermem to fwman's files, their SHA-256 matches the manifest and their vermagic names
    the kernel. The kernel that boots next is marked, with how fwman knows, and any boot pin fwman made.

    \b
    Examples:
      fwman modules status
      fwman modules status --json | jq '.kernels[] | select(.safe_to_boot | not)'
    """
    from fwman.app.modules_status import modules_status

    result = modules_status(app.host)
    if as_json:
        app.emit_json("modules-status", result.to_json())
        return
    rows, default, pin, spec = result.kernels, result.next_boot, result.pin, result.source
    if not rows:
        app.echo("no kernels under /lib/modules")
    app.table(
        ["KERNEL", "HEADERS", "MODULES", "DKMS", "STATE", "SAFE TO BOOT", "WHY"],
        [
            [
                ("> " if r.next_boot else "  ") + r.kernel,
                "yes" if r.headers else "no",
                r.modules,
                "CONFLICT" if r.dkms_conflict else "-",
                "failed" if r.failed else ("pending" if r.pending else "-"),
                app.style("yes", fg="green") if r.safe_to_boot else app.style("NO", fg="red", bold=True),
                r.why,
            ]
            for r in rows
        ],
    )
    app.echo(f"\n> next boot: {default.kver or 'unknown'} ({default.loader}: {default.how})")
    if pin is not None:
        app.echo(
            app.style(
                f"PINNED by fwman to {pin.kernel} ({pin.method}) because {pin.reason}; undo: fwman modules unpin",
                fg="yellow",
                bold=True,
            )
        )
    for r in rows:
        for c in r.dkms_conflict:
            app.echo(app.style(f"DKMS: {r.kernel}: {c} (run `fwman dkms block`)", fg="yellow"))
    for r in rows:
        for patch in r.patches:  # the /etc/fwman/patches.d patches the installed modules were built with
            kernels = f"kernels {patch.get('kernels')}" if patch.get("kernels") else "every kernel"
            app.echo(f"patch for {r.kernel}: {patch.get('name')} ({kernels}, sha256 {str(patch.get('sha256'))[:12]})")
    for r in rows:
        if not r.headers and r.headers_package:
            app.echo(f"headers for {r.kernel}: apt install {r.headers_package}")
        if r.initramfs is not None and r.initramfs.path and (r.initramfs.problem or r.initramfs.error):
            app.echo(app.style(f"initramfs of {r.kernel}: {r.initramfs.summary()}", fg="red", bold=True))
    if result.secure_boot is not None:
        _render_secure_boot(app, result.secure_boot.to_dict())
    hold = result.userspace_hold
    if hold is not None and hold.installed:
        held = "held by fwman" if hold.held else "not held (`fwman userspace hold`)"
        app.echo(f"NVIDIA user space: {len(hold.installed)} packages, {held}")
    for line in hold.warnings() if hold is not None else []:
        app.echo(app.style(f"WARNING: {line}", fg="yellow"))
    for line in result.preflight_lines():  # the last `fwman modules preflight` (docs/preflight.md)
        app.echo(line)
    options = result.settings
    for setting, state, loaded in options.states() if options is not None else []:
        shown = f" (loaded {loaded})" if loaded is not None and state != "in effect" else ""
        line = f"module option {setting.option}: {state}{shown}"
        app.echo(line if state == "in effect" else app.style(line + " (`fwman driver settings`)", fg="yellow"))
    if spec is None:
        app.echo("no module source configured yet: run `fwman modules build --fork F --branch B` once")
    if result.dkms_error:
        app.echo(f"note: dkms status failed: {result.dkms_error}", err=True)


def _render_secure_boot(app: AppContext, sb: dict[str, Any]) -> None:
    state = {True: "on", False: "off", None: "unknown"}[sb["enabled"]]
    line = f"Secure Boot: {state} ({sb['source']})"
    if sb["cert"]:
        line += f"; fwman's signing key: {sb['key']}"
    bad = sb["enforcing"] and sb["key"] in ("pending", "not-enrolled")
    app.echo(app.style(line, fg="red", bold=True) if bad else line)
    if bad:
        app.echo("  enrollment steps: `fwman modules keygen` prints them (the key stays, --force not needed)")


@modules.command()
@click.option("--kernel", "kver", required=True, metavar="KVER", help="The kernel release that was removed.")
@click.option("--from", "origin", type=click.Choice(["postrm", "kernel-install", "manual"]), default="manual")
@common_options
@pass_app
def forget(app: AppContext, kver: str, origin: str) -> None:
    """Drop fwman's state for a removed kernel and keep the next boot safe (what the removal hooks run).

    Removes the kernel's manifest, failure and pending markers, fwman's stored and installed copies of its
    modules, its build tree, and an object-cache entry no remaining kernel uses. When fwman's boot pin pointed
    at the kernel it is released and another safe kernel pinned, or it says loudly that none is left.
    Always exits 0: a kernel removal must never fail over it.

    \b
    Examples:
      fwman modules forget --kernel 6.1.0-47-amd64
    """
    from fwman.core.names import kernel_release
    from fwman.driver.hooks.removal import forget_kernel

    kernel_release(kver)  # the release becomes paths below /var/lib/fwman and /lib/modules
    app.require_change("fwman modules forget")
    say = _say(app)
    summary = forget_kernel(app.host, kver, say)
    if not summary.removed and not summary.problems:
        say(f"fwman had no state for {kver}")
    _render_boot(app, summary.boot)


@modules.command("remove")
@click.option("--kernel", "kernels", multiple=True, metavar="KVER", help="A kernel whose modules go (repeatable).")
@click.option("--all", "all_kernels", is_flag=True, help="Every kernel fwman installed modules for.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@json_option
@common_options
@pass_app
def remove(app: AppContext, kernels: tuple[str, ...], all_kernels: bool, dry_run: bool, as_json: bool) -> None:
    """Remove the patched modules fwman installed: the files, fwman's stored copy and the manifest, then depmod.

    For each kernel: /lib/modules/KVER/updates/fwman, /var/lib/fwman/modules/KVER.d and KVER.json go, and
    `depmod -a KVER` runs, so nvidia, nvidia-uvm, nvidia-modeset, nvidia-drm and nvidia-peermem resolve to
    whatever else is installed (the stock or DKMS modules, or nothing). When no kernel keeps fwman's modules,
    /etc/depmod.d/fwman.conf goes too. fwman's boot pin is undone with --all, or when the pinned kernel loses
    its modules. Run it before `apt purge fwman` to leave no module of fwman's behind; while fwman stays
    installed, the kernel hooks and the boot-time catch-up build them again (`fwman hooks remove` stops that).

    \b
    Examples:
      fwman modules remove --all --dry-run
      fwman modules remove --kernel 6.1.0-47-amd64
      fwman modules remove --all --json

    Exit status: 0 (also when there was nothing to remove: "changed": false), 2 neither or both of --kernel
    and --all.
    """
    from fwman.app.modules_remove import RemoveRequest, remove_modules
    from fwman.core.names import kernel_release

    for kver in kernels:
        kernel_release(kver)
    if not dry_run:
        app.require_change("fwman modules remove")
    result = remove_modules(app.host, RemoveRequest(kernels, all_kernels, dry_run), _say(app))
    if as_json:
        app.emit_json("modules-remove", result.to_json())
        return
    if dry_run:
        app.echo_plan(
            result.actions, "fwman has no modules installed for " + (", ".join(result.kernels) or "any kernel")
        )
        return
    if not result.changed:
        app.echo("nothing to remove: fwman has no modules installed for " + (", ".join(result.kernels) or "any kernel"))
        return
    for path in result.removed:
        app.echo(f"removed {path}")
    if result.next_boot_lost:
        app.echo(
            app.style(
                f"the next boot ({result.next_boot}) has no patched modules now: the stock driver loads if one is "
                "installed",
                fg="yellow",
            )
        )


@modules.command()
@click.option("--force", is_flag=True, help="Rebuild every kernel, and retry failed (commit, kernel) pairs.")
@common_options
@pass_app
def catchup(app: AppContext, force: bool) -> None:
    """Build for every installed kernel with headers that lacks working patched modules (boot-time service).

    With every kernel current it reads one small manifest and stats the modules per kernel, and exits. Then it
    repairs modules DKMS replaced, and makes sure the next boot uses a kernel with working modules, releasing
    a pin fwman made once the pinned-away kernel has them.

    \b
    Examples:
      fwman modules catchup
      systemctl status fwman-catchup.service     (runs it at boot, see `fwman hooks install`)

    Exit status: 0 (also when kernels without headers stay pending), 6 when a build failed.
    """
    from fwman.driver.hooks.run import catchup as run_catchup

    app.require_change("fwman modules catchup")
    summary = run_catchup(app.host, _say(app), force=force)
    if summary.fast_path:
        _render_waiting(app, summary)
        return
    for outcome in summary.outcomes:
        if outcome.status == "failed":
            for line in failure_report(app, outcome):
                app.echo(line, err=True)
    _render_boot(app, summary.boot)
    failed = [o for o in summary.outcomes if o.status == "failed"]
    if failed:
        raise PartialError(
            f"build failed for {', '.join(o.kver for o in failed)}",
            hint="see `fwman modules status` and /var/log/fwman/",
        )


def _render_waiting(app: AppContext, summary: RunSummary) -> None:
    """Print the result of a catch-up with nothing to build: all current, or which kernels still wait and why."""
    if not summary.waiting:
        app.echo("every kernel has current patched modules")
        return
    for kver, why in summary.waiting.items():
        app.echo(f"{kver}: NO current patched modules (pending: {why}); booting it comes up without the patched driver")
    app.echo("nothing to build until the headers are installed; the next catch-up builds them (`fwman modules status`)")
    if summary.source_problem is not None:
        app.echo(f"WARNING: {summary.source_problem}: that build will fail", err=True)
    elif summary.no_source:
        app.echo("WARNING: no module source configured: run `fwman modules build --fork F --branch B` once", err=True)


@modules.command(hidden=True)
@click.option("--kernel", "kver", required=True, metavar="KVER")
@click.option(
    "--from",
    "origin",
    type=click.Choice(["postinst", "header_postinst", "kernel-install", "manual"]),
    default="manual",
)
@common_options
@pass_app
def hook(app: AppContext, kver: str, origin: str) -> None:
    """What the kernel hook runs (/etc/kernel/postinst.d/fwman). Exit 0 unless `strict = true`, then 3."""
    from fwman.core.names import kernel_release
    from fwman.driver.build.source import strict_mode
    from fwman.driver.hooks.run import run_hook

    kernel_release(kver)
    app.require_change("fwman modules hook")
    say = _say(app)
    summary = run_hook(app.host, kver, origin, say)
    for outcome in summary.outcomes:
        if outcome.status == "failed":
            for line in failure_report(app, outcome):
                say(line)
        else:
            say(outcome.message)
    _render_boot(app, summary.boot)
    if summary.failed or summary.no_source:
        message = f"patched NVIDIA modules are NOT in place for {kver}"
        if strict_mode(app.host):
            raise BlockedError(message, hint="strict = true in /etc/fwman/config.toml: the kernel install stops")
        say(f"{message}; the kernel install goes on (see `fwman modules status`)")


@modules.command()
@click.option("--reuse-dkms", is_flag=True, help="Use DKMS's /var/lib/dkms/mok.key and mok.pub (one enrollment).")
@click.option("--force", is_flag=True, help="Replace a key fwman already uses.")
@common_options
@pass_app
def keygen(app: AppContext, reuse_dkms: bool, force: bool) -> None:
    """Create the Secure Boot signing key for the modules (or adopt DKMS's), and say how to enroll it.

    fwman then signs every module it builds, in the kernel's appended-signature format with the kernel's
    CONFIG_MODULE_SIG_HASH. The certificate must be enrolled as a Machine Owner Key once: `mokutil --import`
    asks for a password, and the next boot's MOK manager asks for it again to confirm.

    \b
    Examples:
      fwman modules keygen
      fwman modules keygen --reuse-dkms
    """
    from fwman.driver.kmod.sign import keygen as make_key

    app.require_change("fwman modules keygen")
    key = make_key(app.host, reuse_dkms=reuse_dkms, force=force)
    app.echo(f"signing key:  {key.key}")
    app.echo(f"certificate:  {key.cert} (DER)")
    from fwman.driver.kmod.secureboot import enrollment_steps, read_state

    state = read_state(app.host)
    enabled = {True: "on", False: "off", None: "unknown"}[state.enabled]
    app.echo(f"Secure Boot: {enabled} ({state.source}); this certificate: {state.key_state}")
    if state.key_state != "enrolled":
        app.echo("enroll it as a Machine Owner Key (once per machine):")
        for line in enrollment_steps(key.cert):
            app.echo(f"  {line}")
    app.echo("modules built from now on are signed; rebuild the current ones with `fwman modules build --all`")


@modules.command()
@click.option("--dry-run", is_flag=True, help="Print the pin that would be undone, change nothing.")
@json_option
@common_options
@pass_app
def unpin(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Undo the boot pin fwman made (restore the previous default kernel).

    fwman pins the boot default to a kernel with working patched modules when the newest kernel has none;
    `fwman modules catchup` releases the pin by itself once a later build for that kernel succeeds. With --json:
    {"dry_run", "changed", "pin", "next_boot"} (schema fwman.modules-unpin/1); "pin" is null and "changed"
    false when fwman has no pin in place (exit 0).

    \b
    Examples:
      fwman modules unpin --dry-run
      fwman modules unpin
      fwman modules unpin --json
    """
    from fwman.app.modules_unpin import unpin_boot

    if not dry_run:
        app.require_change("fwman modules unpin")
    result = unpin_boot(app.host, dry_run=dry_run)
    if as_json:
        app.emit_json("modules-unpin", result.to_json())
        return
    record = result.pin
    if record is None:
        app.echo("fwman has no boot pin in place")
        return
    if dry_run:
        app.echo(f"would undo the boot pin to {record.kernel} ({record.method}), restoring the previous default")
        return
    app.echo(f"boot pin to {record.kernel} removed ({record.method}); the previous default is back")
    after = result.next_boot
    if after is not None:
        note = "has working patched modules" if after.safe else f"has NO working patched modules: {after.reason}"
        app.echo(f"next boot: {after.kver}, which {note}")


@modules.command("check-boot")
@click.option(
    "--pin",
    is_flag=True,
    help="When the next boot is not safe, pin the newest kernel that is (what the hooks run after the loader's).",
)
@click.option(
    "--from",
    "origin",
    type=click.Choice(["postinst", "postrm", "kernel-install", "apt", "manual"]),
    default="manual",
    help="Who runs it (the hooks say; with --pin a kernel hook asks apt's Post-Invoke hook to check again).",
)
@click.option(
    "--removed",
    "removed",
    multiple=True,
    metavar="KVER",
    help="A kernel being removed: never the next boot, never pinned (the removal hooks pass it; repeatable).",
)
@json_option
@common_options
@pass_app
def check_boot(app: AppContext, pin: bool, origin: str, removed: tuple[str, ...], as_json: bool) -> None:
    """Exit non-zero when the kernel that boots next has no working patched modules (before a reboot).

    With --pin it also acts: the newest kernel with working modules is pinned (GRUB, systemd-boot,
    proxmox-boot-tool; see docs/boot-safety.md) and a pin whose reason is gone is released. The kernel hooks
    run `check-boot --pin` after the boot loader's own hook (/etc/kernel/postinst.d/zzz-fwman, postrm.d/zzz-fwman,
    kernel-install's 99-zz-fwman.install), and apt once more after its dpkg run (DPkg::Post-Invoke).

    \b
    Examples:
      fwman modules check-boot && reboot
      fwman modules check-boot --json      (for monitoring)
      fwman modules check-boot --pin       (pin a safe kernel if the next boot is not)

    Exit status: 0 safe (after the pin, with --pin), 4 not safe (the reason is printed), 5 no kernel found.
    """
    from fwman.app.check_boot import check_boot as run_check
    from fwman.core.names import kernel_release

    for kver in removed:
        kernel_release(kver)
    if pin:
        app.require_change("fwman modules check-boot --pin")
    result = run_check(app.host, pin, origin, frozenset(removed), _say(app))
    if as_json:
        app.emit_json("modules-check-boot", result.to_json())
    else:
        default = result.default
        verdict = app.style("safe", fg="green") if result.safe else app.style("NOT SAFE", fg="red", bold=True)
        app.echo(f"next boot: {default.kver} ({default.how}): {verdict}: {result.reason}")
        if result.pinned is not None:
            app.echo(app.style(f"boot default pinned to {result.pinned.kernel} ({result.pinned.method})", fg="yellow"))
    if not result.safe:
        raise VerificationError(
            f"the next boot ({result.default.kver}) has no working patched modules: {result.reason}",
            hint=f"{result.problem}; see `fwman modules status`"
            if result.problem
            else "run `fwman modules catchup`, or pin a kernel that has them (`fwman modules check-boot --pin`)",
        )


# build once per fleet: fwman.cli.modules_bundle (imports only click at module level)
from fwman.cli.modules_bundle import export, import_  # noqa: E402
from fwman.cli.modules_preflight import preflight  # noqa: E402

modules.add_command(export)
modules.add_command(import_)
modules.add_command(preflight)
