"""``fwman metrics write|install|remove`` as use cases: the node_exporter textfile and its systemd timer.

The samples and their text format are :mod:`fwman.reports.metrics`; this module writes them and installs or
removes the timer through actions. Typed arguments in (a Host), results out; no click.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.app.change import Change
from fwman.core import paths
from fwman.core.errors import HostChangeError, UsageError
from fwman.host.actions import Report, apply_all, pending
from fwman.host.base import Host
from fwman.platform.systemd import reload_running_systemd


@dataclass
class MetricsText:
    """The rendered metrics, how many series they hold, and the sources that could not be read."""

    text: str
    series: int
    problems: dict[str, str]  # source -> why it was left out (marked fwman_metrics_source_up 0)


def render_metrics(host: Host) -> MetricsText:
    """Return the metrics of ``host`` in the Prometheus text format. Never raises for an unreadable source."""
    from fwman.reports.metrics import collect, render

    samples, problems = collect(host)
    return MetricsText(render(samples), len(samples), problems)


def write_metrics(host: Host, output: str, *, named_by: str | None = None) -> MetricsText:
    """Write the metrics of ``host`` to the host path ``output`` (atomically, mode 0644) and return them.

    ``named_by`` is the option the user typed ``output`` with (``-o``), None for the default path. Raises
    UsageError (exit 2) naming that option when the path the user typed cannot be written (a directory, below a
    file, not permitted): the command line asked for something that cannot be. The default path's failure is
    the host's and stays the HostChangeError ``host.write_bytes`` raises.
    """
    metrics = render_metrics(host)
    try:
        host.write_bytes(output, metrics.text.encode(), mode=0o644)
    except HostChangeError as e:
        if named_by is None:
            raise
        raise UsageError(
            f"{named_by} {output}: cannot write: {e.strerror}",
            hint="name a file whose directory exists or can be made (not a directory itself, not below a file); "
            "node_exporter reads the directory its --collector.textfile.directory names",
        ) from e
    return metrics


def timer_plan(host: Host) -> list[str]:
    """Return what ``fwman metrics install`` would do on ``host`` ([] when the timer is installed and current)."""
    from fwman.reports.metrics import timer_actions

    return [action.describe() for action in pending(host, timer_actions())]


def install_timer(host: Host, report: Report) -> list[str]:
    """Install and enable ``fwman-metrics.timer``; return what changed ([] when all was in place).

    A running systemd is reloaded and the timer started when something changed. Raises MissingError when the
    unit templates are not installed with fwman, and what the host raises on a failed write or systemctl.
    """
    from fwman.reports.metrics import timer_actions

    done = apply_all(host, timer_actions(), report)
    if done:
        reload_running_systemd(host, start=paths.METRICS_TIMER_NAME)
    return done


def remove_timer(host: Host, report: Report) -> list[str]:
    """Remove the timer and its service; return what was removed ([] when nothing was there).

    The ``.prom`` file stays: node_exporter's owner decides about it.
    """
    from fwman.reports.metrics import timer_remove_actions

    done = apply_all(host, timer_remove_actions(), report)
    if done:
        reload_running_systemd(host)
    return done


def remove_metrics_timer(host: Host, *, dry_run: bool = False, report: Report) -> Change:
    """Remove the timer and its service (``metrics remove``); with ``dry_run`` return what would go, change
    nothing. Raises what :func:`remove_timer` raises."""
    from fwman.reports.metrics import timer_remove_actions

    if dry_run:
        return Change(True, [a.describe() for a in pending(host, timer_remove_actions())])
    return Change(False, remove_timer(host, report))


def install_metrics_timer(host: Host, *, dry_run: bool = False, report: Report) -> Change:
    """Install and enable the timer (``metrics install``); with ``dry_run`` return what would be written, change
    nothing. Raises what :func:`install_timer` raises."""
    if dry_run:
        return Change(True, timer_plan(host))
    return Change(False, install_timer(host, report))
