"""``fwman driver ...``: the P2P forks and the driver versions they carry.

Subcommands are registered in :data:`DRIVER_COMMANDS` (one line each, imported only when run), so the
patched-module build commands can join this group without editing the others.
"""

from __future__ import annotations

from typing import Any

import click

from fwman.cli.app import LazyGroup
from fwman.cli.context import FORK_FORMS, AppContext, leaf_options
from fwman.cli.render import finish
from fwman.cli.vocabulary import renamed_option
from fwman.core.errors import UsageError

#: name -> (module:attribute, one-line help)
DRIVER_COMMANDS: dict[str, tuple[str, str]] = {
    "branches": ("fwman.cli.driver:branches", "Which P2P forks carry a driver version (live, cached offline)."),
    "settings": ("fwman.cli.driver:settings", "NVreg_* module options for P2P: fwman's modprobe file, in effect?"),
    "power": ("fwman.cli.driver:power", "Persistence mode and power limits, reapplied at every boot by a unit."),
    "move": ("fwman.cli.driver:move", "Move modules and user space to another driver version together; roll back."),
}


@click.group(cls=LazyGroup, lazy_commands=DRIVER_COMMANDS)
def driver() -> None:
    """The P2P-patched NVIDIA kernel module: forks, branches, builds.

    \b
    Examples:
      fwman driver branches                       every P2P version each fork carries
      fwman driver branches --driver-version 570.86.16   which forks carry exactly 570.86.16
    """


@driver.command()
@click.option("--driver-version", "version_text", metavar="V", help="The exact driver version to look for (570.86.16).")
@renamed_option("--version", "--driver-version", "version_text")
@click.option(
    "--fork",
    "fork_specs",
    multiple=True,
    metavar="FORK",
    help=f"Also list this fork for this run (repeatable): {FORK_FORMS}.",
)
@click.option("--offline", is_flag=True, help="Do not touch the network: use the cached lists (their age is shown).")
@leaf_options
def branches(
    app: AppContext, version_text: str | None, fork_specs: tuple[str, ...], offline: bool, as_json: bool
) -> None:
    """List the driver versions the P2P forks carry, or which forks carry exactly one version.

    A fork carries version V when it has a P2P branch (its name says p2p; tags do not count) whose tree builds
    V: the NVIDIA_VERSION of the branch's version.mk, read once per commit (the name, e.g. V-p2p-v3, is only a
    hint where the tree cannot be read). Revisions of one version are listed together, newest commit first,
    with their commit dates. The kernel module, the user-space driver and the GSP firmware must be the same
    version on the host and in every container, so when no fork carries your version, the nearest versions that
    have a branch are shown with what moving to one means.

    Branches are listed live (git ls-remote where git is installed, else the forge API) and cached in
    /var/cache/fwman/branches.json; offline, the cache is used and its age shown. Forks: aikitoria, tinygrad,
    mylesgoose by default; more in /etc/fwman/config.toml ([forks] name = "URL") or with --fork.

    \b
    Examples:
      fwman driver branches
      fwman driver branches --driver-version 570.86.16
      fwman driver branches --driver-version 575.51.02 --json
      fwman driver branches --fork mine=/srv/git/open-gpu-kernel-modules.git
      fwman driver branches --fork aikitoria --offline
      fwman driver branches --offline

    Exit status: 0 when every fork was listed (live or cached), 6 when some could not be, 5 when none could.
    """
    from fwman.app.driver.branches import driver_branches

    # a replay must not reach the network: it answers from the recorded cache
    answer = driver_branches(app.host, app.env.variables, version_text, fork_specs, offline or app.is_replay)
    finish(app, "driver-branches", answer, as_json)


@driver.command()
@click.option("--apply", "do_apply", is_flag=True, help="Write fwman's modprobe file and regenerate the initramfs.")
@click.option("--dry-run", is_flag=True, help="With --apply: print what would be done, change nothing.")
@click.option(
    "--rebar",
    is_flag=True,
    help="Also NVreg_EnableResizableBar=1: for boards without a Resizable BAR switch in their firmware "
    "(xCuri0/ReBarUEFI issues 67, PR 388).",
)
@leaf_options
def settings(app: AppContext, do_apply: bool, dry_run: bool, rebar: bool, as_json: bool) -> None:
    """The NVIDIA module options P2P depends on: recommended per GPU generation, written, in effect?

    Without --apply: read-only. Shows the generation of each GPU, the NVreg_* options recommended for it with
    the public source of each (where the sources name none, it says so), fwman's own file
    /etc/modprobe.d/fwman-nvidia-p2p.conf, whether each option is in effect in the loaded module (read from
    /proc/driver/nvidia/params: the sysfs parameters read empty even when set), and whether the running
    kernel's initramfs carries the file (the module loads from there at boot).

    --apply writes (or, when nothing is recommended, removes) fwman's file, nothing else in /etc/modprobe.d,
    and regenerates the running kernel's initramfs (update-initramfs -u -k KVER, or dracut) when the image does
    not carry the file as written. The options take effect at the next module load (a reboot).

    \b
    Examples:
      fwman driver settings
      fwman driver settings --apply --dry-run
      fwman driver settings --apply --json

    \b
    Exit status: 0 done (or nothing to do); 3 --apply without root; 5 no initramfs generator.
    """
    from fwman.app.driver.settings import driver_settings

    if dry_run and not do_apply:
        raise UsageError("--dry-run goes with --apply", hint="fwman driver settings --apply --dry-run")
    result = driver_settings(app.host, rebar=rebar, apply=do_apply, dry_run=dry_run, tell=_steps(app, as_json),
                             permit=lambda: app.require_change("fwman driver settings --apply"))  # fmt: skip
    finish(app, "driver-settings", result, as_json)


@driver.command()
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="WATTS|BUS=WATTS",
    help="With --apply: a power limit for every GPU (280) or one GPU (0000:01:00.0=280); repeatable.",
)
@click.option("--persistence", is_flag=True, help="With --apply: persistence mode on for every GPU.")
@click.option("--off", is_flag=True, help="With --apply: remove fwman's unit (the settings stay until reboot).")
@click.option("--apply", "do_apply", is_flag=True, help="Write and enable fwman's unit, and apply it now.")
@click.option("--dry-run", is_flag=True, help="With --apply: print what would be done, change nothing.")
@leaf_options
def power(
    app: AppContext, limits: tuple[str, ...], persistence: bool, off: bool, do_apply: bool, dry_run: bool, as_json: bool
) -> None:
    """Persistence mode and power limits, persisted: the NVIDIA driver resets both at every boot.

    Without --apply: read-only; shows each GPU's power limit and default (nvidia-smi) and fwman's unit
    /etc/systemd/system/fwman-gpu-power.service as it is.

    --apply writes that unit (a oneshot after systemd-modules-load.service that runs `nvidia-smi -i BUS -pm
    ENABLED` and `nvidia-smi -i BUS -pl WATTS`), enables it for multi-user.target, and runs the same commands
    now. --apply --off removes the unit. fwman never reloads the nvidia module itself, so the boot is the only
    reload the unit follows.

    \b
    Examples:
      fwman driver power
      fwman driver power --apply --limit 280 --persistence --dry-run
      fwman driver power --apply --limit 0000:01:00.0=280 --json
      fwman driver power --apply --off

    \b
    Exit status: 0 done (or nothing to do); 2 a bad --limit; 3 --apply without root; 5 no nvidia-smi, or no
    GPU to apply a limit to.
    """
    from fwman.app.driver.power import driver_power

    if (dry_run or limits or persistence or off) and not do_apply:
        raise UsageError("--limit, --persistence, --off and --dry-run go with --apply",
                         hint="fwman driver power --apply --limit 280 --persistence --dry-run")  # fmt: skip
    if do_apply and not (limits or persistence or off):
        raise UsageError("--apply needs --limit, --persistence or --off", hint="fwman driver power --apply --limit 280")
    if off and (limits or persistence):
        raise UsageError("--off removes the unit: it does not go with --limit or --persistence")
    result = driver_power(app.host, limits=list(limits), persistence=persistence, off=off, apply=do_apply,
                          dry_run=dry_run, tell=_steps(app, as_json),
                          permit=lambda: app.require_change("fwman driver power --apply"))  # fmt: skip
    finish(app, "driver-power", result, as_json)


def _steps(app: AppContext, as_json: bool) -> Any:
    """Return where an apply's steps go as they are done: stderr, or nowhere under --json."""
    return (lambda line: None) if as_json else (lambda line: app.echo(line, err=True))


@driver.command()
@click.option("--to", "to_version", metavar="V", help="The driver version to move to (575.51.02).")
@click.option("--rollback", is_flag=True, help="Put back the modules, user space and hold kept before the move.")
@click.option("--finish", "finish_move", is_flag=True, help="End a move whose new module is loaded: drop the kept set.")
@click.option("--status", "show_status", is_flag=True, help="Show the last move (the default without an option).")
@click.option(
    "--container-root",
    "container_roots",
    multiple=True,
    metavar="DIR",
    help="With --to: also move the user space of this container root (repeatable); Proxmox LXC roots are found.",
)
@click.option(
    "--run", "run_file", metavar="FILE", help="With --to: NVIDIA's .run of V, for the containers' user space."
)
@click.option("--run-sha256", metavar="HEX", help="The SHA-256 of --run, as published where you downloaded it.")
@click.option("--dry-run", is_flag=True, help="Print what would be done, change nothing.")
@leaf_options
def move(
    app: AppContext,
    to_version: str | None,
    rollback: bool,
    finish_move: bool,
    show_status: bool,
    container_roots: tuple[str, ...],
    run_file: str | None,
    run_sha256: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Move the patched modules of every kernel and the NVIDIA user space to driver V together, with a way back.

    --to V: the fork's branch that builds V (`driver branches`; the fork of the last `modules build`) is built
    for every installed kernel first, in the move's own build directory; when one kernel does not build, the
    move is refused and nothing is changed (exit 3). The new modules are staged in /var/lib/fwman/move, the
    NVIDIA user-space packages of V downloaded from apt (each installed one must be offered at V), and the
    installed packages downloaded too, so the way back does not depend on the repository. Then the current
    modules, manifests and user-space hold are kept (bytes and modes), and one commit installs the staged
    modules (depmod), the packages of V, moves the hold to V and points later kernels' builds at V's branch.
    The reboot is yours; then check (`fwman apply --check`, `fwman p2p`).

    Containers that carry their own user space (a mounted Proxmox LXC root, or --container-root DIR) move too:
    NVIDIA's installer of V (--run FILE, its SHA-256 given with --run-sha256 and checked before anything
    changes) is run in each, chrooted, with --no-kernel-modules; their libraries are kept for the rollback. A
    container's user space without --run refuses the move. NVIDIA CDI specs in /etc/cdi (Podman, Docker) are
    written again for V with nvidia-ctk cdi generate; Docker/Podman images that carry NVIDIA's libraries of
    another version are named, with how to rebuild them.

    --rollback restores the kept set exactly (the packages of before, the module files, manifests and hold);
    --finish, once the new module is loaded, drops the kept set. Without an option (or with --status): the last
    move's record (/var/lib/fwman/driver-move.json: from, to, stage). At boot, fwman's catch-up names the
    rollback when the new module is not the one loaded.

    \b
    Examples:
      fwman driver move --to 575.51.02 --dry-run
      fwman driver move --to 575.51.02
      fwman driver move --to 575.51.02 --container-root /srv/ct/trainer \\
          --run NVIDIA-Linux-x86_64-575.51.02.run --run-sha256 HEX
      fwman driver move
      fwman driver move --rollback
      fwman driver move --finish

    \b
    Exit status: 0 done (or nothing to do); 2 a bad version or a move not finished; 3 refused (a kernel does
    not build V, a package cannot be had), nothing changed; 5 no branch builds V.
    Docs: docs/move.md.
    """
    from fwman.app.driver import move as driver_move

    chosen = [name for name, on in (("--to", to_version is not None), ("--rollback", rollback),
                                    ("--finish", finish_move), ("--status", show_status)) if on]  # fmt: skip
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} exclude each other", hint="fwman driver move --help")
    if dry_run and not (to_version or rollback or finish_move):
        raise UsageError("--dry-run goes with --to, --rollback or --finish", hint="fwman driver move --to V --dry-run")
    if (container_roots or run_file or run_sha256) and to_version is None:
        raise UsageError("--container-root, --run and --run-sha256 go with --to", hint="fwman driver move --help")
    if (run_file is None) != (run_sha256 is None):
        raise UsageError("--run and --run-sha256 go together: fwman installs no .run it cannot check")
    if (to_version or rollback or finish_move) and not dry_run:  # permit once, before anything is read or staged
        app.require_change(f"fwman driver move {chosen[0]}")
    run = driver_move.RunInstaller(run_file, run_sha256) if run_file and run_sha256 else None
    steps = _steps(app, as_json)
    if to_version is not None:
        permit = lambda: app.require_change(f"fwman driver move --to {to_version}")  # noqa: E731
        result: Any = driver_move.move_to(app.host, to_version, dry_run=dry_run, permit=permit, tell=steps,
                                          variables=app.env.variables, container_roots=container_roots,
                                          run=run)  # fmt: skip
    elif rollback:
        permit = lambda: app.require_change("fwman driver move --rollback")  # noqa: E731
        result = driver_move.rollback(app.host, dry_run=dry_run, permit=permit, tell=steps)
    elif finish_move:
        permit = lambda: app.require_change("fwman driver move --finish")  # noqa: E731
        result = driver_move.finish(app.host, dry_run=dry_run, permit=permit, tell=steps)
    else:
        result = driver_move.move_status(app.host)
    finish(app, "driver-move", result, as_json)
