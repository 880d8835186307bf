"""``fwman hooks ...``: the kernel hook and the boot-time catch-up service."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app

if TYPE_CHECKING:
    from fwman.driver.hooks.ownership import PackageOwnership


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
@json_option
@common_options
@pass_app
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
    from fwman.driver.hooks.ownership import package_ownership

    if not dry_run and package_ownership(app.host) is None:
        app.require_change("fwman hooks install")
    result = install_hooks(app.host, dry_run=dry_run, report=lambda t: app.echo(t, err=True))
    if result.package is not None and not as_json:
        app.echo(result.message)
        return
    app.show_change(
        "hooks-install", result, as_json, nothing="hook and service already installed and current", done="installed"
    )
    if not as_json:
        for path, why in result.skipped.items():
            app.echo(f"skipped {path}: {why}")


@hooks.command()
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@json_option
@common_options
@pass_app
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

    if not dry_run:
        app.require_change("fwman hooks remove")
    # the steps go to stderr as they happen, so that stdout is the answer alone (the JSON document)
    result = remove_hooks(app.host, dry_run=dry_run, report=lambda t: app.echo(t, err=True))
    app.show_change(
        "hooks-remove", result, as_json, nothing="nothing to remove: the hooks and the service are not installed",
        done="removed",
    )  # fmt: skip


@hooks.command()
@json_option
@common_options
@pass_app
def status(app: AppContext, as_json: bool) -> None:
    """Show whether the hook files and the unit are installed, current and enabled, and the hook order.

    \b
    Examples:
      fwman hooks status
      fwman hooks status --json
    """
    from fwman.driver.hooks.files import status as get_status
    from fwman.driver.hooks.ownership import package_ownership

    if (owner := package_ownership(app.host)) is not None:
        _package_status(app, owner, as_json)
        return
    st = get_status(app.host)
    if as_json:
        app.emit_json("hooks-status", {**st.to_json(), "package": None})
        return
    app.table(
        ["FILE", "STATE"],
        [[f.path, f.note if f.note else "ok"] for f in st.files],  # a current file's note: why it was skipped
    )
    app.echo(f"catch-up service enabled: {'yes' if st.enabled else 'no'}")
    for directory, names in st.order.items():
        app.echo(f"{directory}: {' '.join(names) or '(empty)'}")
    if not st.installed:
        app.echo("run `fwman hooks install` to install or update them")


def _package_status(app: AppContext, owner: PackageOwnership, as_json: bool) -> None:
    """Render ``hooks status`` when the Debian package owns the hooks (same schema, ``package`` filled in)."""
    from fwman.driver.hooks.files import status as get_status

    order = get_status(app.host).order
    if as_json:
        app.emit_json(
            "hooks-status",
            {
                "installed": owner.intact,
                "enabled": owner.unit_enabled,
                "files": [
                    {"path": f.path, "present": f.present, "current": f.present and not f.modified, "note": f.note}
                    for f in owner.files
                ],
                "order": order,
                "package": {"name": owner.package, "leftovers": owner.leftovers},
            },
        )
        return
    app.table(["FILE", "STATE"], [[f.path, f.note] for f in owner.files])
    app.echo(f"catch-up service enabled: {'yes' if owner.unit_enabled else 'no'}")
    for directory, names in order.items():
        app.echo(f"{directory}: {' '.join(names) or '(empty)'}")
    for path in owner.leftovers:
        app.echo(f"left over from `fwman hooks install`, shadows the package's file: {path} (delete it)")
    app.echo(f"owned by the Debian package {owner.package}: dpkg installs, upgrades and removes these files")
