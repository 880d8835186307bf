"""NVIDIA modules registered with DKMS in ``fwman audit``: NVIDIA's stock module (a mismatch: DKMS rebuilds it over
the patched one), or the owner's P2P fork (info: which kernels DKMS builds it for, and whose copy loads).

Read from DKMS's tree (:func:`fwman.driver.dkms.read_tree`), without running dkms; classified by
:func:`fwman.driver.dkms.classify` (docs/dkms.md, "The owner's P2P fork in DKMS").
"""

from __future__ import annotations

from fwman.core import paths
from fwman.driver import dkms
from fwman.host.base import Host
from fwman.reports.audit.model import Row


def dkms_rows(host: Host, fwman_kernels: list[str]) -> list[Row]:
    """Return one row per NVIDIA module version registered with DKMS ([] when there is none)."""
    entries = dkms.read_tree(host)
    if not entries:
        return []
    rows: list[Row] = []
    for (module, version), src in sorted(dkms.sources(host, entries).items()):
        kernels = sorted({e.kernel for e in entries if (e.module, e.version) == (module, version) and e.kernel})
        where = f"{paths.DKMS_TREE}/{module}/{version}"
        built = f"installed for {', '.join(kernels)}" if kernels else "registered, installed for no kernel"
        if src.kind == dkms.FORK:
            both = [k for k in kernels if k in fwman_kernels]
            only = [k for k in kernels if k not in fwman_kernels]
            details = [f"the P2P fork ({'; '.join(src.evidence)})", built]
            if both:
                details.append(f"fwman built {', '.join(both)} too: its copy loads (depmod override)")
            rows.append(
                Row(
                    component=f"DKMS {module}/{version}",
                    version=src.tree_version,
                    where=where,
                    status="info",
                    fix=f"let fwman build {', '.join(only)}: "
                    f"`fwman modules build {' '.join(f'--kernel {k}' for k in only)}` (its boot check knows only "
                    "fwman's builds)"
                    if only
                    else None,
                    detail="; ".join(details),
                )
            )
        else:
            rows.append(
                Row(
                    component=f"DKMS {module}/{version}",
                    version=version,
                    where=where,
                    status="mismatch",
                    fix="`fwman dkms block` (removes NVIDIA's stock module, leaves a P2P fork registered)",
                    detail=f"NVIDIA's stock module, {built}: DKMS rebuilds it over the patched one at kernel updates",
                )
            )
    return rows
