"""A thin ctypes binding of the CUDA driver API (``libcuda.so.1``): just what the P2P copy test needs.

No new dependency: the driver library ships with every NVIDIA driver. This talks to the GPUs, not to files or
commands, so it is not behind the Host door; it is read-only with respect to the GPU's settings (it allocates,
copies and frees memory in the devices' primary contexts and changes no clock, power or mode).

Every call's CUresult is checked; a failure raises :class:`CudaError` naming the call and the error
(``cuGetErrorName``). Loading or initialising fails with MissingError when there is no usable driver or GPU.
"""

from __future__ import annotations

import ctypes
from typing import Any

from fwman.core.errors import MissingError
from fwman.p2p.device import CudaError, Gpu

DEFAULT_LIBRARY = "libcuda.so.1"
CUDA_SUCCESS = 0
#: cuInit/cuDeviceGet failures that mean "no usable GPU or driver here" (exit 5), not "a copy went wrong"
NOT_USABLE = frozenset(
    {
        "CUDA_ERROR_NO_DEVICE",
        "CUDA_ERROR_INSUFFICIENT_DRIVER",
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "CUDA_ERROR_NOT_INITIALIZED",
        "CUDA_ERROR_OPERATING_SYSTEM",
    }
)
PEER_ALREADY_ENABLED = "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"

_u = ctypes.c_uint
_i = ctypes.c_int
_p = ctypes.c_void_p
_ptr = ctypes.c_ulonglong  # CUdeviceptr (64-bit)
_size = ctypes.c_size_t
#: name -> argument types; every function returns CUresult (int)
SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [_u],
    "cuDriverGetVersion": [ctypes.POINTER(_i)],
    "cuDeviceGetCount": [ctypes.POINTER(_i)],
    "cuDeviceGet": [ctypes.POINTER(_i), _i],
    "cuDeviceGetName": [ctypes.c_char_p, _i, _i],
    "cuDeviceGetPCIBusId": [ctypes.c_char_p, _i, _i],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_p), _i],
    "cuDevicePrimaryCtxRelease_v2": [_i],
    "cuCtxSetCurrent": [_p],
    "cuCtxSynchronize": [],
    "cuDeviceCanAccessPeer": [ctypes.POINTER(_i), _i, _i],
    "cuCtxEnablePeerAccess": [_p, _u],
    "cuMemAlloc_v2": [ctypes.POINTER(_ptr), _size],
    "cuMemFree_v2": [_ptr],
    "cuMemcpyHtoD_v2": [_ptr, _p, _size],
    "cuMemcpyDtoH_v2": [_p, _ptr, _size],
    "cuMemcpyDtoD_v2": [_ptr, _ptr, _size],
    "cuMemcpyPeer": [_ptr, _p, _ptr, _p, _size],
    "cuGetErrorName": [_i, ctypes.POINTER(ctypes.c_char_p)],
}


def load_library(path: str | None = None) -> ctypes.CDLL:
    """Return the loaded CUDA driver library (``path``, default ``libcuda.so.1`` from the loader's path).

    Raises MissingError when it cannot be loaded or lacks the driver API.
    """
    name = path or DEFAULT_LIBRARY
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise MissingError(
            f"cannot load the CUDA driver library {name}: {e}",
            hint="install the NVIDIA driver's user space (libcuda.so.1), or point FWMAN_LIBCUDA at one",
        ) from e
    missing = [fn for fn in SIGNATURES if not hasattr(lib, fn)]
    if missing:
        raise MissingError(
            f"{name} is not a CUDA driver library (no {', '.join(missing[:3])})",
            hint="point FWMAN_LIBCUDA at the driver's libcuda.so.1",
        )
    for fn, argtypes in SIGNATURES.items():
        f = getattr(lib, fn)
        f.argtypes = argtypes
        f.restype = ctypes.c_int
    return lib


class CudaDriver:
    """The DeviceLayer on the CUDA driver API: one primary context per device, retained until :meth:`close`."""

    def __init__(self, lib: ctypes.CDLL, library: str = DEFAULT_LIBRARY) -> None:
        """Initialise the driver and retain every device's primary context.

        Raises MissingError when the driver has no usable GPU, CudaError for any other failed call.
        """
        self.lib = lib
        self.library = library
        self._contexts: list[ctypes.c_void_p] = []
        self._devices: list[int] = []
        self._gpus: list[Gpu] = []
        self._peers: set[tuple[int, int]] = set()
        self._current: int | None = None
        self._check_usable("cuInit", lib.cuInit(0))
        version = _i()
        self._call("cuDriverGetVersion", ctypes.byref(version))
        self.driver_version: str | None = f"{version.value // 1000}.{version.value % 1000 // 10}"
        count = _i()
        self._check_usable("cuDeviceGetCount", lib.cuDeviceGetCount(ctypes.byref(count)))
        if count.value == 0:
            raise MissingError("the CUDA driver sees no GPU", hint="check `nvidia-smi`; in a container, the GPUs given")
        try:
            for index in range(count.value):
                dev = _i()
                self._call("cuDeviceGet", ctypes.byref(dev), index)
                name = ctypes.create_string_buffer(256)
                self._call("cuDeviceGetName", name, 256, dev)
                bus = ctypes.create_string_buffer(64)
                self._call("cuDeviceGetPCIBusId", bus, 64, dev)
                ctx = _p()
                self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
                self._devices.append(dev.value)
                self._contexts.append(ctx)
                self._gpus.append(Gpu(index, name.value.decode(errors="replace"), _bus(bus.value.decode())))
        except BaseException:
            self.close()
            raise

    # -- error handling ---------------------------------------------------------------------------------------------
    def error_name(self, code: int) -> str:
        """Return ``CUDA_ERROR_...`` for ``code`` (``CUresult <code>`` when the driver does not know it)."""
        out = ctypes.c_char_p()
        if self.lib.cuGetErrorName(code, ctypes.byref(out)) == CUDA_SUCCESS and out.value:
            return out.value.decode(errors="replace")
        return f"CUresult {code}"

    def _call(self, name: str, *args: Any) -> None:
        """Call driver function ``name``. Raises CudaError when it does not return CUDA_SUCCESS."""
        code = getattr(self.lib, name)(*args)
        if code != CUDA_SUCCESS:
            raise CudaError(name, code, self.error_name(code))

    def _check_usable(self, name: str, code: int) -> None:
        if code == CUDA_SUCCESS:
            return
        err = self.error_name(code)
        if err in NOT_USABLE:
            raise MissingError(
                f"the CUDA driver is not usable here: {name} returned {err} ({code})",
                hint="no GPU, or libcuda and the kernel module are different versions (`fwman audit`)",
            )
        raise CudaError(name, code, err)

    def _use(self, device: int) -> None:
        if self._current != device:
            self._call("cuCtxSetCurrent", self._contexts[device])
            self._current = device

    # -- DeviceLayer ------------------------------------------------------------------------------------------------
    def gpus(self) -> list[Gpu]:
        """Return the devices."""
        return list(self._gpus)

    def can_access_peer(self, device: int, peer: int) -> bool:
        """Return cuDeviceCanAccessPeer(device, peer)."""
        out = _i()
        self._call("cuDeviceCanAccessPeer", ctypes.byref(out), self._devices[device], self._devices[peer])
        return bool(out.value)

    def enable_peer_access(self, device: int, peer: int) -> None:
        """Enable access from ``device``'s context to ``peer``'s (already enabled is fine)."""
        if (device, peer) in self._peers:
            return
        self._use(device)
        code = self.lib.cuCtxEnablePeerAccess(self._contexts[peer], 0)
        if code != CUDA_SUCCESS and self.error_name(code) != PEER_ALREADY_ENABLED:
            raise CudaError("cuCtxEnablePeerAccess", code, self.error_name(code))
        self._peers.add((device, peer))

    def alloc(self, device: int, size: int) -> int:
        """Return a device pointer to ``size`` new bytes on ``device``."""
        self._use(device)
        ptr = _ptr()
        self._call("cuMemAlloc_v2", ctypes.byref(ptr), size)
        return int(ptr.value)

    def free(self, device: int, ptr: int) -> None:
        """Free ``ptr`` on ``device``."""
        self._use(device)
        self._call("cuMemFree_v2", ptr)

    def upload(self, device: int, ptr: int, data: bytes) -> None:
        """Copy ``data`` to ``ptr``."""
        self._use(device)
        src = ctypes.cast(ctypes.c_char_p(data), _p)
        self._call("cuMemcpyHtoD_v2", ptr, src, len(data))

    def download(self, device: int, ptr: int, size: int) -> bytes:
        """Return ``size`` bytes read back from ``ptr``."""
        self._use(device)
        out = bytearray(size)
        buf = (ctypes.c_char * size).from_buffer(out)
        self._call("cuMemcpyDtoH_v2", ctypes.cast(buf, _p), ptr, size)
        del buf  # release the export so the bytearray can be converted
        return bytes(out)

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        """Copy device to device: cuMemcpyDtoD_v2 on one GPU, cuMemcpyPeer between two."""
        if dst_device == src_device:
            self._use(src_device)
            self._call("cuMemcpyDtoD_v2", dst, src, size)
            return
        self._use(src_device)
        self._call("cuMemcpyPeer", dst, self._contexts[dst_device], src, self._contexts[src_device], size)

    def synchronize(self, device: int) -> None:
        """cuCtxSynchronize in ``device``'s context."""
        self._use(device)
        self._call("cuCtxSynchronize")

    def close(self) -> None:
        """Release every retained primary context (errors ignored: this runs on the way out)."""
        for dev in self._devices:
            self.lib.cuDevicePrimaryCtxRelease_v2(dev)
        self._devices, self._contexts, self._current = [], [], None


def _bus(text: str) -> str:
    """Return a CUDA bus id (``00000000:41:00.0``) in sysfs form (``0000:41:00.0``)."""
    domain, _, rest = text.strip().lower().rpartition(":")
    dom, _, bus = domain.rpartition(":")
    try:
        return f"{int(dom or '0', 16):04x}:{bus}:{rest}"
    except ValueError:
        return text.strip().lower()


def open_driver(library: str | None = None) -> CudaDriver:
    """Return a CudaDriver on ``library`` (default ``libcuda.so.1``). Raises MissingError, CudaError."""
    lib = load_library(library)
    return CudaDriver(lib, library or DEFAULT_LIBRARY)
