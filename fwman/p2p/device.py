"""The small interface the P2P copy test needs from a GPU layer, and its error.

:class:`fwman.p2p.cuda.CudaDriver` implements it on the real CUDA driver API (ctypes on ``libcuda.so.1``); the
tests implement it in memory. Device memory is named by ``(device index, pointer)``; pointers are integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fwman.core.errors import VerificationError


@dataclass(frozen=True)
class Gpu:
    """One device as the GPU layer numbers it."""

    index: int
    name: str
    bus_id: str  # as the layer reports it, e.g. "0000:41:00.0" (lower case)


class CudaError(VerificationError):
    """A CUDA driver API call returned an error: ``call`` failed with ``name`` (``CUDA_ERROR_...``, ``code``)."""

    def __init__(self, call: str, code: int, name: str, hint: str | None = None) -> None:
        super().__init__(f"{call} failed: {name} ({code})", hint)
        self.call = call
        self.code = code
        self.name = name


class DeviceLayer(Protocol):
    """What the copy test does with GPUs. Every method raises CudaError on a failed call."""

    driver_version: str | None  # e.g. "13.0" (the CUDA version the driver supports); None when unknown

    def gpus(self) -> list[Gpu]:
        """Return the devices, in the layer's order."""
        ...

    def can_access_peer(self, device: int, peer: int) -> bool:
        """Return True when ``device`` can map ``peer``'s memory directly (cuDeviceCanAccessPeer)."""
        ...

    def enable_peer_access(self, device: int, peer: int) -> None:
        """Let ``device``'s context access ``peer``'s memory (already enabled counts as done)."""
        ...

    def alloc(self, device: int, size: int) -> int:
        """Return a new device buffer of ``size`` bytes on ``device``."""
        ...

    def free(self, device: int, ptr: int) -> None:
        """Free a buffer from :meth:`alloc`."""
        ...

    def upload(self, device: int, ptr: int, data: bytes) -> None:
        """Copy ``data`` from host memory into the buffer (synchronous)."""
        ...

    def download(self, device: int, ptr: int, size: int) -> bytes:
        """Return ``size`` bytes copied from the buffer to host memory (synchronous)."""
        ...

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        """Copy ``size`` bytes from ``src`` on ``src_device`` to ``dst`` on ``dst_device`` (peer, or on-device)."""
        ...

    def synchronize(self, device: int) -> None:
        """Wait until all work on ``device`` is done."""
        ...

    def close(self) -> None:
        """Release every context the layer holds."""
        ...
