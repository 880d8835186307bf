"""``fwman userspace ...``: keep the NVIDIA user-space packages at the version of the patched module."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app

if TYPE_CHECKING:
    from fwman.driver.userspace_hold import HoldStatus


@click.group()
def userspace() -> None:
    """Hold the NVIDIA user-space driver packages at their installed version (apt pin + unattended-upgrades).

    The patched module and the user-space driver must carry the same version, or NVML fails with
    "Driver/library version mismatch". `hold` pins every installed NVIDIA user-space package
    (libnvidia-*, nvidia-*, libcuda1, ...) to its installed version and blacklists it for unattended-upgrades;
    `release` undoes exactly that.

    \b
    Examples:
      fwman userspace status
      fwman userspace hold
      fwman userspace release

    Docs: docs/userspace.md.
    """


@userspace.command()
@click.option("--no-simulate", is_flag=True, help="Do not ask apt (apt-get -s) which upgrades are pending.")
@json_option
@common_options
@pass_app
def status(app: AppContext, no_simulate: bool, as_json: bool) -> None:
    """Show the installed NVIDIA user-space packages, fwman's hold, and upgrades apt would make now.

    Pending upgrades come from `apt-get -s dist-upgrade` (a simulation: changes nothing, takes no lock).

    \b
    Examples:
      fwman userspace status
      fwman userspace status --json
    """
    from fwman.driver.userspace_hold import read_status

    st = read_status(app.host, simulate=not no_simulate)
    if as_json:
        payload = st.to_dict()
        payload.pop("schema")  # nested (modules status, audit) it names its version; here the envelope does
        app.emit_json("userspace-status", payload)
        _refuse_unreadable(st)
        return
    if st.installed is None:
        app.echo("dpkg is not installed here: nothing apt could hold")
    elif not st.installed:
        app.echo("no NVIDIA user-space package is installed")
    else:
        held = st.record.packages if st.record else {}
        app.table(
            ["PACKAGE", "INSTALLED", "HELD AT", "PENDING UPGRADE"],
            [
                [name, version, held.get(name, "-"), (st.pending or {}).get(name, ("", "-"))[1]]
                for name, version in sorted(st.installed.items())
            ],
        )
    app.echo(f"hold: {st.hold_line()}")
    for line in st.warnings():
        app.echo(app.style(f"WARNING: {line}", fg="yellow", bold=True))
    _refuse_unreadable(st)


def _refuse_unreadable(st: HoldStatus) -> None:
    """Raise BlockedError (exit 3, after the status was printed) when the hold record is unreadable."""
    if st.record_error:
        from fwman.core.errors import BlockedError

        raise BlockedError(
            f"unreadable userspace hold record: {st.record_error}",
            hint="read it; `fwman userspace hold` writes it again for the installed packages, "
            "`fwman userspace release` removes the hold",
        )


@userspace.command()
@click.option("--dry-run", is_flag=True, help="Print what would be written, change nothing.")
@json_option
@common_options
@pass_app
def hold(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Pin every installed NVIDIA user-space package to its version and blacklist it for unattended-upgrades.

    Writes /etc/apt/preferences.d/fwman-nvidia-userspace (Pin-Priority 1001 on the installed version),
    /etc/apt/apt.conf.d/51fwman-nvidia-userspace (Unattended-Upgrade::Package-Blacklist) and records the
    packages in /var/lib/fwman/userspace-hold.json. Re-running after a deliberate upgrade moves the hold to the
    new versions. When NVIDIA's .run installer put the user space there, there is nothing to pin (exit 2).
    With --json: {"dry_run", "changed", "actions", "packages"} (schema fwman.userspace-hold/1).

    \b
    Examples:
      fwman userspace hold
      fwman userspace hold --dry-run
      fwman userspace hold --json
    """
    from fwman.app.userspace import hold_packages

    if not dry_run:
        app.require_change("fwman userspace hold")
    result = hold_packages(app.host, dry_run=dry_run)
    if not as_json and not dry_run:
        for name, version in sorted((result.packages or {}).items()):
            app.echo(f"held {name} {version}")
    app.show_change("userspace-hold", result, as_json, nothing="hold already in place and current", done="hold written")


@userspace.command()
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@json_option
@common_options
@pass_app
def release(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Undo `fwman userspace hold`: remove its apt pin, its blacklist entries and its record.

    With --json: {"dry_run", "changed", "actions", "packages"} (schema fwman.userspace-release/1);
    "changed" is false and "packages" null when fwman holds nothing (exit 0).

    \b
    Examples:
      fwman userspace release --dry-run
      fwman userspace release
      fwman userspace release --json
    """
    from fwman.app.userspace import release_hold

    if not dry_run:
        app.require_change("fwman userspace release")
    result = release_hold(app.host, dry_run=dry_run)
    if as_json:
        app.emit_json("userspace-release", result.to_json())
        return
    if dry_run:
        app.echo_plan(result.actions, "fwman holds nothing")
        return
    if not result.changed:
        app.echo("fwman holds nothing")
        return
    names = ", ".join(sorted(result.packages)) if result.packages else "(record unreadable)"
    app.echo(f"released: {names}; apt and unattended-upgrades may upgrade them again")
