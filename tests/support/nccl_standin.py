"""The NCCL tier on a stand-in PyTorch (tests/unit/p2p/standin_torch): the host that runs its ranks, and a run of
the comparison (P2P allowed, then the NCCL_P2P_DISABLE=1 control) with the stand-in's fault switches."""

from __future__ import annotations

import sys
from pathlib import Path

from fwman.host.live import LiveHost
from fwman.p2p.nccl import NcclComparison, run_nccl_comparison

STANDIN = Path(__file__).resolve().parents[1] / "unit" / "p2p" / "standin_torch"
SIZES = (4, 64, 1024)


def standin_host(tmp_path: Path, **faults: str) -> LiveHost:
    """Return a live host whose python finds the stand-in torch, its rank group under ``tmp_path``, and
    ``faults`` (STANDIN_HANG, STANDIN_WRONG, STANDIN_DELAY_P2P, STANDIN_DELAY_SHM) in its environment."""
    return LiveHost(env={"PYTHONPATH": str(STANDIN), "STANDIN_DIR": str(tmp_path / "group"), **faults})


def compare(tmp_path: Path, timeout: float = 60, **faults: str) -> NcclComparison:
    """Return the comparison of two stand-in runs (:data:`SIZES`) with ``faults``, ``timeout`` seconds each."""
    return run_nccl_comparison(
        standin_host(tmp_path, **faults), runner="torch", python=sys.executable, sizes=SIZES, timeout=timeout
    )
