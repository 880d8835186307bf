"""Pure parsers and rules of ``fwman doctor``'s own: the kernel command line's IOMMU parameters, the NCCL level
rules, vLLM's flags. No I/O: text in, values out. Environment files, systemd units and Proxmox configs are
parsed in :mod:`fwman.platform` (audit reads them too).

Every parser accepts any text: lines it does not understand are skipped (a config file is not fwman's to
judge), so none of them raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: NCCL_P2P_LEVEL values, by the distance they allow (NCCL's environment-variable documentation)
NCCL_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
#: ``nvidia-smi topo -m`` cells, nearest first. NV# (NVLink) is nearer than any PCIe path.
TOPO_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
#: topo cells where two GPUs meet at the CPU: NCCL does not use P2P there unless told to
AT_CPU = ("PHB", "NODE", "SYS")


@dataclass(frozen=True)
class IommuCmdline:
    """The IOMMU-related parameters of a kernel command line (None: not given)."""

    iommu: str | None = None  # iommu=pt | off | on | ...
    amd_iommu: str | None = None
    intel_iommu: str | None = None
    tokens: list[str] = field(default_factory=list)  # the IOMMU tokens as written, for evidence

    @property
    def passthrough(self) -> bool:
        """Return True when the command line asks for passthrough (``iommu=pt``)."""
        return self.iommu == "pt" or "pt" in (self.intel_iommu or "").split(",")

    @property
    def disabled(self) -> bool:
        """Return True when the command line turns the IOMMU off."""
        return self.iommu == "off" or "off" in ((self.amd_iommu or "") + "," + (self.intel_iommu or "")).split(",")


def parse_cmdline(text: str) -> IommuCmdline:
    """Return the IOMMU parameters of a ``/proc/cmdline``. Arguments after ``--`` belong to init: ignored.

    The last occurrence of a parameter wins, as in the kernel. Never raises.
    """
    values: dict[str, str] = {}
    tokens: list[str] = []
    for token in text.split():
        if token == "--":
            break
        key, sep, value = token.partition("=")
        if sep and key in ("iommu", "amd_iommu", "intel_iommu"):
            values[key] = value
            tokens.append(token)
    return IommuCmdline(values.get("iommu"), values.get("amd_iommu"), values.get("intel_iommu"), tokens)


def topo_rank(cell: str) -> int:
    """Return how far apart a ``topo -m`` cell puts two devices (0 = same device; NV# counts as NVLink)."""
    key = "NV" if re.fullmatch(r"NV\d+", cell) else cell
    return TOPO_ORDER.index(key) if key in TOPO_ORDER else len(TOPO_ORDER)


def nccl_level_needed(cells: list[str]) -> str | None:
    """Return the NCCL_P2P_LEVEL the GPU pairs with these topo cells need, or None when NCCL's default covers
    them (NVLink, or a shared PCIe switch).

    Pairs that meet at the CPU within one NUMA node (``PHB``) need ``PHB``; across host bridges (``NODE``) or NUMA
    nodes (``SYS``) ``SYS``. ``SYS`` covers every case, which is why it is what doctor recommends.
    """
    worst = max((topo_rank(c) for c in cells), default=0)
    if worst >= topo_rank("NODE"):
        return "SYS"
    if worst >= topo_rank("PHB"):
        return "PHB"
    return None


def nccl_level_covers(value: str, needed: str) -> bool | None:
    """Return True when ``NCCL_P2P_LEVEL=value`` allows P2P at distance ``needed``; None when the value is not a
    named level (integers and unknown words: their meaning changed between NCCL releases)."""
    v = value.strip().upper()
    if v not in NCCL_LEVELS:
        return None
    return NCCL_LEVELS.index(v) >= NCCL_LEVELS.index(needed)


_VLLM = re.compile(r"\bvllm\b", re.IGNORECASE)
_DISABLE_CAR = re.compile(
    r"--disable-custom-all-reduce(?![\w-])|disable_custom_all_reduce\s*[=:]\s*[\"']?(true|1)\b", re.IGNORECASE
)


def mentions_vllm(text: str) -> bool:
    """Return True when ``text`` (a command line, unit or config) runs vLLM."""
    return bool(_VLLM.search(text))


def disables_custom_all_reduce(text: str) -> bool:
    """Return True when ``text`` passes ``--disable-custom-all-reduce`` (or sets ``disable_custom_all_reduce``)."""
    return bool(_DISABLE_CAR.search(text))
