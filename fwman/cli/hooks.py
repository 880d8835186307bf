"""``fwman hooks ...``: the kernel hook and the boot-time catch-up service."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


@click.group()
def hooks() -> None:
    """Install, remove or inspect the kernel hook and the boot-time catch-up service.

    \b
    Examples:
      fwman hooks install
      fwman hooks status
      fwman hooks remove

    Docs: docs/hooks.md.
    """


@hooks.command()
@click.option("--dry-run", is_flag=True, help="Print what would be written, change nothing.")
@leaf_options
def install(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Install the kernel hooks, the final boot checks and fwman-catchup.service (enabled).

    The hook (/etc/kernel/{postinst,header_postinst,postrm}.d/fwman, kernel-install's 50-fwman.install) runs
    after `dkms` and before `initramfs-tools` and `zz-update-grub`; it never fails a kernel install (a missing
    header or a failed build marks the kernel pending) unless `strict = true` in [modules] of
    /etc/fwman/config.toml. The final boot check (postinst.d and postrm.d's zzz-fwman, kernel-install's
    99-zz-fwman.install, apt's /etc/apt/apt.conf.d/99fwman-boot-check) runs after the boot loader's own hook
    and pins a kernel with working modules when the new menu would boot one without. Re-running changes only
    what differs. apt's file is installed only where apt is (/etc/apt or apt-get); elsewhere it is skipped and
    the output says so. With --json: {"dry_run", "changed", "actions", "package", "skipped"} (schema
    fwman.hooks-install/1; "package" names the Debian package when it owns the hooks, and nothing is written;
    "skipped": [{"path", "reason"}] the files left out for this host).

    \b
    Examples:
      fwman hooks install
      fwman hooks install --dry-run
      fwman hooks install --json
    """
    from fwman.app.hooks import install_hooks

    result = install_hooks(app.host, dry_run=dry_run, permit=lambda: app.require_change("fwman hooks install"),
                           tell=lambda t: app.echo(t, err=True))  # fmt: skip
    finish(app, "hooks-install", result, as_json)


@hooks.command()
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@leaf_options
def remove(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Remove the kernel hook and the catch-up service (installed modules and manifests stay).

    With --json: {"dry_run", "changed", "actions"} (schema fwman.hooks-remove/1); "changed" is false when
    nothing was installed. Exit status: 0 (also with nothing to remove), 3 when the Debian package owns the
    hooks (`apt remove fwman` removes them).

    \b
    Examples:
      fwman hooks remove --dry-run
      fwman hooks remove
      fwman hooks remove --json
    """
    from fwman.app.hooks import remove_hooks

    # the steps go to stderr as they happen, so that stdout is the answer alone (the JSON document)
    result = remove_hooks(app.host, dry_run=dry_run, permit=lambda: app.require_change("fwman hooks remove"),
                          tell=lambda t: app.echo(t, err=True))  # fmt: skip
    finish(app, "hooks-remove", result, as_json)


@hooks.command()
@leaf_options
def status(app: AppContext, as_json: bool) -> None:
    """Show whether the hook files and the unit are installed, current and enabled, and the hook order.

    \b
    Examples:
      fwman hooks status
      fwman hooks status --json
    """
    from fwman.app.hooks import hooks_status

    finish(app, "hooks-status", hooks_status(app.host), as_json)
