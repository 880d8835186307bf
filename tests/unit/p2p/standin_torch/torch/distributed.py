"""torch.distributed of the stand-in: an all-reduce that sums across the worker processes through files."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from torch import Tensor

_state: dict[str, object] = {}


def is_nccl_available() -> bool:
    return True


def _p2p() -> bool:
    return os.environ.get("NCCL_P2P_DISABLE") != "1"


def init_process_group(backend: str, init_method: str, rank: int, world_size: int) -> None:
    group = Path(os.environ["STANDIN_DIR"]) / init_method.rsplit(":", 1)[-1]
    group.mkdir(parents=True, exist_ok=True)
    _state.update(rank=rank, world=world_size, dir=group, count=0)
    via = "P2P/CUMEM" if _p2p() else "SHM/direct/direct"
    # NCCL_DEBUG=INFO's connection lines, in the form NVIDIA/nccl#1189 quotes them
    for peer in range(world_size):
        if peer != rank:
            print(f"standin:{os.getpid()}:{os.getpid()} [{rank}] NCCL INFO Channel 00/0 : {rank}[{rank}] -> "
                  f"{peer}[{peer}] via {via}", flush=True)  # fmt: skip


def all_reduce(t: Tensor) -> None:
    rank, world, group = int(str(_state["rank"])), int(str(_state["world"])), Path(str(_state["dir"]))
    count = int(str(_state["count"])) + 1
    _state["count"] = count
    if _p2p() and os.environ.get("STANDIN_HANG") == f"{rank}:{len(t.values) * 4}":
        threading.Event().wait()  # never returns, as an NCCL collective over a broken P2P path
    time.sleep(float(os.environ.get("STANDIN_DELAY_P2P" if _p2p() else "STANDIN_DELAY_SHM", "0")))
    mine = group / f"{count}.{rank}"
    (group / f"{count}.{rank}.tmp").write_text(json.dumps(t.values))
    (group / f"{count}.{rank}.tmp").rename(mine)
    parts = [group / f"{count}.{r}" for r in range(world)]
    while not all(p.exists() for p in parts):
        time.sleep(0.0005)
    total = [sum(vs) for vs in zip(*(json.loads(p.read_text()) for p in parts), strict=True)]
    if _p2p() and rank == 0 and os.environ.get("STANDIN_WRONG") == "1" and total:
        total[0] += 1
    t.values = total


def destroy_process_group() -> None:
    pass
