"""Where the doctor runs: inside a VM guest, the rest of the chain reads differently (and says so first)."""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Severity, Topic
from fwman.platform.virt import VirtVerdict
from fwman.reports.doctor.facts import Facts

VM_CONSEQUENCES = (
    "in a guest, BAR sizes, the Resizable BAR capability and `topo -p2p`'s CNS come from the emulated chipset and "
    "the P2P driver forks do not change them; firmware, BAR1 and IOMMU must be read on the host"
)
VM_FIX = (
    "run `fwman doctor` on the VM's host for firmware, BAR1, IOMMU and ACS; in QEMU/Proxmox put every GPU the "
    "guest uses in one P2P clique (the vfio-pci device property `x-nv-gpudirect-clique=0` on each, on Proxmox "
    "through the VM's `args:` line) so the guest's driver is told the GPUs may talk directly"
)


def vm_findings(verdict: VirtVerdict, gpus: int) -> list[Finding]:
    """Return the "running inside a VM" finding: warn in a multi-GPU guest, info with one GPU, ok on bare metal."""
    evidence = dict(verdict.evidence)
    if verdict.guest is None:
        return [
            Topic("platform.vm", evidence).info(
                "could not tell whether this is a VM guest (no /proc/cpuinfo, DMI or systemd-detect-virt readable)"
            )
        ]
    if not verdict.guest:
        return [Topic("platform.vm", evidence).ok("not a VM guest")]
    what = verdict.describe()
    return [
        Topic("platform.vm", evidence).say(
            Severity.WARN if gpus >= 2 else Severity.INFO, f"running inside {what}: {VM_CONSEQUENCES}", VM_FIX
        )
    ]


def check_vm(facts: Facts) -> list[Finding]:
    """Return whether the doctor runs inside a VM guest, first in the chain (it changes how the rest reads)."""
    return vm_findings(facts.virt.get(), len(facts.cards))


GUEST_NOTE = " (in a VM guest the Resizable BAR capability is emulated or hidden: read the firmware on the VM's host)"


def adjust_for_guest(check_id: str, findings: list[Finding], guest: bool) -> list[Finding]:
    """Return ``findings`` of check ``check_id`` as they read in a VM guest: the firmware step cannot judge the
    card from inside (a block there becomes info, pointing at the host), and firmware-setup fixes apply on the host.
    Unchanged on bare metal."""
    if not guest:
        return findings
    out = []
    for f in findings:
        if check_id == "firmware.rebar" and f.severity in (Severity.BLOCK, Severity.WARN):
            f = f.model_copy(
                update={
                    "severity": Severity.INFO,
                    "message": f.message + GUEST_NOTE,
                    "fix": "run `fwman doctor` (and `fwman scan`) on the VM's host: it reads the card's own firmware",
                }
            )
        elif check_id == "bar1.size" and f.fix:
            f = f.model_copy(update={"fix": "on the VM's host: " + f.fix})
        out.append(f)
    return out


def is_guest(facts: Facts) -> bool:
    """Return True when the doctor runs inside a VM guest (False when unknown)."""
    try:
        return facts.virt.get().guest is True
    except FwmanError:
        return False
