"""``fwman metrics write``: the node_exporter textfile-collector file (logic in fwman.reports.metrics)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish
from fwman.core import names, paths


@click.group()
def metrics() -> None:
    """Prometheus metrics for the dashboards you already run (node_exporter's textfile collector).

    \b
    Examples:
      fwman metrics write                       /var/lib/prometheus/node-exporter/fwman.prom
      fwman metrics write --stdout              print them instead
      fwman metrics install                     a systemd timer that refreshes it every minute

    Docs: docs/metrics.md.
    """


@metrics.command()
@click.option(
    "-o",
    "--output",
    default=paths.METRICS_FILE,
    show_default=True,
    metavar="FILE",
    help="Host path of the .prom file (under --root when given).",
)
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the metrics instead of writing the file.")
@click.option("--dry-run", is_flag=True, help="Collect the metrics and say where they would go; write nothing.")
@leaf_options
def write(app: AppContext, output: str, to_stdout: bool, dry_run: bool, as_json: bool) -> None:
    """Write what fwman knows about this host as Prometheus gauges, atomically, for node_exporter.

    Per card: identity and VBIOS version (fwman_gpu_info), BAR1 and VRAM bytes, PCIe link width and speed. Per
    kernel: patched modules installed, safe to boot (modules in effect and verified), last build failed; the
    next boot's safety; whether the driver components match (`fwman audit`, offline). A source that cannot be
    read (no GPU, no kernels) is left out and marked fwman_metrics_source_up 0; the command still succeeds.
    The file is written through a temporary file and a rename, so the collector never reads half of it.
    With --json: {"dry_run", "changed", "output", "series", "problems"} (schema fwman.metrics-write/1; "output"
    null and the metrics in "text" with --stdout).

    \b
    Examples:
      fwman metrics write
      fwman metrics write -o /var/lib/node_exporter/textfile/fwman.prom
      fwman metrics write --stdout --snapshot fixtures/hosts/rig-4x3090
      fwman metrics write --dry-run --json
    """
    from fwman.app.metrics import metrics_write

    target, typed = None, False
    if not to_stdout:
        # a path the user typed that cannot be written is their usage error; the default path's is the host's
        typed = click.get_current_context().get_parameter_source("output") is not ParameterSource.DEFAULT
        # checked before anything is read: a typo must not cost a full collection to be told
        target = names.host_path(output, "-o")
    # the filesystem decides who may write where: no root needed
    result = metrics_write(app.host, target, named_by="-o" if typed else None, dry_run=dry_run,
                           permit=lambda: app.require_change("fwman metrics write", needs_root=False))  # fmt: skip
    finish(app, "metrics-write", result, as_json)
    if to_stdout and not as_json:
        app.echo(result.metrics.text, nl=False)


@metrics.command()
@click.option("--dry-run", is_flag=True, help="Print what would be written, change nothing.")
@leaf_options
def install(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Install and enable fwman-metrics.timer, which runs `fwman metrics write` every minute.

    Writes /etc/systemd/system/fwman-metrics.service and fwman-metrics.timer and links the timer into
    timers.target.wants; on a running systemd it reloads and starts the timer. Re-running changes only what
    differs. With --json: {"dry_run", "changed", "actions"} (schema fwman.metrics-install/1).

    \b
    Examples:
      fwman metrics install
      fwman metrics install --dry-run
      fwman metrics install --json
    """
    from fwman.app.metrics import install_metrics_timer

    result = install_metrics_timer(app.host, dry_run=dry_run, tell=lambda t: app.echo(t, err=True),
                                   permit=lambda: app.require_change("fwman metrics install"))  # fmt: skip
    finish(app, "metrics-install", result, as_json)


@metrics.command()
@click.option("--dry-run", is_flag=True, help="Print what would be removed, change nothing.")
@leaf_options
def remove(app: AppContext, dry_run: bool, as_json: bool) -> None:
    """Remove fwman-metrics.timer and its service (the .prom file stays until node_exporter's owner removes it).

    With --json: {"dry_run", "changed", "actions"} (schema fwman.metrics-remove/1); "changed" is false when
    nothing was installed (exit 0).

    \b
    Examples:
      fwman metrics remove --dry-run
      fwman metrics remove
      fwman metrics remove --json
    """
    from fwman.app.metrics import remove_metrics_timer

    # the steps go to stderr as they happen, so that stdout is the answer alone (the JSON document)
    result = remove_metrics_timer(app.host, dry_run=dry_run, tell=lambda t: app.echo(t, err=True),
                                  permit=lambda: app.require_change("fwman metrics remove"))  # fmt: skip
    finish(app, "metrics-remove", result, as_json)
