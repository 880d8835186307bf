"""The fingerprint of the configuration a P2P verification depends on, read from a Host.

One reader for both sides: ``fwman p2p`` records with it, ``fwman doctor`` compares with it, so the two
can never disagree on how a field is read. Raises NotRecordedError on a snapshot that lacks one of its inputs.
"""

from __future__ import annotations

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.build.manifest import load_manifest
from fwman.driver.settings import P2P_KEYS, parse_params
from fwman.gpu.card import Card
from fwman.host.base import Host
from fwman.p2p.history import CardPrint, Fingerprint
from fwman.platform.userspace import KEY_LIBS, scan_userspace


def _first_line(host: Host, path: str) -> str | None:
    if not host.exists(path):
        return None
    try:
        text = host.read_text(path)
    except MissingError:
        return None
    return text.strip().splitlines()[0].strip() if text.strip() else None


def _manifest(host: Host, kernel: str | None) -> str | None:
    """Return "fork branch @ commit" of fwman's install manifest for ``kernel``, None when fwman built nothing."""
    if not kernel:
        return None
    try:
        manifest = load_manifest(host, kernel)
    except ParseError:
        return "unreadable manifest"
    if manifest is None:
        return None
    return f"{manifest.fork or '?'} {manifest.branch or '?'} @ {manifest.commit or '?'}"


def _userspace(host: Host) -> str | None:
    """Return the version(s) of the host's libcuda / libnvidia-ml (compat copies excluded), None when none."""
    space = scan_userspace(host, "/", run_smi=False)
    versions = sorted({lib.version for lib in space.libs if lib.name in KEY_LIBS})
    return ", ".join(versions) or None


def _module_options(host: Host) -> tuple[tuple[str, str], ...] | None:
    """Return the loaded module's P2P-relevant options, None when /proc/driver/nvidia/params is not readable."""
    try:
        if not host.exists(paths.PROC_DRIVER_PARAMS):
            return None
        params = parse_params(host.read_text(paths.PROC_DRIVER_PARAMS))
    except FwmanError:
        return None
    return tuple(sorted((k, params[k]) for k in P2P_KEYS if k in params))


def read_fingerprint(host: Host, cards: list[Card], iommu: str | None) -> Fingerprint:
    """Return the fingerprint of the configuration ``host`` is in now (``cards`` and the IOMMU mode as read)."""
    kernel = _first_line(host, paths.KERNEL_RELEASE)
    flavours = sorted({c.driver_flavour for c in cards if c.driver_flavour})
    return Fingerprint(
        kernel=kernel,
        module_version=_first_line(host, paths.NVIDIA_MODULE_VERSION),
        module_srcversion=_first_line(host, paths.NVIDIA_MODULE_SRCVERSION),
        module_flavour=", ".join(flavours) or None,
        manifest=_manifest(host, kernel),
        userspace=_userspace(host),
        iommu=iommu,
        module_options=_module_options(host),
        power_limits=tuple(sorted((c.bus_id, float(c.power_limit_w)) for c in cards if c.power_limit_w is not None))
        or None,
        gpus=tuple(
            CardPrint(c.bus_id, f"{c.vendor_id}:{c.device_id}", c.subsystem, c.vbios_version, c.bar1_bytes)
            for c in sorted(cards, key=lambda c: c.bus_id)
        ),
    )
