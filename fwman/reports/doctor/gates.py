"""Doctor gates that real multi-GPU boxes hit beyond the design notes' chain: running in a VM, PCIe ACS on the path
between GPUs, and a slot narrower (or slower) than the card.

Each gate is split in two: ``gather_*`` reads the host once (through the Host, into plain data) and
``*_findings`` is pure over that data, so tests feed it any shape of input. ``check_*`` joins them for the chain
in :mod:`fwman.reports.doctor.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.findings import Finding, Severity
from fwman.gpu.acs import AcsReading, AcsState, bit_meanings, bit_names, parse_acs
from fwman.gpu.card import Card
from fwman.gpu.config_space import parse_config_space
from fwman.gpu.pci_path import bridge_dir, crossed_bridges, device_path, upstream_bridge
from fwman.gpu.sysfs import parse_int, parse_link_speed
from fwman.host.base import Host
from fwman.platform.virt import VirtVerdict, gather, judge
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
ACS_FIX = (
    "turn ACS off in the firmware setup where the board has a switch for it (often under PCIe/IIO or AMD CBS "
    "settings, named 'ACS Enable' or 'PCIe ACS'); otherwise owners clear the redirect bits at boot, e.g. "
    "`setpci -s <port> ECAP_ACS+0x6.w=0000` for each port on the path (NCCL troubleshooting guide, "
    "'PCI Access Control Services'), or boot with `pci=disable_acs_redir=<port>`. Caveat: ACS is what keeps "
    "devices passed to VMs isolated from each other (it shapes the IOMMU groups); on a host that passes devices "
    "to VMs, clear it only on the ports between the GPUs the host itself uses"
)


# -- running inside a VM ------------------------------------------------------------------------------------------
def vm_findings(verdict: VirtVerdict, gpus: int) -> list[Finding]:
    """Return the "running inside a VM" finding: warn in a multi-GPU guest, info with one GPU, ok on bare metal."""
    evidence = dict(verdict.evidence)
    if verdict.guest is None:
        return [
            Finding(
                id="platform.vm",
                severity=Severity.INFO,
                message="could not tell whether this is a VM guest (no /proc/cpuinfo, DMI or systemd-detect-virt "
                "readable)",
                evidence=evidence,
            )
        ]
    if not verdict.guest:
        return [Finding(id="platform.vm", severity=Severity.OK, message="not a VM guest", evidence=evidence)]
    what = verdict.describe()
    return [
        Finding(
            id="platform.vm",
            severity=Severity.WARN if gpus >= 2 else Severity.INFO,
            message=f"running inside {what}: {VM_CONSEQUENCES}",
            evidence=evidence,
            fix=VM_FIX,
        )
    ]


def virt_verdict(facts: Facts) -> VirtVerdict:
    """Return (once per doctor run) whether the host is a VM guest."""
    verdict: VirtVerdict = facts._once("virt", lambda: judge(gather(facts.host)))
    return verdict


def check_vm(host: Host, facts: Facts) -> list[Finding]:
    """Return whether the doctor runs inside a VM guest, first in the chain (it changes how the rest reads)."""
    return vm_findings(virt_verdict(facts), len(facts.cards))


# -- ACS on the path between GPUs -----------------------------------------------------------------------------------
@dataclass
class AcsFacts:
    """Per GPU pair the bridges between them; per bridge its ACS reading (or why it could not be read)."""

    pairs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    readings: dict[str, AcsReading] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # bridge or GPU -> what could not be read
    guest: bool = False


def gather_acs(host: Host, cards: list[Card], guest: bool = False) -> AcsFacts:
    """Return the bridges between every pair of ``cards`` and each bridge's ACS reading. Never raises."""
    out = AcsFacts(guest=guest)
    where: dict[str, str] = {}
    for c in cards:
        try:
            where[c.bus_id] = device_path(host, c.bus_id)
        except (MissingError, NotRecordedError) as e:
            out.problems[c.bus_id] = e.message
    buses = sorted(where)
    dirs: dict[str, str] = {}
    for i, a in enumerate(buses):
        for b in buses[i + 1 :]:
            crossed = crossed_bridges(where[a], where[b])
            out.pairs[(a, b)] = crossed
            for bridge in crossed:
                d = bridge_dir(where[a], bridge) or bridge_dir(where[b], bridge)
                if d:
                    dirs[bridge] = d
    for bridge, d in sorted(dirs.items()):
        try:
            out.readings[bridge] = parse_acs(host.read_bytes(f"{d}/config"))
        except (MissingError, NotRecordedError, ParseError) as e:
            out.problems[bridge] = e.message
    return out


def acs_findings(acs: AcsFacts) -> list[Finding]:
    """Return the ACS findings: each port with Request/Completion Redirect on a GPU pair's path, ports that
    could not be read (not root: 64 bytes of config space), and an ok line when no path has redirect on."""
    out: list[Finding] = []
    if not acs.pairs:
        return [Finding(id="pcie.acs", severity=Severity.INFO, message="fewer than two GPUs: no path between GPUs")]
    users: dict[str, list[str]] = {}
    for (a, b), bridges in acs.pairs.items():
        for bridge in bridges:
            users.setdefault(bridge, []).append(f"{a} <-> {b}")
    redirecting = [b for b in sorted(users) if (r := acs.readings.get(b)) is not None and r.redirect]
    if redirecting:
        bits = 0
        for b in redirecting:
            bits |= acs.readings[b].redirect
        pairs = sorted({p for b in redirecting for p in users[b]})
        evidence = {
            b: f"{'+'.join(bit_names(acs.readings[b].redirect))} ({acs.readings[b].describe()})" for b in redirecting
        }
        evidence["pairs"] = ", ".join(pairs)
        out.append(
            Finding(
                id="pcie.acs",
                severity=Severity.WARN,
                message=f"ACS redirects peer-to-peer traffic to the root complex on {len(redirecting)} "
                f"port{'s' if len(redirecting) > 1 else ''} between the GPUs ({', '.join(redirecting)}: "
                f"{' and '.join(bit_meanings(bits))} on): {len(pairs)} of {len(acs.pairs)} GPU pairs cross one, so "
                "their P2P goes up through the root complex and the IOMMU (slower, or a hang with the P2P forks); "
                "Linux sets these bits when an IOMMU driver is active",
                evidence=evidence,
                fix=ACS_FIX,
            )
        )
    unreadable = sorted(b for b in users if (r := acs.readings.get(b)) is not None and r.state is AcsState.UNREADABLE)
    if unreadable:
        sizes = sorted({acs.readings[b].config_bytes for b in unreadable})
        out.append(
            Finding(
                id="pcie.acs",
                severity=Severity.INFO,
                message=f"could not read ACS on {', '.join(unreadable)}: only {'/'.join(map(str, sizes))} bytes of "
                "config space are readable (the ACS capability lies beyond 256; run fwman doctor as root)",
                evidence={"ports": ", ".join(unreadable)},
                fix="sudo fwman doctor",
            )
        )
    for name, why in sorted(acs.problems.items()):
        out.append(
            Finding(id="pcie.acs", severity=Severity.INFO, message=f"could not read the PCI path of {name}: {why}")
        )
    direct = sorted(pair for pair, bridges in acs.pairs.items() if not bridges)
    clear = sorted(
        b for b in users if (r := acs.readings.get(b)) is not None and r.state is not AcsState.UNREADABLE
        and r.redirect == 0
    )  # fmt: skip
    if not any(f.severity is Severity.WARN for f in out) and not unreadable and not acs.problems:
        if clear:
            absent = [b for b in clear if acs.readings[b].state is AcsState.ABSENT]
            present = [b for b in clear if b not in absent]
            parts = []
            if present:
                parts.append(f"ACS without redirect on {', '.join(present)}")
            if absent:
                parts.append(f"no ACS capability on {', '.join(absent)}")
            out.append(
                Finding(
                    id="pcie.acs",
                    severity=Severity.OK,
                    message=f"no ACS redirect on the ports between the GPUs ({'; '.join(parts)})",
                )
            )
        elif direct:
            out.append(
                Finding(
                    id="pcie.acs",
                    severity=Severity.OK,
                    message="no PCI bridge between the GPUs in this tree (they share a root bus): no ACS port to "
                    "redirect them",
                )
            )
    if acs.guest:
        out.append(
            Finding(
                id="pcie.acs",
                severity=Severity.INFO,
                message="in a VM guest the ports above are emulated: the ACS that decides P2P is on the host's "
                "ports (run fwman doctor there)",
            )
        )
    return out


def check_acs(host: Host, facts: Facts) -> list[Finding]:
    """Return ACS redirect findings for the ports between every GPU pair."""
    try:
        guest = virt_verdict(facts).guest is True
    except FwmanError:
        guest = False
    return acs_findings(gather_acs(host, facts.cards, guest))


# -- slot width versus link training ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotFacts:
    """One card's link and the link capability of the port above it (None when unknown)."""

    bus_id: str
    card: Card
    port: str | None = None
    port_max_width: int | None = None
    port_max_speed_gts: float | None = None
    problem: str | None = None


def _port_capability(host: Host, port_dir: str) -> tuple[int | None, float | None]:
    """Return the port's maximum width and speed: sysfs (readable by anyone), else its config space."""
    width = speed = None
    try:
        width = parse_int(host.read_text(f"{port_dir}/max_link_width"), "max_link_width") or None
        speed = parse_link_speed(host.read_text(f"{port_dir}/max_link_speed"))
    except (MissingError, NotRecordedError, ParseError):
        pass
    if width is None or speed is None:
        try:
            cfg = parse_config_space(host.read_bytes(f"{port_dir}/config"))
            width = width or cfg.link_max_width
            speed = speed or cfg.link_max_speed_gts
        except (MissingError, NotRecordedError, ParseError):
            pass
    return width, speed


def gather_slots(host: Host, cards: list[Card]) -> list[SlotFacts]:
    """Return, for each card below its link maximum, the link capability of the port above it. Never raises."""
    out = []
    for c in cards:
        link = c.link
        if not link.downtrained:
            continue
        try:
            path = device_path(host, c.bus_id)
        except (MissingError, NotRecordedError) as e:
            out.append(SlotFacts(c.bus_id, c, problem=e.message))
            continue
        port = upstream_bridge(path)
        d = bridge_dir(path, port) if port else None
        if port is None or d is None:
            out.append(SlotFacts(c.bus_id, c, problem="the card sits on a root bus: no port above it to read"))
            continue
        width, speed = _port_capability(host, d)
        out.append(SlotFacts(c.bus_id, c, port, width, speed))
    return out


def _gen(speed: float | None) -> str:
    gens = {2.5: "Gen1", 5.0: "Gen2", 8.0: "Gen3", 16.0: "Gen4", 32.0: "Gen5", 64.0: "Gen6"}
    return f"{speed:g} GT/s ({gens.get(speed or 0, '?')})" if speed is not None else "? GT/s"


def slot_findings(slots: list[SlotFacts], cards: int, guest: bool = False) -> list[Finding]:
    """Return, per card below its maximum, whether the slot caps it ("the slot is x4") or the link trained down."""
    out: list[Finding] = []
    emulated = " (in a VM guest this port is emulated: read the slot on the host)" if guest else ""
    for s in slots:
        link = s.card.link
        ev = {
            "bus_id": s.bus_id,
            "card_link": f"{_gen(link.current_speed_gts)} x{link.current_width} of {_gen(link.max_speed_gts)} "
            f"x{link.max_width}",
        }
        if s.problem or (s.port_max_width is None and s.port_max_speed_gts is None):
            out.append(
                Finding(
                    id="pcie.slot",
                    severity=Severity.INFO,
                    message=f"{s.bus_id}: could not read the link capability of the port above it "
                    f"({s.problem or 'neither sysfs nor config space readable'}); cannot tell a narrow slot from "
                    "a link that trained down",
                    evidence=ev,
                )
            )
            continue
        ev.update({"port": s.port or "?", "port_capability": f"{_gen(s.port_max_speed_gts)} x{s.port_max_width}"})
        narrow = link.current_width is not None and link.max_width is not None and link.current_width < link.max_width
        if narrow and s.port_max_width is not None and s.port_max_width < (link.max_width or 0):
            out.append(
                Finding(
                    id="pcie.slot",
                    severity=Severity.WARN,
                    message=f"{s.bus_id}: the slot is x{s.port_max_width} (port {s.port} supports at most "
                    f"x{s.port_max_width}; the card x{link.max_width}): no reseat changes that{emulated}",
                    evidence=ev,
                    fix="move the card to a CPU-attached x16 slot (the board manual's block diagram says which "
                    "slots are x16 from the CPU; some share lanes with M.2 or other slots)",
                )
            )
        elif narrow:
            out.append(
                Finding(
                    id="pcie.slot",
                    severity=Severity.WARN,
                    message=f"{s.bus_id}: the link trained down to x{link.current_width} in a slot whose port "
                    f"supports x{s.port_max_width}{emulated}",
                    evidence=ev,
                    fix="reseat the card; replace or remove the riser; in the firmware setup set the slot's PCIe "
                    "generation explicitly (risers that fail at Gen4 often train narrower) and check lane "
                    "bifurcation is x16 for that slot",
                )
            )
        slow = (
            link.current_speed_gts is not None
            and link.max_speed_gts is not None
            and link.current_speed_gts < link.max_speed_gts
        )
        if slow and s.port_max_speed_gts is not None and s.port_max_speed_gts < (link.max_speed_gts or 0):
            out.append(
                Finding(
                    id="pcie.slot",
                    severity=Severity.WARN,
                    message=f"{s.bus_id}: the slot's port {s.port} supports at most {_gen(s.port_max_speed_gts)} "
                    f"(the card {_gen(link.max_speed_gts)}): the slot caps the speed{emulated}",
                    evidence=ev,
                    fix="move the card to a slot whose port runs at the card's generation (CPU-attached slots "
                    "usually do; chipset slots often do not), or accept the lower speed",
                )
            )
        elif slow and not narrow:
            out.append(
                Finding(
                    id="pcie.slot",
                    severity=Severity.INFO,
                    message=f"{s.bus_id}: the port supports {_gen(s.port_max_speed_gts)}, so a lower speed is link "
                    f"training or idle power saving, not the slot{emulated}",
                    evidence=ev,
                    fix="check under load (`nvidia-smi -q -d PCIE`); still low means riser, reseat, or the "
                    "firmware setup's PCIe generation setting",
                )
            )
    if not slots:
        out.append(
            Finding(
                id="pcie.slot",
                severity=Severity.OK,
                message=f"no card below its link maximum ({cards} checked): no slot limits a link",
            )
        )
    return out


def check_slots(host: Host, facts: Facts) -> list[Finding]:
    """Return slot-versus-training findings for every card whose link is below its maximum."""
    cards = facts.cards
    try:
        guest = virt_verdict(facts).guest is True
    except FwmanError:
        guest = False
    return slot_findings(gather_slots(host, cards), len(cards), guest)


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
        return virt_verdict(facts).guest is True
    except FwmanError:
        return False
