"""The IOMMU is not translating the GPUs' DMA, and what IOMMU passthrough costs the VMs that get
devices from this host."""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Severity, Topic
from fwman.reports.doctor.cmdline import add_parameter_fix
from fwman.reports.doctor.facts import Facts, iommu_mode

#: where the command line is set, when this host's files are not known (a replay that did not record them)
GENERAL_CMDLINE_FIX = (
    "GRUB: GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then `update-grub`; Proxmox booting with "
    "proxmox-boot-tool: /etc/kernel/cmdline, then `proxmox-boot-tool refresh`; reboot"
)


# -- IOMMU -------------------------------------------------------------------------------------------------------
def check_iommu(facts: Facts) -> list[Finding]:
    """Return the IOMMU mode of the GPUs: translation (DMA/DMA-FQ) blocks the fork's direct writes."""
    mode, evidence = iommu_mode(facts.iommu.get())
    t = Topic("iommu.mode", evidence)
    if mode == "translated":
        boot = facts.boot_cmdline.get() if facts.boot_cmdline is not None else None  # read only for this fix
        exact = add_parameter_fix(boot, "iommu=pt") if boot is not None else None
        return [
            t.block(
                "IOMMU translated for the GPUs ("
                + ", ".join(sorted({v for k, v in evidence.items() if k.startswith("group of")}))
                + f"; command line: {evidence['cmdline']}): the fork's direct writes fail under translation",
                "add `iommu=pt` to the kernel command line (keep `amd_iommu=on` on AMD): "
                + (exact or GENERAL_CMDLINE_FIX)
                + ". Read the VM finding below first",
            )
        ]
    if mode == "passthrough":
        return [t.ok(f"IOMMU in passthrough for the GPUs (command line: {evidence['cmdline']})")]
    if mode == "off":
        return [t.ok(f"IOMMU off (command line: {evidence['cmdline']}; no IOMMU groups)")]
    if mode == "not-visible":
        return [
            t.info(
                f"IOMMU groups not visible (/sys/kernel/iommu_groups is empty; command line: "
                f"{evidence['cmdline']}): no IOMMU translates this kernel's DMA (off, or a VM without a virtual "
                "IOMMU)"
            )
        ]
    return [
        t.info(
            "could not tell the IOMMU mode of the GPUs (" + ", ".join(f"{k}: {v}" for k, v in evidence.items()) + ")"
        )
    ]


PASSTHROUGH_COST = (
    "with iommu=pt, VFIO keeps translating the devices given to VMs, but every device left to host drivers "
    "(the GPUs, NICs, disk controllers) can then reach all host memory by DMA, the VMs' memory included: a faulty "
    "or compromised host device or driver is no longer contained"
)


def check_vm_isolation(facts: Facts) -> list[Finding]:
    """Return whether the host passes devices to VMs, and so what IOMMU passthrough costs here."""
    given = facts.passthrough.get()
    vfio, hostpci, unreadable = given.vfio, given.hostpci, given.unreadable
    try:
        mode, _ = iommu_mode(facts.iommu.get())
    except FwmanError:
        mode = "unknown"
    if vfio or hostpci:
        where = "; ".join([*(f"vfio-pci: {b}" for b in vfio), *hostpci])
        recommending = mode == "translated"
        return [
            Topic("iommu.vms", {"vfio-pci": ", ".join(vfio) or "none", "hostpci": "; ".join(hostpci) or "none"}).say(
                Severity.WARN if recommending else Severity.INFO,
                f"this host passes devices to VMs ({where}): "
                + (
                    "before switching to iommu=pt know what isolation is lost"
                    if recommending
                    else "IOMMU passthrough is already on, so this isolation is already lost"
                ),
                PASSTHROUGH_COST,
            )
        ]
    if unreadable:
        return [Topic("iommu.vms").info("could not check whether devices are passed to VMs: " + "; ".join(unreadable))]
    return [
        Topic("iommu.vms").ok(
            "no device is passed to a VM (no vfio-pci bound device, no Proxmox hostpci line): IOMMU "
            "passthrough costs no VM isolation here"
        )
    ]
