"""``fwman capture DIR``: record this host, read-only, into a snapshot directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, Environment, leaf_options
from fwman.cli.render import finish
from fwman.core.errors import FwmanError

if TYPE_CHECKING:
    from fwman.host.base import Host


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--no-redact", is_flag=True, help="Keep GPU UUIDs and serial numbers (redacted by default).")
@click.option(
    "--check",
    is_flag=True,
    help="Do not capture: check that DIRECTORY is a well-formed snapshot that stays inside itself.",
)
@leaf_options
def capture(app: AppContext, directory: str, no_redact: bool, check: bool, as_json: bool) -> None:
    """Record this host into DIRECTORY (read-only), for replay with --snapshot.

    Records, for every NVIDIA PCI function and the bridges above it, the sysfs attributes (config space
    included, boot_vga among them), /proc/driver/nvidia, /proc/modules, /proc/cmdline, /proc/devices,
    /boot/config-* and the modprobe.d *.conf files (bounded reads), IOMMU state, os-release, kernel release,
    driver library listings, and the output of nvidia-smi (-q -x, topo -m, topo -p2p r/w, --version),
    dkms status and lspci -vvv -nn where installed (missing tools are recorded as missing). Nothing on the
    host is changed. GPU UUIDs and serial numbers are replaced by placeholders unless --no-redact.

    \b
    Examples:
      sudo fwman capture /tmp/myrig          # as root, to see the full config space
      fwman --snapshot /tmp/myrig scan       # replay it anywhere
    The format is described in docs/snapshot-format.md.

    `fwman capture --check DIR` reads nothing but DIR: it lists every problem of a snapshot someone sent you
    (wrong shape, a symbolic link on disk, a path with '..', a missing command output) and exits 2 when there
    is one, 0 when it is well formed.
    """
    from fwman.app.capture import capture_into, check_directory

    if check:
        finish(app, "capture.check", check_directory(directory), as_json)
        return
    verbose = app.env.stderr_isatty or app.verbose > 0
    progress = (lambda s: app.echo(f"  reading {s}", err=True)) if verbose else (lambda s: None)
    result = capture_into(app.host, directory, redact=not no_redact, run_fwman=run_quietly, progress=progress,
                          replay=app.is_replay, as_root=app.env.euid == 0)  # fmt: skip
    finish(app, "capture", result, as_json)


def run_quietly(host: Host, argv: list[str]) -> str | None:
    """Run fwman ``argv`` against ``host`` with output discarded; return None, or what broke it unexpectedly.

    Its outcome does not matter, its reads do: a command that fails the ordinary way (exit != 0, a missing tool,
    a write the read-only recording refuses) has still recorded what it read.
    """
    import io

    from fwman.cli.app import cli

    app = AppContext(env=Environment(stdout=io.StringIO(), stderr=io.StringIO(), variables={}), _host=host)
    try:
        cli.main(args=argv, prog_name="fwman", obj=app, standalone_mode=False)
    except (FwmanError, click.ClickException, click.exceptions.Exit, click.Abort):
        return None
    except Exception as e:  # a bug in that command must not cost the user the whole capture
        return f"unexpected {type(e).__name__}: {e}"
    return None
