"""An in-memory GPU device layer for `p2p` without a GPU: device memory is host bytearrays, and the layer can
corrupt bytes, drop copies and fail calls (the stand-in for GPU hardware; FwmanEnv(cuda_driver=...) hands it to
the CLI)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.p2p.device import CudaError, Gpu


@dataclass
class MemoryGpus:
    """A DeviceLayer whose device memory is host bytearrays.

    ``peer``: pairs (device, peer) that cuDeviceCanAccessPeer allows. ``corrupt``: (src, dst) -> byte offsets the
    copy flips. ``fail``: (operation, device) -> CUDA error name raised there. ``drop``: pairs whose copy does
    nothing at all (the silent failure the target pre-fill must catch).
    """

    n: int
    peer: set[tuple[int, int]] = field(default_factory=set)
    corrupt: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    fail: dict[tuple[str, int], str] = field(default_factory=dict)
    drop: set[tuple[int, int]] = field(default_factory=set)
    driver_version: str | None = "13.0"
    memory: dict[tuple[int, int], bytearray] = field(default_factory=dict)
    enabled: set[tuple[int, int]] = field(default_factory=set)
    calls: list[tuple[str, int]] = field(default_factory=list)
    closed: bool = False
    _next: int = 0x1000

    def _op(self, name: str, device: int) -> None:
        self.calls.append((name, device))
        if (name, device) in self.fail:
            raise CudaError(f"cu{name}", 999, self.fail[(name, device)])

    def gpus(self) -> list[Gpu]:
        return [Gpu(i, "NVIDIA GeForce RTX 3090", f"0000:{0x01 + 0x20 * i:02x}:00.0") for i in range(self.n)]

    def can_access_peer(self, device: int, peer: int) -> bool:
        self._op("DeviceCanAccessPeer", device)
        return (device, peer) in self.peer

    def enable_peer_access(self, device: int, peer: int) -> None:
        self._op("CtxEnablePeerAccess", device)
        self.enabled.add((device, peer))

    def alloc(self, device: int, size: int) -> int:
        self._op("MemAlloc", device)
        self._next += 0x1000
        self.memory[(device, self._next)] = bytearray(size)
        return self._next

    def free(self, device: int, ptr: int) -> None:
        self._op("MemFree", device)
        del self.memory[(device, ptr)]

    def upload(self, device: int, ptr: int, data: bytes) -> None:
        self._op("MemcpyHtoD", device)
        self.memory[(device, ptr)][:] = data

    def download(self, device: int, ptr: int, size: int) -> bytes:
        self._op("MemcpyDtoH", device)
        return bytes(self.memory[(device, ptr)][:size])

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        self._op("MemcpyPeer", src_device)
        if (src_device, dst_device) in self.drop:
            return
        data = bytearray(self.memory[(src_device, src)][:size])
        for offset in self.corrupt.get((src_device, dst_device), []):
            data[offset] ^= 0xFF
        self.memory[(dst_device, dst)][:size] = data

    def synchronize(self, device: int) -> None:
        self._op("CtxSynchronize", device)

    def close(self) -> None:
        self.closed = True


def all_pairs(n: int) -> set[tuple[int, int]]:
    """Return every ordered pair of distinct devices of ``n``: the peers a fully connected rig allows."""
    return {(a, b) for a in range(n) for b in range(n) if a != b}


def memory_driver(layer: MemoryGpus) -> Callable[[str | None], MemoryGpus]:
    """Return a ``cuda_driver`` for FwmanEnv that opens ``layer`` whatever libcuda path the command asks for."""

    def open_layer(library: str | None) -> MemoryGpus:
        del library  # no library is loaded: the layer is the GPUs
        return layer

    return open_layer
