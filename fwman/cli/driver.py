"""``fwman driver ...``: the P2P forks and the driver versions they carry.

Subcommands are registered in :data:`DRIVER_COMMANDS` (one line each, imported only when run), so the
patched-module build commands can join this group without editing the others.
"""

from __future__ import annotations

from typing import Any

import click

from fwman.cli.app import LazyGroup
from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.errors import UsageError

#: name -> (module:attribute, one-line help)
DRIVER_COMMANDS: dict[str, tuple[str, str]] = {
    "branches": ("fwman.cli.driver:branches", "Which P2P forks carry a driver version (live, cached offline)."),
    "settings": ("fwman.cli.driver:settings", "NVreg_* module options for P2P: fwman's modprobe file, in effect?"),
    "power": ("fwman.cli.driver:power", "Persistence mode and power limits, reapplied at every boot by a unit."),
}


@click.group(cls=LazyGroup, lazy_commands=DRIVER_COMMANDS)
def driver() -> None:
    """The P2P-patched NVIDIA kernel module: forks, branches, builds.

    \b
    Examples:
      fwman driver branches                       every P2P version each fork carries
      fwman driver branches --version 570.86.16   which forks carry exactly 570.86.16
    """


def _fork_options(f: Any) -> Any:
    f = click.option(
        "--offline", is_flag=True, help="Do not touch the network: use the cached lists (their age is shown)."
    )(f)
    f = click.option(
        "--fork",
        "fork_specs",
        multiple=True,
        metavar="FORK",
        help="Also list this fork for this run (repeatable): a known name (aikitoria, a [forks] name), NAME=URL, "
        "or a repository URL or local path.",
    )(f)
    return f


@driver.command()
@click.option("--version", "version_text", metavar="V", help="The exact driver version to look for (570.86.16).")
@_fork_options
@json_option
@common_options
@pass_app
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
      fwman driver branches --version 570.86.16
      fwman driver branches --version 575.51.02 --json
      fwman driver branches --fork mine=/srv/git/open-gpu-kernel-modules.git
      fwman driver branches --fork aikitoria --offline
      fwman driver branches --offline

    Exit status: 0 when every fork was listed (live or cached), 6 when some could not be, 5 when none could.
    """
    from fwman.app.driver_branches import driver_branches
    from fwman.core.errors import MissingError, PartialError
    from fwman.driver.forks import human_age

    # a replay must not reach the network: it answers from the recorded cache
    answer = driver_branches(app.host, app.env.variables, version_text, fork_specs, offline or app.is_replay)
    report, target, now = answer.report, answer.target, answer.report.now
    if as_json:
        app.emit_json("driver-branches", answer.to_json())
    else:
        app.table(
            ["FORK", "SOURCE", "AGE", "P2P VERSIONS"],
            [
                [
                    f.fork,
                    f.source,
                    human_age(f.age_seconds(now)) if f.available else "-",
                    ", ".join(str(v) for v in f.p2p_versions()) or ("(none)" if f.available else "(unavailable)"),
                ]
                for f in report.forks
            ],
        )
        revision_rows = [
            [
                str(v),
                f.fork,
                r.branch,
                (r.date or "unknown")[:19].replace("T", " "),
                (r.commit or "unknown")[:12],
                "tree" if r.from_tree else "name",
            ]
            for f in report.forks
            for v in reversed(f.p2p_versions())
            for r in f.revisions_of(v)
        ]
        if revision_rows:
            app.echo()
            app.table(
                ["VERSION", "FORK", "BRANCH (newest first)", "COMMITTED", "COMMIT", "VERSION FROM"], revision_rows
            )
        for f in report.forks:
            if f.error and f.source != "git" and f.source != "api":
                app.echo(app.style(f"note: {f.fork}: {f.error}", fg="yellow"), err=True)
            elif f.error:
                app.echo(f"note: {f.fork}: {f.error}", err=True)
        if target is not None:
            app.echo()
            for line in (answer.answer or {}).get("summary", []):
                app.echo(line)

    if not report.any_available:
        raise MissingError(
            "no fork could be listed and there is no cache",
            hint="check the network (or git/requests access to the forge), then run again",
        )
    if not report.complete:
        missing = ", ".join(f.fork for f in report.forks if not f.available)
        raise PartialError(f"not listed (no cache either): {missing}", hint="run again when online")


@driver.command()
@click.option("--apply", "do_apply", is_flag=True, help="Write fwman's modprobe file and regenerate the initramfs.")
@click.option("--dry-run", is_flag=True, help="With --apply: print what would be done, change nothing.")
@click.option(
    "--rebar",
    is_flag=True,
    help="Also NVreg_EnableResizableBar=1: for boards without a Resizable BAR switch in their firmware "
    "(xCuri0/ReBarUEFI issues 67, PR 388).",
)
@json_option
@common_options
@pass_app
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
    from fwman.app.driver_settings import inspect_settings, settings_actions
    from fwman.host.actions import apply_all, pending

    if dry_run and not do_apply:
        raise UsageError("--dry-run goes with --apply", hint="fwman driver settings --apply --dry-run")
    report = inspect_settings(app.host, rebar=rebar)
    changed: list[str] = []
    todo: list[str] = []
    if do_apply:
        actions = settings_actions(app.host, report)
        if dry_run:
            todo = [a.describe() for a in pending(app.host, actions)]
        else:
            app.require_change("fwman driver settings --apply")
            changed = apply_all(app.host, actions, report=None if as_json else lambda line: app.echo(line, err=True))
            report = inspect_settings(app.host, rebar=rebar)
    if as_json:
        app.emit_json(
            "driver-settings", {**report.to_json(), "changed": bool(changed), "applied": changed, "would": todo}
        )
        return
    _show_settings(app, report)
    if do_apply and dry_run:
        app.echo_plan(todo, "nothing to do: fwman's file and the initramfs are current")
    elif do_apply:
        app.echo("changed: " + ("; ".join(changed) if changed else "nothing (already current)"))
        if changed:
            app.echo("the options apply at the next load of the nvidia module (reboot)")


def _show_settings(app: AppContext, report: Any) -> None:
    from fwman.core import paths

    gens = ", ".join(f"{g} ({len(b)} GPU{'s' if len(b) != 1 else ''})" for g, b in report.generations.items())
    app.echo(f"GPUs: {gens or 'none found'}")
    if report.settings:
        app.table(
            ["option", "state (loaded module)", "source"],
            [
                [
                    s.option,
                    state + (f" (loaded {loaded})" if loaded is not None and state != "in effect" else ""),
                    s.source,
                ]
                for s, state, loaded in report.states()
            ],
        )
    for gen, note in report.silent().items():
        app.echo(f"{gen}: {note}")
    where = paths.MODPROBE_OPTIONS_FILE
    if report.file_ok:
        app.echo(f"{where}: current" if report.wanted else f"{where}: absent (nothing to write)")
    else:
        app.echo(
            f"{where}: " + ("absent" if report.current is None else "differs") + " (`fwman driver settings --apply`)"
        )
    if report.params_error:
        app.echo(f"{paths.PROC_DRIVER_PARAMS}: {report.params_error}")
    elif report.params is None:
        app.echo(f"{paths.PROC_DRIVER_PARAMS}: absent (the nvidia module is not loaded)")
    app.echo(f"initramfs {report.image or ''}: {report.initramfs}".replace("  ", " "))


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
@json_option
@common_options
@pass_app
def power(
    app: AppContext,
    limits: tuple[str, ...],
    persistence: bool,
    off: bool,
    do_apply: bool,
    dry_run: bool,
    as_json: bool,
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
    Exit status: 0 done (or nothing to do); 2 a bad --limit; 3 --apply without root; 5 no nvidia-smi.
    """
    from fwman.app.driver_power import plan_actions, power_status
    from fwman.core import paths
    from fwman.core.errors import ParseError
    from fwman.host.actions import apply_all, pending

    if (dry_run or limits or persistence or off) and not do_apply:
        raise UsageError("--limit, --persistence, --off and --dry-run go with --apply",
                         hint="fwman driver power --apply --limit 280 --persistence --dry-run")  # fmt: skip
    if do_apply and not (limits or persistence or off):
        raise UsageError("--apply needs --limit, --persistence or --off", hint="fwman driver power --apply --limit 280")
    if off and (limits or persistence):
        raise UsageError("--off removes the unit: it does not go with --limit or --persistence")
    status = power_status(app.host)
    changed: list[str] = []
    todo: list[str] = []
    if do_apply:
        try:
            _, actions = plan_actions(app.host, status, list(limits), persistence, off, now=True)
        except ParseError as e:
            raise UsageError(e.message, hint="--limit 280, or --limit 0000:01:00.0=280") from e
        if dry_run:
            todo = [a.describe() for a in pending(app.host, actions)]
        else:
            app.require_change("fwman driver power --apply")
            changed = apply_all(app.host, actions, report=None if as_json else lambda line: app.echo(line, err=True))
            if any(paths.POWER_UNIT in c for c in changed):
                from fwman.platform.systemd import reload_running_systemd

                reload_running_systemd(app.host)
            status = power_status(app.host)
    if as_json:
        app.emit_json("driver-power", {**status.to_json(), "changed": bool(changed), "applied": changed, "would": todo})
        return
    rows = [[b, "-" if w is None else f"{w:g} W", "-" if d is None else f"{d:g} W"] for b, w, d in status.gpus]
    if rows:
        app.table(["GPU", "power limit", "default"], rows)
    else:
        app.echo("GPUs: none found")
    app.echo(f"{paths.POWER_UNIT}: " + ("present" if status.unit is not None else "absent"))
    if do_apply and dry_run:
        app.echo_plan(todo, "nothing to do: fwman's unit is current")
    elif do_apply:
        app.echo("changed: " + ("; ".join(changed) if changed else "nothing (already current)"))
