"""A failed build is remembered for what it was built from, and tried again when any of that changes.

akmods keeps a ``.failed.log`` so that a build that cannot succeed is not retried at every boot; fwman's
``KVER.failed`` marker does the same, but a failure is only "the same" when the next attempt would be: the
source (the fork commit or tree hash, a donor patch's digest), the kernel, the toolchain (the compilers'
versions and where each build tool is), the patches applied for that kernel (patches.d and fwman's compat
patches) and the kernel's headers. A change in any of them is a new attempt. A failure caused by a command that
was not installed is also retried once that command is on the PATH (a tool fwman does not check up front, such
as one a newer fork's Makefile calls).

:func:`retry_reason` is the one decision: the real run (:func:`fwman.driver.build.pipeline.update_kernel`) and
every dry run (``modules catchup --dry-run``, the hook's) ask it, so they agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.errors import FwmanError
from fwman.driver.build.manifest import Marker
from fwman.host.base import Host

#: the files of a kernel's headers (its build directory) whose content identifies the headers package's build
HEADER_FILES = (".config", "Module.symvers", "include/generated/utsrelease.h", "include/generated/autoconf.h")


@dataclass(frozen=True)
class Attempt:
    """What a build of one kernel depends on, as a failure marker records it."""

    source: str  #: the source identity (Source.source_id)
    toolchain: str  #: Toolchain.fingerprint
    patches: str  #: the sha256 of each patch for the kernel, in order, comma-separated ("" without any)
    headers: str  #: :func:`headers_fingerprint`

    def detail(self) -> dict[str, str]:
        """Return the marker ``detail`` entries that record this attempt."""
        return {"toolchain": self.toolchain, "patches": self.patches, "headers": self.headers}


def retry_reason(marker: Marker, attempt: Attempt, installed: Callable[[str], bool]) -> str | None:
    """Return why the failure in ``marker`` does not hold for ``attempt`` (a retry is due), or None when the same
    build would run again (skip it).

    ``installed(command)`` says whether a command is on the PATH now. A marker written before fwman recorded a
    part of the attempt (no ``toolchain`` or ``headers`` key) is retried once: what it failed with is not known.
    """
    detail = marker.detail or {}
    if marker.commit != attempt.source:
        return f"the source changed since the failed build ({(marker.commit or 'unknown')[:12]})"
    tool = detail.get("missing_tool")
    if tool and installed(tool):
        return f"{tool} is installed now"
    if detail.get("toolchain") != attempt.toolchain:
        return "the toolchain changed since the failed build"
    if detail.get("patches", "") != attempt.patches:
        return "the patches for this kernel changed since the failed build"
    if detail.get("headers") != attempt.headers:
        return "the kernel's headers changed since the failed build"
    return None


def headers_fingerprint(host: Host, kver: str, build: str | None = None) -> str:
    """Return a digest of the identifying files of ``kver``'s headers (``build``: their build directory, default
    ``/lib/modules/KVER/build``); a rebuilt or reinstalled headers package of other content changes it. A file
    that is not there counts as absent (never raises for the headers)."""
    root = build or f"{paths.modules_dir(kver)}/build"
    digest = hashlib.sha256()
    for rel in HEADER_FILES:
        path = f"{root}/{rel}"
        digest.update(rel.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(host.read_bytes(path)).digest() if host.exists(path) else b"absent")
        except FwmanError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:16]
