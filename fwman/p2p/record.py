"""Builders of the P2P history record from a test's report (the record itself: :mod:`fwman.p2p.history`)."""

from __future__ import annotations

from fwman.p2p.copytest import CopyReport
from fwman.p2p.history import KIND_COPY, KIND_NCCL, Fingerprint, P2PRecord
from fwman.p2p.nccl import NcclComparison, NcclReport
from fwman.p2p.soak import SoakReport


def record_from_copy(
    report: CopyReport, fingerprint: Fingerprint, time: str, soak: SoakReport | None = None
) -> P2PRecord:
    """Return the history record of a :class:`~fwman.p2p.copytest.CopyReport` taken on ``fingerprint``; with
    the ``soak`` it ended, the soak's JSON (a soak with findings fails the record).

    The slowest pair is the slowest copy between two different GPUs; with one GPU, the on-device copy.
    """
    between = [p for p in report.pairs if p.src != p.dst and p.gbps is not None]
    measured = between or [p for p in report.pairs if p.gbps is not None]
    slowest = min(measured, key=lambda p: p.gbps or 0.0) if measured else None
    return P2PRecord(
        time=time,
        kind=KIND_COPY,
        ok=bool(report.ok) and (soak is None or soak.ok),
        verdict=str(report.verdict()) if soak is None or not report.ok else soak.verdict(),
        fingerprint=fingerprint,
        gpus=len(report.gpus),
        slowest_gbps=round(slowest.gbps, 3) if slowest is not None and slowest.gbps is not None else None,
        slowest_pair=slowest.label if slowest is not None else None,
        every_byte_verified=bool(report.ok),
        soak=None if soak is None else soak.to_json(),
    )


def record_from_nccl(
    report: NcclReport, fingerprint: Fingerprint, time: str, comparison: NcclComparison | None = None
) -> P2PRecord:
    """Return the history record of a :class:`~fwman.p2p.nccl.NcclReport` taken on ``fingerprint``; with the
    ``comparison`` it belongs to, whether P2P was faster than the control and the advice (and the control's
    failure fails the record)."""
    return P2PRecord(
        time=time,
        kind=KIND_NCCL,
        ok=bool(report.ok if comparison is None else comparison.ok),
        verdict=str(report.verdict()),
        fingerprint=fingerprint,
        gpus=int(report.world or 0),
        slowest_gbps=round(report.busbw_gbps, 3) if report.busbw_gbps is not None else None,
        transport=report.transport,
        transports=dict(report.log.transports()),
        nccl_version=report.nccl_version,
        environment=dict(report.environment),
        runner=report.runner,
        prefix=tuple(report.prefix),
        p2p_faster=None if comparison is None else comparison.p2p_faster(),
        advice=None if comparison is None else comparison.advice(),
    )
