"""``fwman driver ...``: the P2P forks and the driver versions they carry.

Subcommands are registered in :data:`DRIVER_COMMANDS` (one line each, imported only when run), so the
patched-module build commands can join this group without editing the others.
"""

from __future__ import annotations

from typing import Any

import click

from fwman.cli.app import LazyGroup
from fwman.cli.context import AppContext, common_options, json_option, pass_app

#: name -> (module:attribute, one-line help)
DRIVER_COMMANDS: dict[str, tuple[str, str]] = {
    "branches": ("fwman.cli.driver:branches", "Which P2P forks carry a driver version (live, cached offline)."),
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

    A fork carries version V when it has a branch named V-p2p (tags do not count). The kernel module, the
    user-space driver and the GSP firmware must be the same version on the host and in every container, so
    when no fork carries your version, the nearest versions that have a branch are shown with what moving to
    one means.

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
