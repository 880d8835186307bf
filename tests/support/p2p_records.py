"""A P2P configuration fingerprint and a verification record on it, for tests of the P2P history and of what
`fwman doctor` reads back from it (tests/unit/p2p, tests/unit/driver)."""

from __future__ import annotations

from fwman.p2p.history import CardPrint, Fingerprint, P2PRecord

#: two RTX 3090s on a 6.8 Proxmox kernel with the open P2P module: the configuration a record was taken on
FP = Fingerprint(
    kernel="6.8.12-4-pve",
    module_version="570.86.16",
    module_srcversion="8C1B2D6A0F4E3B2A1D9C7E5",
    module_flavour="open",
    manifest="aikitoria 570.86.16-p2p @ 0123abc",
    userspace="570.86.16",
    iommu="passthrough",
    gpus=(
        CardPrint("0000:01:00.0", "10de:2204", "3842:3982", "94.02.42.C0.05", 32 << 30),
        CardPrint("0000:21:00.0", "10de:2204", "3842:3982", "94.02.42.C0.05", 32 << 30),
    ),
)


def copy_record(fp: Fingerprint = FP, ok: bool = True, time: str = "2026-11-30T20:00:00Z") -> P2PRecord:
    """Return the record of a 2-GPU copy test on ``fp`` at ``time`` that passed (``ok``) or found corruption."""
    return P2PRecord(
        time=time,
        kind="copy",
        ok=ok,
        verdict="every byte verified: 4 copies of 64 MiB" if ok else "FAILED: 1 copy corrupted data",
        fingerprint=fp,
        gpus=2,
        slowest_gbps=24.6,
        slowest_pair="GPU0 -> GPU1",
        every_byte_verified=ok,
    )
