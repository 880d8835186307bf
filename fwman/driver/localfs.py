"""Where a Host lives on this machine's filesystem, for the tools that need real paths (make, depmod, grub).

A temp root (``--root``) maps host paths under a directory; a snapshot maps them nowhere, and nothing can be
built or installed there. The one owner of that question for the driver side (build, install, boot, DKMS).
"""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.host.base import Host


def local_dir(host: Host, path: str, doing: str = "build on") -> str:
    """Return the local filesystem path of host path ``path``.

    Raises FwmanError ("cannot <doing> <host>: ...") on a host without one (a snapshot).
    """
    local = host.local_path(path)
    if local is None:
        raise FwmanError(f"cannot {doing} {host.description}: no local filesystem path for {path}")
    return local


def root_prefix(host: Host) -> str | None:
    """Return the filesystem directory the Host maps ``/`` to when it is not ``/`` itself, else None.

    Raises FwmanError on a host without a local filesystem (a snapshot): nothing can be installed there.
    """
    local = host.local_path("/")
    if local is None:
        raise FwmanError(f"cannot change {host.description}: it has no local filesystem")
    return None if local == "/" else local.rstrip("/")
