"""A stand-in for the few parts of PyTorch that fwman's torch NCCL runner uses, for the tests.

Put on PYTHONPATH, it lets the real runner script (launcher, one worker process per rank, deadline) run without
GPUs. Tensors are Python lists; :mod:`torch.distributed`'s all-reduce sums them across the worker processes
through files (``STANDIN_DIR``). Faults are set by variables: ``STANDIN_WORLD`` ranks (default 2);
``STANDIN_HANG=RANK:BYTES`` that rank's all-reduce of that size never returns (with P2P only);
``STANDIN_WRONG=1`` rank 0's sum is off by one (with P2P only); ``STANDIN_DELAY_P2P`` / ``STANDIN_DELAY_SHM``
seconds each all-reduce sleeps with P2P allowed / with ``NCCL_P2P_DISABLE=1``: at least that long, so the
runner's mean is never below it, and longer on a loaded machine (the exchange through files waits for the other
rank's process to be scheduled, milliseconds under load), so a delay orders two runs only by a margin load can
invert.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__version__ = "0.0+standin"
int64 = "int64"
float32 = "float32"


class Tensor:
    """A list of numbers with the operators the runner uses."""

    def __init__(self, values: Iterable[Any]) -> None:
        self.values = list(values)

    def __mod__(self, k: int) -> Tensor:
        return Tensor(v % k for v in self.values)

    def __mul__(self, k: float) -> Tensor:
        return Tensor(v * k for v in self.values)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        assert isinstance(other, Tensor)
        return Tensor(int(a != b) for a, b in zip(self.values, other.values, strict=True))

    def to(self, dtype: str) -> Tensor:
        return Tensor(float(v) for v in self.values)

    def sum(self) -> Tensor:
        return Tensor([sum(self.values)])

    def item(self) -> Any:
        return self.values[0]

    def clone(self) -> Tensor:
        return Tensor(self.values)


def arange(n: int, device: str | None = None, dtype: str | None = None) -> Tensor:
    return Tensor(range(n))


def tensor(values: Iterable[Any], device: str | None = None, dtype: str | None = None) -> Tensor:
    return Tensor(values)


from torch import cuda, distributed  # noqa: E402  (the submodules use Tensor)

__all__ = ["Tensor", "arange", "cuda", "distributed", "tensor"]
