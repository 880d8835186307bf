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
        metavar="NAME=URL",
        help="Also list this fork for this run (repeatable; URL may be a local git repository path).",
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
      fwman driver branches --offline

    Exit status: 0 when every fork was listed (live or cached), 6 when some could not be, 5 when none could.
    """
    from fwman.core.config import load_config
    from fwman.core.errors import MissingError, PartialError
    from fwman.driver.forks import api_base, configured_forks, human_age, list_branches
    from fwman.driver.versions import DriverVersion

    target = DriverVersion.parse(version_text) if version_text else None
    host = app.host
    config = load_config(host)
    forks = configured_forks(config, fork_specs)
    # a replay must not reach the network: it answers from the recorded cache
    report = list_branches(host, forks, api=api_base(config, app.env.variables), offline=offline or app.is_replay)
    now = report.now

    fork_rows = [
        {
            "fork": f.fork,
            "url": f.url,
            "source": f.source,
            "fetched_at": f.fetched_at.isoformat() if f.fetched_at else None,
            "age_seconds": f.age_seconds(now),
            "error": f.error,
            "p2p_versions": [str(v) for v in f.p2p_versions()],
        }
        for f in report.forks
    ]
    result: dict[str, Any] = {"forks": fork_rows}
    if target is not None:
        result.update(version_answer(report, target))

    if as_json:
        app.emit_json("driver-branches", result)
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
            for line in result["summary"]:
                app.echo(line)

    if not report.any_available:
        raise MissingError(
            "no fork could be listed and there is no cache",
            hint="check the network (or git/requests access to the forge), then run again",
        )
    if not report.complete:
        missing = ", ".join(f.fork for f in report.forks if not f.available)
        raise PartialError(f"not listed (no cache either): {missing}", hint="run again when online")


def version_answer(report: Any, target: Any) -> dict[str, Any]:
    """Return the ``--version`` part of the answer: carriers, nearest versions, what moving means, summary lines."""
    from fwman.driver.forks import BranchReport
    from fwman.driver.versions import DriverVersion

    assert isinstance(report, BranchReport) and isinstance(target, DriverVersion)
    carriers = report.carrying(target)
    answer: dict[str, Any] = {"version": str(target), "branch": target.branch_name, "carried_by": carriers}
    lines: list[str] = []
    if not report.any_available:
        lines.append(f"Unknown whether any fork carries {target.branch_name}: no fork could be listed.")
        answer.update({"nearest_below": None, "nearest_above": None, "moves": [], "summary": lines})
        return answer
    if carriers:
        lines.append(f"{target.branch_name} is carried by: {', '.join(carriers)}.")
        answer.update({"nearest_below": None, "nearest_above": None, "moves": []})
    else:
        below, above = report.nearest(target)
        versions = report.versions()
        answer["nearest_below"] = _near(below, versions)
        answer["nearest_above"] = _near(above, versions)
        answer["moves"] = [move_plan(v) for v in (below, above) if v is not None]
        if not report.complete:
            lines.append(f"No listed fork carries {target.branch_name} (some forks could not be listed).")
        else:
            lines.append(f"No fork carries {target.branch_name}: version {target} has no P2P build yet.")
        if below is None and above is None:
            lines.append("No fork carries any P2P version.")
        for v in (below, above):
            if v is None:
                continue
            lines.append(f"Nearest with a branch: {v} ({', '.join(versions[v])}). Moving to it means:")
            lines.extend(f"  - {step}" for step in move_plan(v)["steps"])
    answer["summary"] = lines
    return answer


def _near(version: Any, versions: dict[Any, list[str]]) -> dict[str, Any] | None:
    if version is None:
        return None
    return {"version": str(version), "branch": version.branch_name, "forks": versions[version]}


def move_plan(version: Any) -> dict[str, Any]:
    """Return what moving host and containers to exactly ``version`` takes (for people and JSON)."""
    return {
        "version": str(version),
        "steps": [
            f"host kernel module: build branch {version.branch_name} for every installed kernel",
            f"host user space: {version.run_file} --no-kernel-modules (libraries, nvidia-smi, firmware)",
            f"GSP firmware: /lib/firmware/nvidia/{version} (installed by that .run)",
            f"every container using the GPU: the same {version.run_file} --no-kernel-modules inside it",
        ],
    }
