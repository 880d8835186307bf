"""``fwman p2p test`` as a use case: run a tier, then record its result against the configuration it ran on.

The CLI parses options and prints; this module decides what a record holds (:mod:`fwman.p2p.record`) and reads
the fingerprint with the doctor's own reader, so ``fwman doctor`` compares like with like.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.host.base import Host
from fwman.p2p.history import Fingerprint, P2PRecord, append_record

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
    """Return the report of a soak: ``run_round`` repeated for ``duration`` seconds between two health snapshots
    of the GPUs ``bus_ids`` (:func:`fwman.p2p.soak.run_soak`, which says how). Never raises for what it could not
    read."""
    from fwman.p2p.soak import run_soak

    return run_soak(host, run_round, duration, progress, bus_ids)
