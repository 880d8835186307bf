"""``fwman metrics write|install|remove`` as use cases: the node_exporter textfile and its systemd timer. The samples
and their text format are :mod:`fwman.reports.metrics`; this module writes them and installs or removes the timer
through actions. Typed arguments in (a Host), results out; no click."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwman.app.change import ChangeResult, change, free
from fwman.app.text import Out, Result, say
from fwman.core import paths
from fwman.core.errors import HostChangeError, UsageError
from fwman.host.actions import Tell, apply_all, pending
from fwman.host.base import Host
from fwman.platform.systemd import reload_running_systemd
from fwman.reports.metrics import collect, render, timer_actions, timer_remove_actions


@dataclass
class MetricsText:
    """The rendered metrics, how many series they hold, and the sources that could not be read."""

    text: str
    series: int
    problems: dict[str, str]  # source -> why it was left out (marked fwman_metrics_source_up 0)


@dataclass
class MetricsWrite(Result):
    """``metrics write``: the metrics, and the file they went to (or would go to; None: printed instead)."""

    metrics: MetricsText
    output: str | None
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        """Return True when the file was written (never in a dry run, nor with ``--stdout``)."""
        return self.output is not None and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.metrics-write/1`` (without the schema key); ``text`` only when printed."""
        doc: dict[str, Any] = {"dry_run": self.dry_run, "changed": self.changed, "output": self.output,
                               "series": self.metrics.series, "problems": self.metrics.problems}  # fmt: skip
        return doc if self.output is not None else {**doc, "text": self.metrics.text}

    def text(self, verbose: int = 0) -> Out:
        """Return the sources left out (stderr), then the metrics (``--stdout``) or where they went."""
        out: Out = [
            say(f"note: {source}: not readable: {why}", err=True) for source, why in self.metrics.problems.items()
        ]
        if self.output is None:
            return out  # the metrics text itself is printed as it is, without a line end added
        if self.dry_run:
            return [*out, say(f"would write {self.metrics.series} series to {self.output}")]
        return [*out, say(f"wrote {self.metrics.series} series to {self.output}", err=True)]


def metrics_write(
    host: Host, output: str | None, *, named_by: str | None = None, dry_run: bool = False,
    permit: Callable[[], None] = free,
) -> MetricsWrite:  # fmt: skip
    """Collect the metrics of ``host`` and write them to the host path ``output`` (None: return them only, for
    ``--stdout``); with ``dry_run`` collect and write nothing. Raises what ``permit`` (called first, when a file
    is to be written) and :func:`write_metrics` raise."""
    if output is None or dry_run:
        return MetricsWrite(render_metrics(host), output, dry_run)
    permit()
    return MetricsWrite(write_metrics(host, output, named_by=named_by), output)


def render_metrics(host: Host) -> MetricsText:
    """Return the metrics of ``host`` in the Prometheus text format. Never raises for an unreadable source."""
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


def install_metrics_timer(
    host: Host, *, dry_run: bool = False, tell: Tell, permit: Callable[[], None] = free
) -> ChangeResult:
    """Install and enable ``fwman-metrics.timer`` (``metrics install``; a running systemd is reloaded and the timer
    started when something changed); with ``dry_run`` return what would be written, change nothing. Raises what
    ``permit`` raises, MissingError when the unit templates are not installed with fwman, and what the host raises on a
    failed write or systemctl."""

    def install() -> list[str]:
        done = apply_all(host, timer_actions(), tell)
        if done:
            reload_running_systemd(host, start=paths.METRICS_TIMER_NAME)
        return done

    return change(
        dry_run, lambda: [a.describe() for a in pending(host, timer_actions())], install, permit=permit,
        nothing="metrics timer already installed and current", done="installed",
    )  # fmt: skip


def remove_metrics_timer(
    host: Host, *, dry_run: bool = False, tell: Tell, permit: Callable[[], None] = free
) -> ChangeResult:
    """Remove the timer and its service (``metrics remove``; the ``.prom`` file stays: node_exporter's owner decides
    about it); with ``dry_run`` return what would go, change nothing. Raises what ``permit`` and the host raise."""

    def remove() -> list[str]:
        done = apply_all(host, timer_remove_actions(), tell)
        if done:
            reload_running_systemd(host)
        return done

    return change(
        dry_run, lambda: [a.describe() for a in pending(host, timer_remove_actions())], remove, permit=permit,
        nothing="nothing to remove: the metrics timer is not installed", done="removed",
    )  # fmt: skip
