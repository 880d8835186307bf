"""Will a kernel's verified modules actually load at boot? Secure Boot and the initramfs can each say no.

:func:`fwman.driver.boot.safety.kernel_safety` first verifies what is installed (manifest, depmod, hashes,
vermagic); this module adds what happens at boot: under Secure Boot the kernel rejects modules whose signing key
is not enrolled ("Key was rejected by service"), and NVIDIA modules inside the initramfs load before the root
filesystem's, so a stock copy there loses the patch.
"""

from __future__ import annotations

from fwman.driver.boot import initramfs
from fwman.driver.build.manifest import Manifest
from fwman.driver.kmod.secureboot import SecureBootState, module_load_verdict, read_state
from fwman.host.base import Host


def load_problem(host: Host, kver: str, manifest: Manifest, secure_boot: SecureBootState | None = None) -> str | None:
    """Return why ``kver``'s verified modules will not be the ones running after boot, or None.

    ``secure_boot`` is read once by callers that check many kernels; None reads it here. Never raises.
    """
    state = secure_boot if secure_boot is not None else read_state(host)
    verdict = module_load_verdict(state, manifest.signed)
    if verdict is not None:
        return verdict
    return initramfs.inspect(host, kver).problem
