"""``fwman plan`` and ``fwman apply``: the front door, the box brought to its P2P target."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


@click.command()
@leaf_options
def plan(app: AppContext, as_json: bool) -> None:
    """Show the whole way to peer-to-peer on this box: what `fwman apply` does, then what you do.

    The target is what /etc/fwman/config.toml declares ([modules]: the driver version, fork and branch), else the
    source an earlier `fwman modules build` remembered, else the loaded module's version from a fork that carries
    a P2P branch of it. fwman's part, in order, each the planner of its own command: the kernel hooks (`fwman hooks
    install`), the DKMS block (`fwman dkms block`), the patched modules for every installed kernel (`fwman modules
    build`), the module options with nova_core kept off (`fwman driver settings --apply`), the user-space hold
    (`fwman userspace hold`). Your part: every step fwman cannot take, from doctor's chain (firmware, the firmware
    setup, the kernel command line, ACS, NCCL in a container), each with its exact command, file or setting; then
    reboot and `fwman apply --check`. The same as `fwman apply --dry-run`. Changes nothing. With --json: {"host",
    "dry_run", "changed", "target", "actions": [{"subject", "goal", "command", "steps"}], "done", "manual": [{"id",
    "what", "how", "severity"}], "doctor_error", "stopped"} (schema fwman.plan/1). Docs: docs/journey-p2p.md.

    \b
    Examples:
      fwman plan
      fwman --snapshot fixtures/hosts/rig-4x3090 plan
      fwman plan --json
    """
    from fwman.app.plan import make_plan

    finish(app, "plan", make_plan(app.host), as_json)


@click.command()
@click.option("--dry-run", is_flag=True, help="Print the plan (`fwman plan`), change nothing.")
@click.option(
    "--check",
    "verify",
    is_flag=True,
    help="After the reboot: say what is still missing (fwman's steps, doctor's blockers); change nothing.",
)
@leaf_options
def apply(app: AppContext, dry_run: bool, verify: bool, as_json: bool) -> None:
    """Bring the box to its P2P target: every step of `fwman plan` that fwman can take, in order.

    Each part runs the planner of its own command, and says each step as it does it; a part with nothing to do
    is skipped, so a second `fwman apply` changes nothing. On a failure it stops, says what was done and what was
    not, and a new `fwman apply` continues. The steps only you can take (firmware, the firmware setup, the kernel
    command line, the reboot) are listed at the end. After the reboot, `fwman apply --check` verifies: exit 0 when
    fwman's part is in place and doctor finds nothing blocking, else exit 4 with what is missing. With --json:
    fwman.plan/1 (as `fwman plan`); --check: {"host", "ready", "target", "actions", "blockers", "warnings",
    "doctor_error"} (schema fwman.apply-check/1). Exit status: 0, 2 (a --snapshot replay), 3 (not root), 4
    (--check: not ready), 6 (stopped after some steps were done). Docs: docs/journey-p2p.md.

    \b
    Examples:
      fwman apply --dry-run
      sudo fwman apply
      sudo fwman apply --check
    """
    from fwman.app.plan import apply_plan, check, make_plan

    if verify:
        finish(app, "apply-check", check(app.host), as_json)
        return
    permit = lambda: app.require_change("fwman apply")  # noqa: E731
    planned = make_plan(app.host, permit=permit)
    if dry_run:
        finish(app, "plan", planned, as_json)
        return
    finish(app, "plan", apply_plan(planned, permit=permit, tell=lambda t: app.echo(t, err=True)), as_json)
