"""``fwman dkms ...``: keep DKMS from replacing the patched modules with NVIDIA's stock ones."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core import paths


@click.group()
def dkms() -> None:
    """See and stop NVIDIA's DKMS modules, which rebuild the stock driver over the patched one.

    \b
    Examples:
      fwman dkms status
      fwman dkms block            remove nvidia* from DKMS, pin *nvidia*dkms* packages to -1
      fwman dkms unblock          undo exactly what block did

    Docs: docs/dkms.md.
    """


@dkms.command()
@json_option
@common_options
@pass_app
def status(app: AppContext, as_json: bool) -> None:
    """List registered NVIDIA DKMS modules, per kernel, and whether fwman blocks DKMS.

    \b
    Examples:
      fwman dkms status
      fwman dkms status --json
    """
    from fwman.app.dkms_status import dkms_status

    result = dkms_status(app.host)
    entries, record = result.entries, result.block
    if as_json:
        app.emit_json("dkms-status", result.to_json())
        return
    if not result.dkms_installed:
        app.echo("dkms is not installed")
    elif entries:
        app.table(
            ["MODULE", "VERSION", "KERNEL", "STATE"],
            [[e.module, e.version, e.kernel or "-", e.state] for e in entries],
        )
    else:
        app.echo("no NVIDIA module is registered with DKMS")
    if record is not None:
        removed = ", ".join(f"{r['module']}/{r['version']}" for r in record.removed) or "nothing registered then"
        app.echo(f"blocked by fwman since {record.at}: removed {removed}; apt pin {record.apt_pin}")
    elif entries:
        app.echo(app.style("DKMS will rebuild these over fwman's modules: run `fwman dkms block`", fg="yellow"))


@dkms.command()
@click.option("--dry-run", is_flag=True, help="Print what would be done, change nothing.")
@json_option
@common_options
@pass_app
def block(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Remove NVIDIA's DKMS modules for all kernels and pin the *nvidia*dkms* packages away.

    Runs `dkms remove M/V --all` for every registered nvidia* module and writes
    /etc/apt/preferences.d/fwman-nvidia-dkms (Pin-Priority -1 for *nvidia*dkms* and Ubuntu's prebuilt
    linux-modules-nvidia-*, linux-objects-nvidia-*, linux-signatures-nvidia-*); records it so `fwman dkms
    unblock` can undo it.
    Re-running is harmless. With --json: {"dry_run", "changed", "actions"} (schema fwman.dkms-block/1).

    \b
    Examples:
      fwman dkms block --dry-run
      fwman dkms block
      fwman dkms block --json
    """
    from fwman.app.dkms import block_dkms

    if not dry_run:
        app.require_change("fwman dkms block")
    # each step is said once, as it happens (a failure halfway leaves the steps done on screen): on stdout for
    # people, on stderr under --json (stdout is the document)
    result = block_dkms(app.host, dry_run=dry_run, report=lambda t: app.echo(t, err=as_json))
    if as_json:
        app.emit_json("dkms-block", result.to_json())
    elif dry_run:
        app.echo_plan(result.actions, "DKMS already blocked: nothing to do")
    elif not result.changed:
        app.echo("DKMS already blocked: nothing to do")


@dkms.command()
@click.option("--dry-run", is_flag=True, help="Print what would be undone, change nothing.")
@json_option
@common_options
@pass_app
def unblock(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Undo `fwman dkms block`: remove the apt pin and register the removed modules with DKMS again.

    With --json: {"dry_run", "changed", "blocked", "actions"} (schema fwman.dkms-unblock/1); "blocked" and
    "changed" are false when fwman had not blocked DKMS (nothing to undo, exit 0).

    \b
    Examples:
      fwman dkms unblock --dry-run
      fwman dkms unblock
      fwman dkms unblock --json
    """
    from fwman.app.dkms import unblock_dkms

    if not dry_run:
        app.require_change("fwman dkms unblock")
    # each step once, as it happens: on stdout for people, on stderr under --json (stdout is the document)
    result = unblock_dkms(app.host, dry_run=dry_run, report=lambda t: app.echo(t, err=as_json))
    if as_json:
        app.emit_json("dkms-unblock", result.to_json())
    elif not result.blocked:
        app.echo(f"DKMS is not blocked by fwman (no {paths.DKMS_BLOCK_STATE}): nothing to undo")
    elif dry_run:
        app.echo_plan(result.actions, "nothing to undo")
    else:
        app.echo("DKMS unblocked: `dkms autoinstall` will build NVIDIA's stock modules again")
