"""``fwman modules export`` and ``fwman modules import``: build once per fleet (logic in fwman.app.modules.bundle)."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish
from fwman.cli.vocabulary import renamed_option


@click.command("export")
@click.option("--kernel", "kver", required=True, metavar="KVER", help="Kernel release whose modules to export.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Bundle file to write.")
@click.option(
    "--key",
    "sign_key",
    type=click.Path(dir_okay=False),
    help="Ed25519 private key (PEM) to sign the bundle with (openssl genpkey -algorithm ed25519).",
)
@renamed_option("--sign-key", "--key", "sign_key", type=click.Path(dir_okay=False))
@leaf_options
def export(app: AppContext, kver: str, output: str, sign_key: str | None, as_json: bool) -> None:
    """Write the verified patched modules of a kernel to a bundle file, for `fwman modules import` elsewhere.

    The bundle holds the five modules as installed, and bundle.json: kernel release, vermagic, fork, branch,
    commit, compiler, signature state and every module's SHA-256; --key adds an Ed25519 signature over
    bundle.json. Only a set that passes `fwman modules status`'s check is exported. The file is written
    atomically; nothing on the host changes.

    \b
    Examples:
      fwman modules export --kernel 6.1.0-50-amd64 -o p2p-6.1.0-50.fwbundle
      fwman modules export --kernel "$(uname -r)" -o b.fwbundle --key /root/fleet-bundle.pem

    Exit status: 0 written, 4 the installed modules do not verify, 5 none installed for KVER.
    """
    from fwman.app.modules.bundle import export_file

    finish(app, "modules-export", export_file(app.host, kver, output, sign_key), as_json)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Check the bundle against this host and say what would change.")
@leaf_options
def import_(app: AppContext, file: str, dry_run: bool, as_json: bool) -> None:
    """Install the modules of a bundle made by `fwman modules export`, after checking everything.

    Checks: every module's SHA-256 and vermagic against bundle.json, the kernel is installed here, the
    signature when /etc/fwman/bundle-keys.d/ holds a trusted key (then an unsigned bundle is refused), and
    Secure Boot (unsigned modules are refused when it is on and no signing key is configured; with a key
    configured they are signed on import, as a build signs). Then the same path as a build: staged install,
    depmod, every name must resolve to the new file, manifest ("imported from FILE"), boot safety. Importing
    the same bundle again changes nothing.

    \b
    Examples:
      fwman modules import p2p-6.1.0-50.fwbundle --dry-run
      fwman modules import p2p-6.1.0-50.fwbundle

    Exit status: 0 imported or already current, 3 Secure Boot refuses unsigned modules, 4 a check failed,
    5 the bundle's kernel is not installed.
    """
    from fwman.app.modules.bundle import import_file

    result = import_file(app.host, file, dry_run=dry_run, tell=lambda t: app.echo(t, err=True),
                         permit=lambda: app.require_change("fwman modules import"))  # fmt: skip
    finish(app, "modules-import", result, as_json)
