"""``fwman modules ...``: the P2P-patched modules for every installed kernel, and never booting without them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from fwman.cli.context import FORK_FORMS, AppContext, leaf_options
from fwman.cli.render import finish, render
from fwman.cli.vocabulary import RenamedOption, deprecation_line, warn
from fwman.core.names import kernel_release

F = TypeVar("F", bound=Callable[..., Any])
DRY_RUN = click.option("--dry-run", is_flag=True, help="Print what would be done, change nothing.")


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


def _permit(app: AppContext, what: str) -> Any:
    return lambda: app.require_change(what)


def _origin(choices: list[str], help: str) -> Callable[[F], F]:
    """Return the decorator adding ``--origin WHO`` (who runs the command: the hooks say) and the deprecated
    ``--from`` it replaces (hidden; it still works and warns on stderr: ``fwman fetch --from`` named a file)."""

    def old(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None:
            ctx.meta["fwman.origin"] = value
            warn(deprecation_line("--from", "--origin", value))

    def new(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
        return value or ctx.meta.get("fwman.origin") or "manual"

    def decorate(f: F) -> F:
        f = click.option("--from", type=click.Choice(choices), cls=RenamedOption, renamed_to="--origin",
                         expose_value=False, callback=old)(f)  # fmt: skip
        return click.option("--origin", type=click.Choice(choices), callback=new, help=help + " Default: manual.")(f)

    return decorate


@modules.command()
@click.option("--kernel", "kernels", multiple=True, metavar="KVER", help="Kernel release to build for (repeatable).")
@click.option("--all", "all_kernels", is_flag=True, help="Every installed kernel with headers.")
@click.option("--fork", metavar="FORK", help=f"The fork to build from: {FORK_FORMS}.")
@click.option(
    "--branch",
    metavar="B",
    help="Branch of the fork, e.g. 570.86.16-p2p; of a donor-patch fork ([forks.NAME] patch): NVIDIA's upstream "
    "tag, e.g. 595.58.03.",
)
@click.option(
    "--driver-version",
    metavar="V",
    help="Instead of --branch: the newest branch of the fork whose tree builds driver version V (e.g. 570.86.16); "
    "of a donor-patch fork, upstream tag V with the pinned patch applied.",
)
@click.option("--source", "source_dir", metavar="DIR", help="Build a local tree instead of a fork branch.")
@click.option(
    "--force",
    is_flag=True,
    help="Retry a (commit, kernel) whose build failed before; build a version the user space does not match.",
)
@click.option("-j", "--jobs", type=int, metavar="N", help="Parallel make jobs (default: all CPUs).")
@click.option("--dry-run", is_flag=True, help="Say which kernels would be built from which source; change nothing.")
@leaf_options
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
    dry_run: bool,
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
      fwman modules build --all --dry-run       (which kernels, from which source; nothing changes)

    --driver-version V builds, of the fork's branches whose tree builds V (`fwman driver branches`: -p2p,
    -p2p-v2, -p2p-v3 or any name with p2p in it) and whose family serves these GPUs (-p2p-48g for 48 GB 4090s
    only), the highest revision, then the newest commit.

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
    from fwman.app.modules.build import BuildRequest, KernelBuild, build_modules, progress_sink

    for kver in kernels:  # before anything else: a kernel release becomes a path (/lib/modules/KVER, .pending)
        kernel_release(kver)
    if not dry_run:
        app.require_change("fwman modules build")
    progress = progress_sink(app.env.stderr, as_json=as_json, live=app.env.stderr_isatty, tell=_say(app))
    request = BuildRequest(kernels, all_kernels, fork, branch, source_dir, force, jobs, progress,
                           driver_version=driver_version, variables=app.env.variables, dry_run=dry_run)  # fmt: skip

    def show(build: KernelBuild) -> None:
        if app.env.stderr_isatty and not as_json:
            app.env.stderr.write("\n")  # end the live progress line
        if not as_json:
            render(app, build.text())

    finish(app, "modules-build", build_modules(app.host, request, _say(app), show), as_json)


@modules.command()
@leaf_options
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
    from fwman.app.modules.status import modules_status

    finish(app, "modules-status", modules_status(app.host), as_json)


@modules.command()
@click.option("--kernel", "kver", required=True, metavar="KVER", help="The kernel release that was removed.")
@_origin(["postrm", "kernel-install", "manual"], "Who runs it (the removal hooks say).")
@DRY_RUN
@leaf_options
def forget(app: AppContext, kver: str, origin: str, dry_run: bool, as_json: bool) -> None:
    """Drop fwman's state for a removed kernel and keep the next boot safe (what the removal hooks run).

    Removes the kernel's manifest, failure and pending markers, fwman's stored and installed copies of its
    modules, its build tree, and an object-cache entry no remaining kernel uses. When fwman's boot pin pointed
    at the kernel it is released and another safe kernel pinned, or it says loudly that none is left.
    Always exits 0: a kernel removal must never fail over it. With --json: {"kernel", "dry_run", "changed",
    "actions", "problems", "pin_released", "boot"} (schema fwman.modules-forget/2). --origin says who runs it
    (the hooks pass postrm or kernel-install); the older spelling --from still works and warns.

    \b
    Examples:
      fwman modules forget --kernel 6.1.0-47-amd64 --dry-run
      fwman modules forget --kernel 6.1.0-47-amd64
    """
    from fwman.app.modules.hooks import forget as forget_kernel

    kernel_release(kver)  # the release becomes paths below /var/lib/fwman and /lib/modules
    result = forget_kernel(app.host, kver, dry_run=dry_run, permit=_permit(app, "fwman modules forget"),
                           tell=_say(app))  # fmt: skip
    finish(app, "modules-forget", result, as_json)


@modules.command("remove")
@click.option("--kernel", "kernels", multiple=True, metavar="KVER", help="A kernel whose modules go (repeatable).")
@click.option("--all", "all_kernels", is_flag=True, help="Every kernel fwman installed modules for.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@leaf_options
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
    from fwman.app.modules.remove import RemoveRequest, remove_modules

    for kver in kernels:
        kernel_release(kver)
    request = RemoveRequest(kernels, all_kernels, dry_run)
    finish(app, "modules-remove", remove_modules(app.host, request, _say(app), _permit(app, "fwman modules remove")),
           as_json)  # fmt: skip


@modules.command()
@click.option("--force", is_flag=True, help="Rebuild every kernel, and retry failed (commit, kernel) pairs.")
@DRY_RUN
@leaf_options
def catchup(app: AppContext, force: bool, dry_run: bool, as_json: bool) -> None:
    """Build for every installed kernel with headers that lacks working patched modules (boot-time service).

    With every kernel current it reads one small manifest and stats the modules per kernel, and exits. Then it
    repairs modules DKMS replaced, and makes sure the next boot uses a kernel with working modules, releasing
    a pin fwman made once the pinned-away kernel has them. --dry-run says which kernels it would build or
    repair. With --json: {"dry_run", "changed", "actions", "kernels", "repaired", "waiting", "no_source",
    "source_problem", "boot"} (schema fwman.modules-catchup/2; "kernels" as in fwman.modules-build/2).

    \b
    Examples:
      fwman modules catchup --dry-run
      fwman modules catchup
      systemctl status fwman-catchup.service     (runs it at boot, see `fwman hooks install`)

    Exit status: 0 (also when kernels without headers stay pending), 6 when a build failed.
    """
    from fwman.app.modules.hooks import catchup as run_catchup

    result = run_catchup(app.host, force=force, dry_run=dry_run, permit=_permit(app, "fwman modules catchup"),
                         tell=_say(app))  # fmt: skip
    finish(app, "modules-catchup", result, as_json)


@modules.command(hidden=True)
@click.option("--kernel", "kver", required=True, metavar="KVER")
@_origin(["postinst", "header_postinst", "kernel-install", "manual"], "Which hook runs it.")
@DRY_RUN
@leaf_options
def hook(app: AppContext, kver: str, origin: str, dry_run: bool, as_json: bool) -> None:
    """What the kernel hook runs (/etc/kernel/postinst.d/fwman). Exit 0 unless `strict = true`, then 3.

    With --json: fwman.modules-catchup/2's keys plus "kernel", "origin" and "in_place" (schema
    fwman.modules-hook/2). --origin names the hook (the older --from still works and warns).
    """
    from fwman.app.modules.hooks import hook as run_hook

    kernel_release(kver)
    result = run_hook(app.host, kver, origin, dry_run=dry_run, permit=_permit(app, "fwman modules hook"),
                      tell=_say(app), under_apt="DPKG_FRONTEND_LOCKED" in app.env.variables)  # fmt: skip
    finish(app, "modules-hook", result, as_json)


@modules.command()
@click.option(
    "--reuse-dkms",
    is_flag=True,
    help="Use the key DKMS signs with (framework.conf's, Ubuntu's /var/lib/shim-signed/mok/MOK.priv, or "
    "/var/lib/dkms/mok.key): one enrollment.",
)
@click.option("--force", is_flag=True, help="Replace a key fwman already uses.")
@DRY_RUN
@leaf_options
def keygen(app: AppContext, reuse_dkms: bool, force: bool, dry_run: bool, as_json: bool) -> None:
    """Create the Secure Boot signing key for the modules (or adopt DKMS's), and say how to enroll it.

    fwman then signs every module it builds, in the kernel's appended-signature format with the kernel's
    CONFIG_MODULE_SIG_HASH. The certificate must be enrolled as a Machine Owner Key once: `mokutil --import`
    asks for a password, and the next boot's MOK manager asks for it again to confirm. With --json: {"dry_run",
    "changed", "actions", "key", "cert", "origin", "secure_boot", "enrollment_steps"} (schema
    fwman.modules-keygen/1).

    \b
    Examples:
      fwman modules keygen --dry-run
      fwman modules keygen
      fwman modules keygen --reuse-dkms
    """
    from fwman.app.modules.keygen import keygen as make_key

    result = make_key(app.host, reuse_dkms=reuse_dkms, force=force, dry_run=dry_run,
                      permit=_permit(app, "fwman modules keygen"))  # fmt: skip
    finish(app, "modules-keygen", result, as_json)


@modules.command()
@click.option("--dry-run", is_flag=True, help="Print the pin that would be undone, change nothing.")
@leaf_options
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
    from fwman.app.modules.unpin import unpin_boot

    finish(app, "modules-unpin", unpin_boot(app.host, dry_run=dry_run, permit=_permit(app, "fwman modules unpin")),
           as_json)  # fmt: skip


@modules.command("check-boot")
@click.option(
    "--pin",
    is_flag=True,
    help="When the next boot is not safe, pin the newest kernel that is (what the hooks run after the loader's).",
)
@_origin(
    ["postinst", "postrm", "kernel-install", "apt", "manual"],
    "Who runs it (the hooks say; with --pin a kernel hook asks apt's Post-Invoke hook to check again).",
)
@click.option(
    "--removed",
    "removed",
    multiple=True,
    metavar="KVER",
    help="A kernel being removed: never the next boot, never pinned (the removal hooks pass it; repeatable).",
)
@leaf_options
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
    from fwman.app.modules.check_boot import check_boot as run_check

    for kver in removed:
        kernel_release(kver)
    permit = _permit(app, "fwman modules check-boot --pin")
    # apt sets DPKG_FRONTEND_LOCKED for the dpkg it runs (dpkg(1)); its Post-Invoke check then follows the hooks
    under_apt = "DPKG_FRONTEND_LOCKED" in app.env.variables
    result = run_check(app.host, pin, origin, frozenset(removed), _say(app), permit, under_apt=under_apt)
    finish(app, "modules-check-boot", result, as_json)


# build once per fleet: fwman.cli.modules_bundle (imports only click at module level)
from fwman.cli.modules_bundle import export, import_  # noqa: E402
from fwman.cli.modules_preflight import preflight  # noqa: E402

modules.add_command(export)
modules.add_command(import_)
modules.add_command(preflight)
