"""Is this machine a virtual machine guest? Read from what the kernel shows, never from a guess.

Evidence, each optional: the CPU flag ``hypervisor`` in ``/proc/cpuinfo`` (set by the kernel when CPUID says a
hypervisor runs it), the DMI strings ``/sys/class/dmi/id/{product_name,sys_vendor,board_vendor,bios_vendor}``
matched by prefix against the names virtual machine monitors write (systemd's ``dmi_vendor_table`` in
src/basic/virt.c, less ``Amazon EC2`` and ``Oracle Corporation``, which bare-metal machines report too),
``/sys/hypervisor/type`` (Xen), ``systemd-detect-virt --vm`` where installed, and virtio PCI functions (vendor
0x1af4: evidence, and decisive only when the CPU flags cannot be read, since SmartNICs can emulate virtio in
hardware).

:func:`gather` asks a Host; :func:`judge` is pure over the :class:`VirtEvidence` it returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError
from fwman.host.base import Host
from fwman.host.optional import read_text_noting

CPUINFO = "/proc/cpuinfo"
DMI_DIR = "/sys/class/dmi/id"
DMI_FIELDS = ("product_name", "sys_vendor", "board_vendor", "bios_vendor")
HYPERVISOR_TYPE = "/sys/hypervisor/type"
DETECT_VIRT = ("systemd-detect-virt", "--vm")
VIRTIO_VENDOR = "1af4"
#: prefixes of DMI strings that name a virtual machine monitor (systemd src/basic/virt.c dmi_vendor_table)
DMI_MONITORS: tuple[tuple[str, str], ...] = (
    ("KVM", "kvm"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
)
_FLAGS = re.compile(r"^flags\s*:\s*(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class VirtEvidence:
    """What was read; None for what does not exist, "not recorded" readings are listed in ``unreadable``."""

    cpu_flags: frozenset[str] | None = None
    dmi: dict[str, str] = field(default_factory=dict)  # field name -> stripped value
    hypervisor_type: str | None = None
    detect_virt: str | None = None  # the output of systemd-detect-virt --vm ("none" on bare metal)
    virtio_functions: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True)
class VirtVerdict:
    """``guest`` True / False, or None when nothing could be read; ``kind`` names the monitor when known."""

    guest: bool | None
    kind: str | None
    evidence: dict[str, str]

    def describe(self) -> str:
        """Return a phrase for people: "a VM guest (kvm)" / "bare metal" / "unknown"."""
        if self.guest is None:
            return "unknown (nothing that tells a VM from bare metal could be read)"
        if not self.guest:
            return "bare metal (no sign of a hypervisor)"
        return f"a virtual machine guest ({self.kind})" if self.kind else "a virtual machine guest"


def parse_cpu_flags(text: str) -> frozenset[str]:
    """Return the union of the ``flags`` lines of ``/proc/cpuinfo`` text (empty when it has none)."""
    flags: set[str] = set()
    for m in _FLAGS.finditer(text):
        flags.update(m.group(1).split())
    return frozenset(flags)


def dmi_monitor(value: str) -> str | None:
    """Return the monitor a DMI string names (``QEMU`` -> ``qemu``), None for a maker's name."""
    for prefix, kind in DMI_MONITORS:
        if value.startswith(prefix):
            return kind
    return None


def judge(ev: VirtEvidence) -> VirtVerdict:
    """Return the verdict over ``ev``: a guest when any evidence says so; bare metal only when something was
    read and none of it does (systemd-detect-virt's ``none`` counts as read)."""
    evidence: dict[str, str] = {}
    kinds: list[str] = []  # the monitor each sign names (the first one is the verdict's kind)
    if ev.detect_virt is not None:
        evidence["systemd-detect-virt --vm"] = ev.detect_virt
        if ev.detect_virt not in ("none", ""):
            kinds.append(ev.detect_virt)
    for name, value in ((n, ev.dmi[n]) for n in DMI_FIELDS if n in ev.dmi):
        if kind := dmi_monitor(value):
            evidence[f"dmi {name}"] = value
            kinds.append(kind)
    if ev.hypervisor_type:
        evidence["/sys/hypervisor/type"] = ev.hypervisor_type
        kinds.append(ev.hypervisor_type)
    # signs that name no monitor: the CPU flag, and virtio functions
    anonymous = ev.cpu_flags is not None and "hypervisor" in ev.cpu_flags
    if anonymous:
        evidence["cpu flag"] = "hypervisor (/proc/cpuinfo)"
    if ev.virtio_functions:
        evidence["virtio PCI functions"] = ", ".join(ev.virtio_functions)
        # some hardware (SmartNICs emulating virtio) shows vendor 1af4 on bare metal too: only when the CPU flags
        # could not be read does it decide
        anonymous = anonymous or ev.cpu_flags is None
    read_something = ev.cpu_flags is not None or bool(ev.dmi) or ev.detect_virt is not None
    if kinds or anonymous:
        return VirtVerdict(guest=True, kind=kinds[0] if kinds else None, evidence=evidence)
    if not read_something:
        if ev.unreadable:
            evidence["unreadable"] = ", ".join(ev.unreadable)
        return VirtVerdict(guest=None, kind=None, evidence=evidence)
    if ev.dmi:
        evidence.update({f"dmi {k}": v for k, v in ev.dmi.items() if k in ("sys_vendor", "product_name")})
    if ev.cpu_flags is not None:
        evidence["cpu flag"] = "no hypervisor flag (/proc/cpuinfo)"
    return VirtVerdict(guest=False, kind=None, evidence=evidence)


def _virtio_functions(host: Host) -> tuple[str, ...]:
    try:
        buses = host.listdir(paths.PCI_DEVICES_DIR)
    except (MissingError, NotRecordedError):
        return ()
    found = []
    for bus in buses:
        try:
            vendor = host.read_text(f"{paths.PCI_DEVICES_DIR}/{bus}/vendor").strip().lower()
        except (MissingError, NotRecordedError):
            continue
        if vendor == f"0x{VIRTIO_VENDOR}":
            found.append(bus)
    return tuple(sorted(found))


def gather(host: Host) -> VirtEvidence:
    """Return what ``host`` shows of virtualisation. Never raises: what cannot be read is left out."""
    unreadable: list[str] = []
    cpuinfo = read_text_noting(host, CPUINFO, unreadable)
    dmi: dict[str, str] = {}
    for name in DMI_FIELDS:
        value = read_text_noting(host, f"{DMI_DIR}/{name}", unreadable)
        if value is not None and value.strip():
            dmi[name] = value.strip()
    hv = read_text_noting(host, HYPERVISOR_TYPE, unreadable)
    detect: str | None = None
    try:
        if host.which(DETECT_VIRT[0]) is not None:
            result = host.run(list(DETECT_VIRT), timeout=10)
            # exit 0 with the monitor's id, or exit 1 with "none" on bare metal
            if not result.missing and result.stdout.strip():
                detect = result.stdout.strip().splitlines()[0]
    except (MissingError, NotRecordedError):
        unreadable.append(" ".join(DETECT_VIRT))
    return VirtEvidence(
        cpu_flags=parse_cpu_flags(cpuinfo) if cpuinfo is not None else None,
        dmi=dmi,
        hypervisor_type=hv.strip() or None if hv is not None else None,
        detect_virt=detect,
        virtio_functions=_virtio_functions(host),
        unreadable=tuple(unreadable),
    )
