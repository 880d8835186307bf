"""Reading what ``fwman audit`` compares: the loaded module, every kernel's nvidia*.ko files (with fwman's
install manifest, parsed by its owner fwman.driver.build.manifest); the containers are read by
:mod:`fwman.platform.containers`, below the driver layer, so a module build can read them too. Readers never raise
for an unreadable part of the host: they append it to the caller's ``unreadable`` list and leave the field
empty, so the rows can say "unknown".
"""

from __future__ import annotations

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.driver.build.manifest import Manifest, load_manifest, manifest_path, sha256_hex
from fwman.driver.kernels import installed_kernels
from fwman.driver.kmod.depmod import normalize, resolve_all
from fwman.driver.kmod.kofile import decompress, module_bytes, read_module
from fwman.gpu.kernel_modules import is_driver_module
from fwman.gpu.proc_version import parse_proc_version
from fwman.host.base import Host
from fwman.host.optional import read_text_noting
from fwman.reports.audit.model import KernelModule, LoadedModule


def read_loaded(host: Host, unreadable: list[str]) -> LoadedModule | None:
    """Return the loaded module (None when neither /proc nor /sys shows one)."""
    proc = read_text_noting(host, paths.PROC_DRIVER_VERSION, unreadable)
    sysv = read_text_noting(host, "/sys/module/nvidia/version", unreadable)
    if proc is None and sysv is None:
        return None
    parsed = parse_proc_version(proc or "")
    sys_version = sysv.strip() if sysv else None
    return LoadedModule(
        version=sys_version or parsed.version,
        flavour=parsed.flavour,
        proc_version=proc.splitlines()[0] if proc and proc.strip() else None,
        sys_version=sys_version,
    )


def read_kernel_modules(host: Host, unreadable: list[str]) -> tuple[list[KernelModule], list[str]]:
    """Return (every nvidia* module depmod resolves for every kernel, read and identified; the installed
    kernels that have no nvidia module at all).

    A module a snapshot recorded by size only (capture keeps files over 16 MiB that way) gets its row's error.
    """
    out: list[KernelModule] = []
    bare: list[str] = []
    try:
        kernels = installed_kernels(host)
    except NotRecordedError:
        unreadable.append("/lib/modules (not recorded)")
        return out, bare
    for kver in kernels:
        try:
            resolved = resolve_all(host, kver)
        except NotRecordedError as e:
            unreadable.append(f"{paths.modules_dir(kver)} ({e.message})")
            continue
        manifest, manifest_error = _manifest(host, kver)
        names = sorted(n for n in resolved if is_driver_module(n))
        if not names and _kernel_installed(host, kver):
            bare.append(kver)
        out += [_read_one(host, kver, name, resolved[name], manifest, manifest_error) for name in names]
    return out, bare


def _kernel_installed(host: Host, kver: str) -> bool:
    """Return True when ``kver`` is a bootable kernel (its image or in-tree modules), not just headers."""
    try:
        return host.exists(f"/boot/vmlinuz-{kver}") or host.is_dir(f"{paths.modules_dir(kver)}/kernel")
    except NotRecordedError:
        return False


def _manifest(host: Host, kver: str) -> tuple[Manifest | None, str | None]:
    """Return (fwman's install manifest of ``kver`` or None, why it could not be read or None)."""
    try:
        return load_manifest(host, kver), None
    except (MissingError, NotRecordedError, ParseError) as e:
        return None, f"manifest {manifest_path(kver)} unreadable: {e.message}"


def _read_one(
    host: Host, kver: str, name: str, path: str, manifest: Manifest | None, manifest_error: str | None
) -> KernelModule:
    entry = KernelModule(kernel=kver, name=name, path=path)
    try:
        raw = host.read_bytes(path)
        info = read_module(module_bytes(host, path) if path.endswith(".zst") else decompress(raw, path))
    except (FwmanError, ParseError) as e:
        entry.error = e.message
        return entry
    entry.version = info.version
    entry.vermagic = info.vermagic
    entry.kernel_release = info.kernel_release
    entry.srcversion = info.srcversion
    entry.signed = info.signature is not None
    entry.signer = info.signature.signer if info.signature else None
    if manifest_error:
        entry.error = manifest_error
    if manifest is not None:
        # depmod's names are normalized (nvidia_uvm); a manifest may name a module either way
        recorded = {normalize(n): m for n, m in manifest.modules.items()}.get(name)
        if recorded is not None and recorded.sha256 == sha256_hex(raw):
            entry.origin = "patched"
            entry.fork, entry.branch, entry.commit = manifest.fork, manifest.branch, manifest.commit
            entry.donor_patch = manifest.donor_patch.get("sha256") if manifest.donor_patch else None
        else:
            entry.origin = "not-fwman"
    return entry
