"""``fwman p2p test`` as a use case: run a tier, then record its result against the configuration it ran on.

The CLI parses options and prints; this module decides what a record holds (:mod:`fwman.p2p.record`) and reads
the fingerprint with the doctor's own reader, so ``fwman doctor`` compares like with like.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.gpu.p2p_record import Fingerprint, P2PRecord, append_record
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.p2p.soak import SoakReport


def record_result(host: Host, build: Callable[[Fingerprint, str], P2PRecord], now: str) -> P2PRecord:
    """Read the fingerprint of ``host``, build the record with ``build(fingerprint, now)`` and append it to the
    history at :data:`~fwman.core.paths.P2P_HISTORY_FILE`. Returns the record.

    Raises the FwmanError reading the fingerprint met (NotRecordedError, MissingError), OSError when the history
    cannot be written (not root).
    """
    from fwman.reports.doctor.facts import gather

    record = build(gather(host).fingerprint.get(), now)
    append_record(host, record)
    return record


HISTORY = paths.P2P_HISTORY_FILE


def server_environment(host: Host, prefix: list[str]) -> tuple[dict[str, str], str | None]:
    """Return the ``NCCL_*`` variables the model server gets in the container ``prefix`` enters, and where they
    are set; ``({}, None)`` when the prefix is not ``pct exec <id>`` or that container sets none.

    ``pct exec`` does not pass the container's ``lxc.environment`` to the command it runs, so the NCCL tier passes
    them itself: the test then runs under the environment the server will have. Never raises.
    """
    from fwman.core.errors import FwmanError
    from fwman.platform.proxmox import lxc_config_path
    from fwman.reports.doctor.facts import gather

    if len(prefix) < 3 or prefix[:2] != ["pct", "exec"] or not prefix[2].isdigit():
        return {}, None
    where = lxc_config_path(prefix[2])
    try:
        sources = gather(host).workloads.get().sources
    except FwmanError:
        return {}, None
    for source in sources:
        if source.kind == "lxc" and source.where == where:
            env = {k: v for k, v in source.env.items() if k.startswith("NCCL_")}
            return env, (where if env else None)
    return {}, None


def soak(
    host: Host,
    run_round: Callable[[], tuple[bool, str, list[str]]],
    duration: float,
    progress: Callable[[str], None],
    bus_ids: list[str],
) -> SoakReport:
    """Repeat ``run_round`` (one whole verification; returns ``(ok, verdict, the GPUs' bus ids)``) for
    ``duration`` seconds, between two :class:`~fwman.p2p.soak.Health` snapshots of the GPUs ``bus_ids`` (from
    sysfs; when empty, the GPUs the first round listed, read after it) and the port above each.

    At least one round runs; a round that fails ends the soak (a pair that hung once hangs again, and each
    retry costs its whole deadline). ``progress`` gets one line per round. Returns the report; never raises
    for what it could not read (the report's ``unread`` says it).
    """
    from fwman.core.clock import monotonic
    from fwman.p2p.soak import SoakReport, compare, read_health, unread_of, watched_devices

    report = SoakReport(duration=duration)
    report.devices = watched_devices(host, bus_ids)
    before = read_health(host, [d for d, _ in report.devices])
    start = monotonic()
    rounds = 0
    while True:
        ok, verdict, listed = run_round()
        rounds += 1
        if not report.devices and listed:
            report.devices = watched_devices(host, listed)
            before.aer = read_health(host, [d for d, _ in report.devices]).aer
        elapsed = monotonic() - start
        progress(f"soak round {rounds}: {verdict} ({elapsed:.0f} of {duration:.0f} s)")
        if not ok:
            report.failed_rounds.append(f"{rounds}: {verdict}")
            break
        if elapsed >= duration:
            break
    report.rounds = rounds
    report.seconds = monotonic() - start
    after = read_health(host, [d for d, _ in report.devices], start=before)
    report.findings = compare(before, after, report.devices)
    report.unread = unread_of(before, after)
    return report
