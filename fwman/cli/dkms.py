"""``fwman dkms ...``: keep DKMS from replacing the patched modules with NVIDIA's stock ones."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


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
@leaf_options
def status(app: AppContext, as_json: bool) -> None:
    """List registered NVIDIA DKMS modules, per kernel, and whether fwman blocks DKMS.

    \b
    Examples:
      fwman dkms status
      fwman dkms status --json
    """
    from fwman.app.dkms.status import dkms_status

    finish(app, "dkms-status", dkms_status(app.host), as_json)


@dkms.command()
@click.option("--dry-run", is_flag=True, help="Print what would be done, change nothing.")
@leaf_options
def block(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Remove NVIDIA's DKMS modules for all kernels and pin the *nvidia*dkms* packages away.

    Runs `dkms remove M/V --all` for every registered nvidia* module and writes
    /etc/apt/preferences.d/fwman-nvidia-dkms (Pin-Priority -1 for *nvidia*dkms* and Ubuntu's prebuilt
    linux-modules-nvidia-*, linux-objects-nvidia-*, linux-signatures-nvidia-*; never the P2P fork's own
    nvidia-open-p2p-dkms); records it so `fwman dkms unblock` can undo it.
    Re-running is harmless. With --json: {"dry_run", "changed", "actions"} (schema fwman.dkms-block/1).

    \b
    Examples:
      fwman dkms block --dry-run
      fwman dkms block
      fwman dkms block --json
    """
    from fwman.app.dkms.change import block_dkms

    # each step is said once, as it happens (a failure halfway leaves the steps done on screen): on stdout for
    # people, on stderr under --json (stdout is the document)
    result = block_dkms(app.host, dry_run=dry_run, tell=lambda t: app.echo(t, err=as_json),
                        permit=lambda: app.require_change("fwman dkms block"))  # fmt: skip
    finish(app, "dkms-block", result, as_json)


@dkms.command()
@click.option("--dry-run", is_flag=True, help="Print what would be undone, change nothing.")
@leaf_options
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
    from fwman.app.dkms.change import unblock_dkms

    # each step once, as it happens: on stdout for people, on stderr under --json (stdout is the document)
    result = unblock_dkms(app.host, dry_run=dry_run, tell=lambda t: app.echo(t, err=as_json),
                          permit=lambda: app.require_change("fwman dkms unblock"))  # fmt: skip
    finish(app, "dkms-unblock", result, as_json)
