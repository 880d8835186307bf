"""Which kernels are installed, and which of them have headers to build against.

The one owner of "list the kernels": depmod, the boot pin, the hooks, ``fwman modules`` and audit all ask
here. Standard library only (plus the Host protocol), because the boot-time catch-up imports it on its fast
path, where importing pydantic would cost more than the whole check.
"""

from __future__ import annotations

import re

from fwman.core.errors import MissingError
from fwman.core.paths import MODULES_ROOT
from fwman.host.base import Host

_DIGITS = "0123456789"
_PARTS = re.compile(r"[0-9]+|[^0-9]+")


def version_key(kver: str) -> tuple[tuple[int, int | str], ...]:
    """Return a sort key ordering kernel releases as versions (``6.1.0-53-amd64`` after ``6.1.0-9-amd64``)."""
    # ASCII digits only: str.isdigit() and \d also accept other scripts' digits ("¹"), which int() refuses
    return tuple((0, int(p)) if p[0] in _DIGITS else (1, p) for p in _PARTS.findall(kver))


def installed_kernels(host: Host) -> list[str]:
    """Return the kernel releases with a directory under ``/lib/modules``, oldest version first.

    A kernel with a module directory is bootable in practice. Returns [] when ``/lib/modules`` is absent or
    unreadable; never raises MissingError (a snapshot that did not record the directory raises its own
    NotRecordedError, which callers that read snapshots handle).
    """
    if not host.is_dir(MODULES_ROOT):
        return []
    try:
        names = host.listdir(MODULES_ROOT)
    except MissingError:
        return []
    return sorted((n for n in names if host.is_dir(f"{MODULES_ROOT}/{n}")), key=version_key)


def headers_present(host: Host, kver: str) -> bool:
    """Return True when kernel ``kver`` has headers to build against (``/lib/modules/KVER/build/include``)."""
    return host.is_dir(f"{MODULES_ROOT}/{kver}/build/include")
