"""``fwman userspace ...``: keep the NVIDIA user-space packages at the version of the patched module."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


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
@leaf_options
def status(app: AppContext, no_simulate: bool, as_json: bool) -> None:
    """Show the installed NVIDIA user-space packages, fwman's hold, and upgrades apt would make now.

    Pending upgrades come from `apt-get -s dist-upgrade` (a simulation: changes nothing, takes no lock).

    \b
    Examples:
      fwman userspace status
      fwman userspace status --json
    """
    from fwman.app.userspace import userspace_status

    finish(app, "userspace-status", userspace_status(app.host, simulate=not no_simulate), as_json)


@userspace.command()
@click.option("--dry-run", is_flag=True, help="Print what would be written, change nothing.")
@leaf_options
def hold(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Pin every installed NVIDIA user-space package to its version and blacklist it for unattended-upgrades.

    Writes /etc/apt/preferences.d/fwman-nvidia-userspace (Pin-Priority 1001 on the installed version),
    /etc/apt/apt.conf.d/51fwman-nvidia-userspace (Unattended-Upgrade::Package-Blacklist) and records the
    packages in /var/lib/fwman/userspace-hold.json. Re-running after a deliberate upgrade moves the hold to the
    new versions. When NVIDIA's .run installer put the user space there, there is nothing to pin (exit 5).
    With --json: {"dry_run", "changed", "actions", "packages"} (schema fwman.userspace-hold/1).

    \b
    Examples:
      fwman userspace hold
      fwman userspace hold --dry-run
      fwman userspace hold --json
    """
    from fwman.app.userspace import hold_packages

    result = hold_packages(app.host, dry_run=dry_run, permit=lambda: app.require_change("fwman userspace hold"))
    finish(app, "userspace-hold", result, as_json)


@userspace.command()
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@leaf_options
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

    result = release_hold(app.host, dry_run=dry_run, permit=lambda: app.require_change("fwman userspace release"))
    finish(app, "userspace-release", result, as_json)
