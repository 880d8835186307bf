"""The peer-to-peer chain, one small pure check per link: ``check_x(facts) -> list[Finding]``.

The order of :data:`CHECKS` is the order of the chain in the design notes (host-state.md, "Peer-to-peer
chain"): firmware, firmware setup (BAR1), driver, what the driver reports, IOMMU (and what passthrough would
cost), topology and NCCL, vLLM, PCIe links, power. A check looks only at the :class:`~fwman.reports.doctor.facts.Facts`
it is given, never at the host; it lets through the FwmanError a fact raises for what could not be read, and
the runner (:mod:`fwman.reports.doctor.run`) turns that into a "could not check" finding of severity info.

One module per group of links:

- :mod:`.firmware`: the GPUs, the BAR1 the firmware offers, BAR1 against VRAM (firmware setup)
- :mod:`.driver`: the P2P fork driver and its branch, ``topo -p2p r``
- :mod:`.iommu`: the IOMMU mode, devices passed to VMs
- :mod:`.workloads`: NCCL_P2P_LEVEL, vLLM's custom all-reduce
- :mod:`.containers`: the Docker/Podman container that serves the model (driver, NCCL, vLLM's P2P cache)
- :mod:`.links`: PCIe link width/speed, power limits
- :mod:`.platform`: running inside a VM guest (first: it changes how the rest reads)
- :mod:`.pcie`: ACS redirect on the ports between GPUs, slot width versus link training
- :mod:`.prereqs`: the module options, which GPU combinations peer, the bridge windows
- :mod:`.verification`: whether ``fwman p2p`` verified this very configuration (last)

Adding a check (ACS on the bridges between GPUs, running inside a VM, slot width, ...):

1. write ``check_x(facts: Facts) -> list[Finding]`` in the module of its group, or in a new module here for a
   new group; finding ids are ``<check id>`` or ``<check id>.<detail>``;
2. when it needs something the facts do not carry, add a :class:`~fwman.reports.doctor.facts.Fact` field to
   ``Facts`` and its reader to ``facts.gather`` (a reader raises the FwmanError it meets; ``Fact`` keeps it);
3. add a ``Check(id, title, check_x, pairwise=...)`` line to :data:`CHECKS` at its place in the chain
   (``pairwise``: it only matters between two GPUs, so a one-GPU host demotes its block/warn to info);
4. test it with a ``Facts`` built from ``Fact.known``/``Fact.failed`` values
   (tests/unit/reports/doctor/test_doctor_checks.py), and on a snapshot host for the reading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fwman.core.findings import Finding
from fwman.reports.doctor.checks.containers import check_containers, check_host_vllm_caches
from fwman.reports.doctor.checks.driver import check_display, check_dkms, check_driver, check_nova_core, check_p2p_topo
from fwman.reports.doctor.checks.firmware import check_bar1, check_firmware, check_gpus
from fwman.reports.doctor.checks.iommu import check_iommu, check_vm_isolation
from fwman.reports.doctor.checks.links import check_links, check_power
from fwman.reports.doctor.checks.pcie import check_acs, check_slots
from fwman.reports.doctor.checks.platform import check_vm
from fwman.reports.doctor.checks.prereqs import check_matrix, check_settings, check_windows
from fwman.reports.doctor.checks.verification import check_verified
from fwman.reports.doctor.checks.workloads import check_nccl, check_vllm
from fwman.reports.doctor.facts import Facts


@dataclass(frozen=True)
class Check:
    """One link of the chain: ``pairwise`` checks only matter between two GPUs (demoted on a one-GPU host)."""

    id: str
    title: str
    run: Callable[[Facts], list[Finding]]
    pairwise: bool = False


CHECKS: tuple[Check, ...] = (
    Check("platform.vm", "Running inside a VM", check_vm),
    Check("gpus", "GPUs", check_gpus),
    Check("firmware.rebar", "Firmware offers a large BAR1", check_firmware),
    Check("bar1.size", "BAR1 covers VRAM (firmware setup)", check_bar1),
    Check("pcie.window", "Bridge windows against BAR1", check_windows),
    Check("p2p.matrix", "Which GPUs can peer (the forks' sources)", check_matrix, pairwise=True),
    Check("driver.settings", "Module options (NVreg_*) for P2P", check_settings),
    Check("driver.nova_core", "nova_core (the kernel's own NVIDIA driver) kept off the GPUs", check_nova_core),
    Check("driver", "Driver: the P2P fork at the user space's version", check_driver, pairwise=True),
    Check("driver.dkms", "DKMS: what it builds for which kernel", check_dkms),
    Check("p2p.topo", "nvidia-smi topo -p2p r", check_p2p_topo, pairwise=True),
    Check("driver.display", "GPUs that drive a display", check_display, pairwise=True),
    Check("iommu.mode", "IOMMU", check_iommu, pairwise=True),
    Check("iommu.vms", "Devices passed to VMs", check_vm_isolation, pairwise=True),
    Check("pcie.acs", "PCIe ACS on the path between GPUs", check_acs, pairwise=True),
    Check("nccl.level", "Topology and NCCL", check_nccl, pairwise=True),
    Check("vllm.allreduce", "vLLM custom all-reduce", check_vllm, pairwise=True),
    Check("containers", "The container that serves the model", check_containers),
    Check("vllm.cache", "vLLM's cached P2P verdicts on the host", check_host_vllm_caches),
    Check("pcie.link", "PCIe links", check_links),
    Check("pcie.slot", "Slot width versus link training", check_slots),
    Check("power.limit", "Power limit", check_power),
    Check("p2p.verified", "P2P verified on this configuration", check_verified),
)
