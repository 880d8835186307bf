"""The NCCL tier's deadlines on the stand-in PyTorch (tests/unit/p2p/standin_torch): real rank processes that
never return, killed at the runner's own deadline. Integration tests of real processes and wall
time (seconds of waiting each), so they run in the system lane; the rest of the tier is
tests/unit/p2p/test_p2p_nccl_standin.py's."""

from __future__ import annotations

import json
from pathlib import Path

from fwman.core import clock as clocks
from tests.support.env import FwmanEnv
from tests.support.nccl_standin import STANDIN, compare

#: seconds the stand-in's all-reduce sleeps on the delayed path (STANDIN_DELAY_SHM)
DELAY = 0.002


def test_a_rank_that_never_returns_is_block_naming_it_within_its_timeout_and_the_control_still_runs(
    tmp_path: Path,
) -> None:
    start = clocks.monotonic()
    c = compare(tmp_path, timeout=4, STANDIN_HANG="1:64")
    elapsed = clocks.monotonic() - start
    assert c.p2p.hung is not None
    assert "rank 1 in all_reduce 64 B (checked)" in c.p2p.hung and "within 4.0 s (killed)" in c.p2p.hung
    assert c.p2p.verdict().startswith("BLOCK: NCCL rank 0 in all_reduce 64 B (checked), rank 1 in")
    # the hang is only with P2P: the control measured every size
    assert c.control is not None and c.control.ok and len(c.control.sizes) == 3
    assert not c.ok and c.advice().startswith("no P2P advice: a run hung (BLOCK)")
    assert elapsed < 4 + 20  # one deadline, plus the two short runs


def test_the_cli_shows_both_runs_per_size_and_exits_4_on_a_hung_rank(tmp_path: Path) -> None:
    prefix = f"env PYTHONPATH={STANDIN} STANDIN_DIR={tmp_path / 'group'} STANDIN_WORLD=2"
    env = FwmanEnv()
    ok = env("p2p", "--nccl", "--runner", "torch", "--prefix", prefix + f" STANDIN_DELAY_SHM={DELAY}",
             "--nccl-sizes", "4,1K", "--no-record")  # fmt: skip
    assert ok.code == 0, ok.stderr
    assert "control (NCCL_P2P_DISABLE=1): all-reduce exact on 2 ranks; NCCL used SHM" in ok.stdout
    assert "bytes  P2P us  control us  busbw GB/s  values" in ok.stdout
    rows = [line.split() for line in ok.stdout.splitlines() if line.strip().split(" ")[0] in ("4", "1024")]
    assert [r[0] for r in rows] == ["4", "1024"] and all(r[-1] == "exact" for r in rows)
    # the control's column carries the measured delay (at least DELAY per all-reduce, in microseconds)
    assert all(float(r[2]) >= DELAY * 1e6 for r in rows)
    assert [line for line in ok.stdout.splitlines() if line.startswith("advice: ")]
    hung = env("p2p", "--nccl", "--runner", "torch", "--prefix", prefix + " STANDIN_HANG=0:4",
               "--nccl-sizes", "4,1K", "--timeout", "3", "--no-record", "--json")  # fmt: skip
    assert hung.code == 4
    assert "try the run again with --nccl-env NCCL_P2P_DISABLE=1" in hung.stderr
    doc = json.loads(hung.stdout)
    assert doc["hung"].startswith("NCCL rank 0 in all_reduce 4 B (checked)") and doc["control"]["ok"] is True
