"""``fwman metrics write``: the node_exporter textfile-collector file (logic in fwman.reports.metrics)."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, common_options, pass_app
from fwman.core import paths


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
@common_options
@pass_app
def write(app: AppContext, output: str, to_stdout: bool) -> None:
    """Write what fwman knows about this host as Prometheus gauges, atomically, for node_exporter.

    Per card: identity and VBIOS version (fwman_gpu_info), BAR1 and VRAM bytes, PCIe link width and speed. Per
    kernel: patched modules installed, safe to boot (modules in effect and verified), last build failed; the
    next boot's safety; whether the driver components match (`fwman audit`, offline). A source that cannot be
    read (no GPU, no kernels) is left out and marked fwman_metrics_source_up 0; the command still succeeds.
    The file is written through a temporary file and a rename, so the collector never reads half of it.

    \b
    Examples:
      fwman metrics write
      fwman metrics write -o /var/lib/node_exporter/textfile/fwman.prom
      fwman metrics write --stdout --snapshot fixtures/hosts/rig-4x3090
    """
    from fwman.reports.metrics import collect, render

    samples, problems = collect(app.host)
    text = render(samples)
    for source, why in problems.items():
        app.echo(f"note: {source}: not readable: {why}", err=True)
    if to_stdout:
        app.echo(text, nl=False)
        return
    app.host.write_bytes(output, text.encode(), mode=0o644)
    app.echo(f"wrote {len(samples)} series to {output}", err=True)


def _reload(app: AppContext, start: bool) -> None:
    host = app.host
    # only on the real root with a running systemd (a temp root or a container without systemd: files only)
    if host.local_path("/") == "/" and host.exists("/run/systemd/system") and host.which("systemctl"):
        host.run(["systemctl", "daemon-reload"], timeout=60)
        if start:
            host.run(["systemctl", "start", paths.METRICS_TIMER_NAME], timeout=60)


@metrics.command()
@click.option("--dry-run", is_flag=True, help="Print what would be written, change nothing.")
@common_options
@pass_app
def install(app: AppContext, dry_run: bool) -> None:
    """Install and enable fwman-metrics.timer, which runs `fwman metrics write` every minute.

    Writes /etc/systemd/system/fwman-metrics.service and fwman-metrics.timer and links the timer into
    timers.target.wants; on a running systemd it reloads and starts the timer. Re-running changes only what
    differs.

    \b
    Examples:
      fwman metrics install
      fwman metrics install --dry-run
    """
    from fwman.host.actions import apply_all, pending
    from fwman.reports.metrics import timer_actions

    if dry_run:
        todo = pending(app.host, timer_actions())
        for action in todo:
            app.echo(f"would {action.describe()}")
        if not todo:
            app.echo("metrics timer already installed and current")
        return
    app.require_change("fwman metrics install")
    done = apply_all(app.host, timer_actions(), lambda t: app.echo(t, err=True))
    if done:
        _reload(app, start=True)
    app.echo("installed" if done else "metrics timer already installed and current")


@metrics.command()
@common_options
@pass_app
def remove(app: AppContext) -> None:
    """Remove fwman-metrics.timer and its service (the .prom file stays until node_exporter's owner removes it).

    \b
    Examples:
      fwman metrics remove
    """
    from fwman.host.actions import apply_all
    from fwman.reports.metrics import timer_remove_actions

    app.require_change("fwman metrics remove")
    done = apply_all(app.host, timer_remove_actions(), lambda t: app.echo(t, err=True))
    if done:
        _reload(app, start=False)
    app.echo("removed" if done else "nothing to remove")
