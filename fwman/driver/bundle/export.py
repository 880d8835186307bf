"""Export: the patched modules installed for a kernel on this host, verified, made into a bundle."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError
from fwman.driver.build.install import verify_or_raise
from fwman.driver.build.manifest import BuildRecord, load_manifest, now_iso
from fwman.driver.bundle.format import Bundle, BundleDoc, BundleModule, pack
from fwman.driver.kmod.kofile import read_module, split_signature
from fwman.host.base import Host

#: returns the bundle.json.sig document for the bytes of bundle.json (fwman's Ed25519 signature format)
Signer = Callable[[bytes], bytes]


def _signature_state(files: dict[str, bytes]) -> str | None:
    """Return the signer of the modules (issuer CN), or None when unsigned."""
    for data in files.values():
        _body, sig = split_signature(data)
        if sig is not None:
            return sig.signer or sig.issuer or "unknown signer"
    return None


def host_name(host: Host) -> str:
    """Return ``host``'s name (the kernel's, else ``/etc/hostname``), or "an unnamed host" when neither says one.

    What a bundle records as the host it was built on (docs/fleet.md). Never raises.
    """
    for path in (paths.KERNEL_HOSTNAME, paths.HOSTNAME_FILE):
        try:
            name = host.read_text(path).strip().splitlines()
        except (FwmanError, UnicodeDecodeError):
            continue
        if name and name[0].strip() and len(name[0]) <= 253 and name[0].isprintable():
            return name[0].strip()
    return "an unnamed host"


def export_bundle(host: Host, kver: str, sign: Signer | None = None) -> tuple[bytes, Bundle]:
    """Return (the bundle file bytes, the bundle) of the patched modules installed for ``kver`` on ``host``.

    ``sign`` (given the bytes of ``bundle.json``) returns the signature document to add, when the bundle is
    signed.

    Only a verified set is exported: the manifest must exist and every module must pass the same check as
    ``fwman modules status`` (depmod resolution, SHA-256, vermagic). Raises MissingError when ``kver`` has no
    manifest, VerificationError when its modules do not verify.
    """
    manifest = load_manifest(host, kver)
    if manifest is None:
        raise MissingError(
            f"no patched modules installed by fwman for kernel {kver}",
            hint=f"build them first: fwman modules build --kernel {kver}",
        )
    verify_or_raise(host, manifest)
    files = {name: host.read_bytes(entry.path) for name, entry in manifest.modules.items()}
    first = files.get("nvidia") or next(iter(files.values()))
    doc = BuildRecord.of(manifest).onto(
        BundleDoc(
            kernel=kver,
            vermagic=read_module(first).vermagic or "",
            modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
            signer=_signature_state(files),
            exported_at=now_iso(),
            exported_from=host_name(host),
        )
    )
    doc_bytes = doc.to_json()
    signature = sign(doc_bytes) if sign is not None else None
    return pack(doc_bytes, files, signature), Bundle(doc, doc_bytes, signature, files)
