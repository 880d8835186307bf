"""Is a kernel safe to boot: the one predicate the pin, status, check-boot, metrics and bundles ask.

A kernel is *safe to boot* when fwman's manifest for it exists, depmod resolves all five module names to
fwman's files, the files hash as recorded, and their ``vermagic`` names the kernel; with ``hash_files`` also
whether they will load (Secure Boot, the initramfs: :mod:`fwman.driver.boot.loadable`). A kernel whose own
``nova_core`` would take the GPU (:mod:`fwman.driver.nova_core`) is not safe either, until it is blacklisted.
What to do about an unsafe next boot (pin another kernel) is :mod:`fwman.driver.boot.pin`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import ParseError
from fwman.core.jsonout import meta
from fwman.driver import nova_core
from fwman.driver.build.install import check_installed
from fwman.driver.build.manifest import failed_path, load_manifest, pending_path, read_marker
from fwman.host.base import Host


@dataclass
class Safety:
    """Whether a kernel boots with working patched modules, and why (one line)."""

    kver: str = field(metadata=meta(key="kernel"))
    safe: bool
    reason: str


def kernel_safety(host: Host, kver: str, hash_files: bool = True) -> Safety:
    """Return whether ``kver`` has working patched modules installed. Never raises for a broken state."""
    try:
        manifest = load_manifest(host, kver)
    except ParseError as e:
        return Safety(kver, False, f"manifest unreadable: {e.message}")
    if manifest is None:
        failed = read_marker(host, failed_path(kver))
        if failed is not None:
            where = failed.detail.get("file")
            return Safety(kver, False, f"build failed: {where + ': ' if where else ''}{failed.reason}")
        pending = read_marker(host, pending_path(kver))
        if pending is not None:
            return Safety(kver, False, f"pending: {pending.reason}")
        return Safety(kver, False, "no patched modules built for this kernel")
    bad = [c for c in check_installed(host, manifest, hash_files=hash_files) if not c.ok]
    if bad:
        return Safety(kver, False, f"{bad[0].name}: {bad[0].problem}")
    # a kernel whose own nova_core takes the GPU first never lets the patched nvidia.ko probe it (issue 40)
    taken = nova_core.problem(nova_core.inspect_kernel(host, kver), nova_core.blacklist_files(host))
    if taken is not None:
        return Safety(kver, False, taken)
    if hash_files:  # the full check (status, check-boot, builds): will they load under Secure Boot, initramfs?
        from fwman.driver.boot.loadable import load_problem

        problem = load_problem(host, kver, manifest)
        if problem is not None:
            return Safety(kver, False, problem)
    return Safety(kver, True, f"patched modules verified ({manifest.branch or manifest.source}, {manifest.commit})")
