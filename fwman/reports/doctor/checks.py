"""The peer-to-peer chain, one small check per link: ``check_x(host, facts) -> list[Finding]``.

The order of :data:`CHECKS` is the order of the chain in the design notes (host-state.md, "Peer-to-peer
chain"): firmware, firmware setup (BAR1), driver, what the driver reports, IOMMU (and what passthrough would
cost), topology and NCCL, vLLM, PCIe links, power. A check raises the FwmanError of what it could not read; the
runner (:mod:`fwman.reports.doctor.run`) turns that into a "could not check" finding of severity info.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwman.core import paths
from fwman.core.errors import FwmanError, NotRecordedError
from fwman.core.findings import Finding, Severity
from fwman.core.units import human_bytes
from fwman.gpu.card import Card
from fwman.host.base import Host
from fwman.reports.doctor.facts import Facts, describe_error
from fwman.reports.doctor.parsers import (
    AT_CPU,
    disables_custom_all_reduce,
    hostpci_lines,
    mentions_vllm,
    nccl_level_covers,
    nccl_level_needed,
    parse_cmdline,
    parse_env_file,
    parse_lxc_environment,
    parse_unit_environment,
)

#: BAR1 of a card without Resizable BAR (or with it switched off in firmware setup)
LEGACY_BAR1 = 256 * 1024 * 1024
FIRMWARE_SETUP_FIX = (
    "in the firmware setup (BIOS/UEFI) turn on 'Above 4G Decoding' and 'Re-Size BAR Support' (many boards also "
    "want CSM off for it); `systemctl reboot --firmware-setup` reboots straight into setup when "
    "the remote console misses the prompt"
)
_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
P2P_MEANING = {
    "CNS": "chipset not supported: the stock GeForce driver's answer",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "U": "unknown",
}


def _gib(n: int | None) -> str:
    return human_bytes(n)


def _buses(cards: list[Card]) -> str:
    return ", ".join(c.bus_id for c in cards)


def _gpu_pairs(names: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for a in names for b in names if a != b]


# -- 0. the GPUs --------------------------------------------------------------------------------------------------
def check_gpus(host: Host, facts: Facts) -> list[Finding]:
    """Return how many GPUs there are (peer-to-peer needs two) and whether nvidia-smi could be used."""
    inv = facts.inventory()
    cards = inv.cards
    names = sorted({c.name or f"{c.vendor_id}:{c.device_id}" for c in cards})
    out = []
    if len(cards) >= 2:
        out.append(
            Finding(
                id="gpus.count",
                severity=Severity.OK,
                message=f"{len(cards)} GPUs: {', '.join(names)} ({_buses(cards)})",
                evidence={"gpus": str(len(cards))},
            )
        )
    else:
        out.append(
            Finding(
                id="gpus.count",
                severity=Severity.INFO,
                message=f"one GPU ({', '.join(names)} at {_buses(cards)}): peer-to-peer between GPUs does not "
                "apply; the chain below is shown for what it says about this card",
                evidence={"gpus": str(len(cards))},
            )
        )
    if inv.smi_problem:
        out.append(
            Finding(
                id="gpus.nvidia-smi",
                severity=Severity.INFO,
                message=f"could not check with nvidia-smi: {inv.smi_problem} (VRAM, power limits unknown)",
                fix="load the NVIDIA driver and install its user space (nvidia-smi)",
            )
        )
    return out


# -- 1. firmware offers a large BAR1 ----------------------------------------------------------------------------
def _offers_large_bar(card: Card) -> bool | None:
    """Return True when the firmware offers a BAR1 that covers VRAM (or, VRAM unknown, more than 256 MiB)."""
    if card.bar1_covers_vram:
        return True  # BAR1 is already large: the firmware offered it
    offered = card.max_rebar_bytes
    if offered is not None:
        return offered >= card.vram_bytes if card.vram_bytes is not None else offered > LEGACY_BAR1
    hidden = any(u.startswith(("config", "extended config space")) for u in card.unreadable)
    return None if hidden else False


def _catalog_fix(facts: Facts, sample: Card) -> tuple[str, dict[str, str]]:
    """Return the fix for a card whose firmware offers no large BAR1: the catalog's image, if it knows one."""
    try:
        catalog = facts.catalog()
    except FwmanError as e:
        return (
            "flash a Resizable-BAR firmware for this board: `fwman upgrade --dry-run` plans it "
            f"(could not check the catalog: {describe_error(e)})",
            {"catalog": "unavailable"},
        )
    board = catalog.board_for(
        sample.vendor_id, sample.device_id, sample.subsystem_vendor_id, sample.subsystem_device_id
    )
    if board is None:
        return (
            f"the catalog has no board {sample.vendor_id}:{sample.device_id}:{sample.subsystem}: fwman never guesses "
            "a firmware; ask the card's maker for a Resizable-BAR image (and `fwman catalog update`)",
            {"catalog": "no board"},
        )
    target = board.recommended()
    if target is None or target.rebar is False:
        return (
            f"the catalog lists no Resizable-BAR image for {board.subsystem} ({board.board.name})",
            {"catalog": board.subsystem},
        )
    caveat = " (unverified: supply the vendor MD5 before flashing)" if not target.has_hash else ""
    return (
        f"upgrade to {target.version}, the catalog's Resizable-BAR image for {board.subsystem} "
        f"({board.board.name}){caveat}: `fwman upgrade --dry-run`, then `fwman backup` and `fwman flash`",
        {"catalog": f"{board.subsystem}/{target.version}"},
    )


def check_firmware(host: Host, facts: Facts) -> list[Finding]:
    """Return whether each card's firmware offers a BAR1 as large as its VRAM (else the catalog upgrade)."""
    good, unknown = [], []
    bad: dict[tuple[str, str | None], list[Card]] = {}
    for card in facts.cards:
        verdict = _offers_large_bar(card)
        if verdict is True:
            good.append(card)
        elif verdict is None:
            unknown.append(card)
        else:
            bad.setdefault((card.subsystem, card.vbios_version), []).append(card)
    out = []
    for (subsystem, vbios), cards in bad.items():
        offered = cards[0].max_rebar_bytes
        cap = f"offers BAR1 up to {_gib(offered)}" if offered else f"has no Resizable BAR (BAR1 {_gib(LEGACY_BAR1)})"
        fix, evidence = _catalog_fix(facts, cards[0])
        count = "1 card needs" if len(cards) == 1 else f"{len(cards)} cards need"
        out.append(
            Finding(
                id="firmware.rebar",
                severity=Severity.BLOCK,
                message=f"{count} firmware with Resizable BAR: {_buses(cards)} ({subsystem} on "
                f"{vbios or 'unknown firmware'} {cap})",
                evidence={"cards": _buses(cards), "subsystem": subsystem, "vbios": vbios or "unknown", **evidence},
                fix=fix,
            )
        )
    if unknown:
        out.append(
            Finding(
                id="firmware.rebar",
                severity=Severity.INFO,
                message=f"could not check the BAR sizes the firmware offers on {_buses(unknown)}: the Resizable BAR "
                "capability is not readable (extended config space needs root)",
                fix="run fwman doctor as root",
            )
        )
    if good:
        sizes = ", ".join(sorted({_gib(c.max_rebar_bytes or c.bar1_bytes) for c in good}))
        out.append(
            Finding(
                id="firmware.rebar",
                severity=Severity.OK,
                message=f"firmware offers a large BAR1 on {_buses(good)} (up to {sizes})",
                evidence={"cards": _buses(good)},
            )
        )
    return out


# -- 2. firmware setup: BAR1 covers VRAM ------------------------------------------------------------------------
def check_bar1(host: Host, facts: Facts) -> list[Finding]:
    """Return whether BAR1 covers VRAM on every card (else: the firmware-setup settings)."""
    small = [c for c in facts.cards if c.bar1_covers_vram is False]
    unknown = [c for c in facts.cards if c.bar1_covers_vram is None]
    good = [c for c in facts.cards if c.bar1_covers_vram]
    out = []
    if small:
        sizes = sorted({f"{_gib(c.bar1_bytes)} of {_gib(c.vram_bytes)} VRAM" for c in small})
        need_fw = [c for c in small if _offers_large_bar(c) is False]
        fix = FIRMWARE_SETUP_FIX
        if need_fw:
            fix += f"; {_buses(need_fw)} first need the Resizable-BAR firmware above"
        out.append(
            Finding(
                id="bar1.size",
                severity=Severity.BLOCK,
                message=f"BAR1 not enlarged on {len(small)} card{'s' if len(small) > 1 else ''}: "
                f"{_buses(small)} ({'; '.join(sizes)})",
                evidence={c.bus_id: f"BAR1 {_gib(c.bar1_bytes)}, VRAM {_gib(c.vram_bytes)}" for c in small},
                fix=fix,
            )
        )
    if unknown:
        out.append(
            Finding(
                id="bar1.size",
                severity=Severity.INFO,
                message=f"could not check BAR1 against VRAM on {_buses(unknown)}: "
                + "; ".join(f"BAR1 {_gib(c.bar1_bytes)}, VRAM {_gib(c.vram_bytes)}" for c in unknown),
                fix="load the NVIDIA driver so nvidia-smi reports the VRAM size",
            )
        )
    if good:
        out.append(
            Finding(
                id="bar1.size",
                severity=Severity.OK,
                message=f"BAR1 covers VRAM on {_buses(good)} ("
                + ", ".join(sorted({f"{_gib(c.bar1_bytes)} for {_gib(c.vram_bytes)}" for c in good}))
                + ")",
            )
        )
    return out


# -- 3. driver: the patched fork, at the version of the user space -----------------------------------------------
def _p2p_cells(facts: Facts) -> list[str] | None:
    """Return the off-diagonal ``topo -p2p r`` cells, None when they cannot be read."""
    try:
        m = facts.p2p_read()
    except FwmanError:
        return None
    return [m.cell(a, b) for a, b in _gpu_pairs(m.gpus)]


def check_driver(host: Host, facts: Facts) -> list[Finding]:
    """Return whether the loaded module is the P2P fork, whether user space matches it, whether a branch exists."""
    audit = facts.audit()
    loaded = audit.loaded
    out: list[Finding] = []
    cells = _p2p_cells(facts)
    all_ok = bool(cells) and all(c == "OK" for c in cells or [])
    cns = sum(1 for c in cells or [] if c == "CNS")
    p2p_note = f" (topo -p2p r: CNS for {cns} of {len(cells or [])} pairs)" if cns else ""
    if loaded is None or not loaded.version:
        out.append(
            Finding(
                id="driver.fork",
                severity=Severity.BLOCK,
                message="no NVIDIA kernel module is loaded",
                fix="load the patched fork's module (modprobe nvidia) or install it for this kernel",
            )
        )
        return out
    version = loaded.version
    evidence = {"version": version, "flavour": loaded.flavour or "unknown", "proc": loaded.proc_version or ""}
    fork_fix = (
        f"install the P2P fork's open kernel module at exactly {version} (branch {version}-p2p; "
        f"`fwman driver branches --version {version}` lists who carries it), or move host and every container "
        "to a version that has a branch"
    )
    running = [m for m in audit.modules if m.kernel == audit.running_kernel and m.name == "nvidia"]
    origin = running[0].origin if running else "unknown"
    if loaded.flavour == "proprietary":
        out.append(
            Finding(
                id="driver.fork",
                severity=Severity.BLOCK,
                message=f"stock proprietary driver {version}: the P2P forks patch NVIDIA's open kernel module"
                + p2p_note,
                evidence=evidence,
                fix=fork_fix,
            )
        )
    elif origin == "patched":
        out.append(
            Finding(
                id="driver.fork",
                severity=Severity.OK,
                message=f"patched fork module {version} (fwman's install manifest matches)",
                evidence=evidence,
            )
        )
    elif all_ok:
        out.append(
            Finding(
                id="driver.fork",
                severity=Severity.OK,
                message=f"open kernel module {version}; topo -p2p r reads OK for every pair (fwman did not install "
                "it, so which build it is stays unknown)",
                evidence=evidence,
            )
        )
    else:
        out.append(
            Finding(
                id="driver.fork",
                severity=Severity.BLOCK if cns else Severity.WARN,
                message=f"{loaded.flavour or 'unknown'} kernel module {version} is not known to be the P2P fork "
                + (
                    "(its hash differs from fwman's install manifest: something, DKMS for one, replaced it)"
                    if origin == "not-fwman"
                    else "(no fwman manifest)"
                )
                + p2p_note,
                evidence=evidence,
                fix=fork_fix,
            )
        )
    mismatches = [r for r in audit.rows if r.status == "mismatch"]
    if mismatches:
        first = mismatches[0]
        out.append(
            Finding(
                id="driver.userspace",
                severity=Severity.WARN,
                message=f"kernel module {version} and {len(mismatches)} component"
                f"{'s' if len(mismatches) > 1 else ''} differ: first {first.component} "
                f"{first.version or '(none)'} at {first.where}" + (f" ({first.detail})" if first.detail else ""),
                evidence={r.where: f"{r.component}: {r.version or 'none'}" for r in mismatches},
                fix=(first.fix or "") + " (`fwman audit` lists every component)",
            )
        )
    else:
        out.append(
            Finding(
                id="driver.userspace",
                severity=Severity.OK,
                message=f"user space matches kernel module {version} wherever it could be read (`fwman audit`)",
            )
        )
    out.append(_branch_finding(audit.p2p))
    return out


def _branch_finding(p2p: Any) -> Finding:
    try:
        from fwman.reports.audit.report import p2p_line

        line = p2p_line(p2p)
    except ImportError:  # pragma: no cover - the audit module ships with doctor's callers
        line = f"P2P branch {p2p.version}-p2p: {p2p.status}"
    if p2p.status == "available":
        return Finding(id="driver.branch", severity=Severity.OK, message=line)
    if p2p.status == "none":
        return Finding(
            id="driver.branch",
            severity=Severity.BLOCK,
            message=line,
            fix="move host and every container to a version with a -p2p branch (`fwman driver branches`)",
        )
    return Finding(
        id="driver.branch",
        severity=Severity.INFO,
        message=line,
        fix="`fwman driver branches` lists the forks (needs the network once; cached after)",
    )


# -- 4. what the driver says: topo -p2p r ------------------------------------------------------------------------
def check_p2p_topo(host: Host, facts: Facts) -> list[Finding]:
    """Return what ``nvidia-smi topo -p2p r`` says for every pair of GPUs (OK rather than CNS)."""
    m = facts.p2p_read()
    pairs = _gpu_pairs(m.gpus)
    if not pairs:
        return [
            Finding(
                id="p2p.topo",
                severity=Severity.INFO,
                message=f"topo -p2p r lists {len(m.gpus)} GPU: no pair to read",
            )
        ]
    counts: dict[str, int] = {}
    for a, b in pairs:
        counts[m.cell(a, b)] = counts.get(m.cell(a, b), 0) + 1
    bad = {k: v for k, v in counts.items() if k != "OK"}
    if not bad:
        return [Finding(id="p2p.topo", severity=Severity.OK, message=f"topo -p2p r: OK for all {len(pairs)} pairs")]
    parts = [f"{k} for {v} of {len(pairs)} pairs ({P2P_MEANING.get(k, k)})" for k, v in sorted(bad.items())]
    fix = (
        "load the patched fork module (driver step above); CNS disappears with it"
        if "CNS" in bad
        else "check the steps above (IOMMU, BAR1); TNS/NS pairs may be behind a bridge that blocks peer traffic"
    )
    return [
        Finding(
            id="p2p.topo",
            severity=Severity.BLOCK,
            message="topo -p2p r: " + "; ".join(parts),
            evidence={f"{a}->{b}": m.cell(a, b) for a, b in pairs},
            fix=fix,
        )
    ]


# -- 5. IOMMU ----------------------------------------------------------------------------------------------------
def iommu_mode(facts: Facts) -> tuple[str, dict[str, str]]:
    """Return (mode, evidence): mode is translated, passthrough, off, not-visible or unknown."""
    cmdline = parse_cmdline(facts.text("/proc/cmdline") or "")
    evidence = {"cmdline": " ".join(cmdline.tokens) or "(no IOMMU parameter)"}
    groups = facts.listing(paths.IOMMU_GROUPS_DIR) or []
    if not groups:
        evidence["iommu_groups"] = "none"
        return ("off" if cmdline.disabled else "not-visible"), evidence
    types: dict[str, str] = {}
    for card in facts.cards:
        if card.iommu_group is None:
            continue
        path = f"{paths.IOMMU_GROUPS_DIR}/{card.iommu_group}/type"
        text = facts.text(path)
        types[card.bus_id] = text.strip() if text else "unknown"
    evidence.update({f"group of {bus}": t for bus, t in types.items()})
    kinds = set(types.values())
    if kinds & {"DMA", "DMA-FQ"}:
        return "translated", evidence
    if kinds == {"identity"}:
        return "passthrough", evidence
    if not types:
        evidence["gpu_groups"] = "the GPUs are in no IOMMU group"
        return ("passthrough" if cmdline.passthrough else "unknown"), evidence
    return "unknown", evidence


def check_iommu(host: Host, facts: Facts) -> list[Finding]:
    """Return the IOMMU mode of the GPUs: translation (DMA/DMA-FQ) blocks the fork's direct writes."""
    mode, evidence = iommu_mode(facts)
    if mode == "translated":
        return [
            Finding(
                id="iommu.mode",
                severity=Severity.BLOCK,
                message="IOMMU translated for the GPUs ("
                + ", ".join(sorted({v for k, v in evidence.items() if k.startswith("group of")}))
                + f"; command line: {evidence['cmdline']}): the fork's direct writes fail under translation",
                evidence=evidence,
                fix="add `iommu=pt` to the kernel command line (keep `amd_iommu=on` on AMD): GRUB: "
                "GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then `update-grub`; Proxmox booting with "
                "proxmox-boot-tool: /etc/kernel/cmdline, then `proxmox-boot-tool refresh`; reboot. Read the VM "
                "finding below first",
            )
        ]
    if mode == "passthrough":
        return [
            Finding(
                id="iommu.mode",
                severity=Severity.OK,
                message=f"IOMMU in passthrough for the GPUs (command line: {evidence['cmdline']})",
                evidence=evidence,
            )
        ]
    if mode == "off":
        return [
            Finding(
                id="iommu.mode",
                severity=Severity.OK,
                message=f"IOMMU off (command line: {evidence['cmdline']}; no IOMMU groups)",
                evidence=evidence,
            )
        ]
    if mode == "not-visible":
        return [
            Finding(
                id="iommu.mode",
                severity=Severity.INFO,
                message=f"IOMMU groups not visible (/sys/kernel/iommu_groups is empty; command line: "
                f"{evidence['cmdline']}): no IOMMU translates this kernel's DMA (off, or a VM without a virtual "
                "IOMMU)",
                evidence=evidence,
            )
        ]
    return [
        Finding(
            id="iommu.mode",
            severity=Severity.INFO,
            message="could not tell the IOMMU mode of the GPUs ("
            + ", ".join(f"{k}: {v}" for k, v in evidence.items())
            + ")",
            evidence=evidence,
        )
    ]


def passthrough_devices(facts: Facts) -> tuple[list[str], list[str], list[str]]:
    """Return (devices bound to vfio-pci, Proxmox ``hostpci`` lines as ``VM <id>: <line>``, what was unreadable)."""
    unreadable: list[str] = []
    vfio: list[str] = []
    try:
        listing = facts.listing(paths.VFIO_PCI_DRIVER_DIR)
        vfio = [n for n in listing or [] if _BUS_ID.match(n)]
    except NotRecordedError:
        modules = facts.text("/proc/modules") or ""
        if re.search(r"^vfio_pci\s", modules, re.MULTILINE):
            unreadable.append(f"{paths.VFIO_PCI_DRIVER_DIR} (vfio_pci is loaded)")
    hostpci: list[str] = []
    for name in facts.listing(paths.PVE_QEMU_DIR) or []:
        if not name.endswith(".conf"):
            continue
        try:
            text = facts.text(posixpath.join(paths.PVE_QEMU_DIR, name)) or ""
        except FwmanError as e:
            unreadable.append(f"{paths.PVE_QEMU_DIR}/{name} ({describe_error(e)})")
            continue
        hostpci += [f"VM {name.removesuffix('.conf')}: {line}" for line in hostpci_lines(text)]
    return vfio, hostpci, unreadable


PASSTHROUGH_COST = (
    "with iommu=pt, VFIO keeps translating the devices given to VMs, but every device left to host drivers "
    "(the GPUs, NICs, disk controllers) can then reach all host memory by DMA, the VMs' memory included: a faulty "
    "or compromised host device or driver is no longer contained"
)


def check_vm_isolation(host: Host, facts: Facts) -> list[Finding]:
    """Return whether the host passes devices to VMs, and so what IOMMU passthrough costs here."""
    vfio, hostpci, unreadable = passthrough_devices(facts)
    try:
        mode, _ = iommu_mode(facts)
    except FwmanError:
        mode = "unknown"
    if vfio or hostpci:
        where = "; ".join([*(f"vfio-pci: {b}" for b in vfio), *hostpci])
        recommending = mode == "translated"
        return [
            Finding(
                id="iommu.vms",
                severity=Severity.WARN if recommending else Severity.INFO,
                message=f"this host passes devices to VMs ({where}): "
                + (
                    "before switching to iommu=pt know what isolation is lost"
                    if recommending
                    else "IOMMU passthrough is already on, so this isolation is already lost"
                ),
                evidence={"vfio-pci": ", ".join(vfio) or "none", "hostpci": "; ".join(hostpci) or "none"},
                fix=PASSTHROUGH_COST,
            )
        ]
    if unreadable:
        return [
            Finding(
                id="iommu.vms",
                severity=Severity.INFO,
                message="could not check whether devices are passed to VMs: " + "; ".join(unreadable),
            )
        ]
    return [
        Finding(
            id="iommu.vms",
            severity=Severity.OK,
            message="no device is passed to a VM (no vfio-pci bound device, no Proxmox hostpci line): IOMMU "
            "passthrough costs no VM isolation here",
        )
    ]


# -- 6. topology and NCCL ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EnvSource:
    """One place a GPU workload takes its environment (and command line) from."""

    kind: str  # "env-file", "unit", "lxc", "nccl.conf"
    where: str
    env: dict[str, str]
    text: str  # the whole file: vLLM flags are looked for in it
    uses_gpu: bool = True

    @property
    def label(self) -> str:
        """Return the place for people: ``container 101 (/etc/pve/lxc/101.conf)`` or the path."""
        if self.kind == "lxc":
            return f"container {posixpath.basename(self.where).removesuffix('.conf')} ({self.where})"
        return self.where

    def fix(self, assignment: str) -> str:
        """Return how to set ``assignment`` (``NAME=VALUE``) in this place."""
        if self.kind == "lxc":
            return f"add `lxc.environment: {assignment}` to {self.where} and restart the container"
        if self.kind == "unit":
            return f"add `Environment={assignment}` under [Service] (`systemctl edit` the unit {self.where})"
        return f"add `{assignment}` to {self.where}"


def _lxc_uses_gpu(text: str) -> bool:
    try:
        from fwman.reports.audit.report import lxc_uses_gpu

        device, hook = lxc_uses_gpu(text)
        return device or hook
    except ImportError:  # pragma: no cover - audit ships with doctor
        return "/dev/nvidia" in text or "c 195:" in text


def _uncommented(text: str) -> str:
    """Return ``text`` without comment lines (``#``, ``;``): a comment that names vLLM does not run it."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", ";")))


def env_sources(facts: Facts) -> tuple[list[EnvSource], list[str]]:
    """Return the places to check (user's files, GPU containers, /etc/nccl.conf) and what could not be read."""
    host = facts.host
    out: list[EnvSource] = []
    problems: list[str] = []
    for path in facts.sources.env_files:
        try:
            text = host.read_text(path)
        except FwmanError as e:
            problems.append(f"{path}: {describe_error(e)}")
            continue
        out.append(EnvSource("env-file", path, parse_env_file(text), _uncommented(text)))
    for path in facts.sources.unit_files:
        try:
            text = host.read_text(path)
        except FwmanError as e:
            problems.append(f"{path}: {describe_error(e)}")
            continue
        env, files, _ = parse_unit_environment(text)
        for f in files:
            try:
                env = {**parse_env_file(host.read_text(f)), **env}
            except FwmanError as e:
                problems.append(f"{f} (EnvironmentFile of {path}): {describe_error(e)}")
        out.append(EnvSource("unit", path, env, _uncommented(text)))
    try:
        names = facts.listing(paths.PVE_LXC_DIR) or []
    except NotRecordedError as e:
        names = []
        problems.append(f"{paths.PVE_LXC_DIR}: {describe_error(e)}")
    for name in names:
        if not name.endswith(".conf"):
            continue
        path = posixpath.join(paths.PVE_LXC_DIR, name)
        try:
            text = facts.text(path) or ""
        except FwmanError as e:
            problems.append(f"{path}: {describe_error(e)}")
            continue
        out.append(EnvSource("lxc", path, parse_lxc_environment(text), text, uses_gpu=_lxc_uses_gpu(text)))
    try:
        nccl = facts.text(paths.NCCL_CONF)
        if nccl is not None:
            # NCCL reads /etc/nccl.conf itself: it covers processes on this host (not inside containers)
            out.append(EnvSource("nccl.conf", paths.NCCL_CONF, parse_env_file(nccl), nccl, uses_gpu=False))
    except NotRecordedError as e:
        problems.append(f"{paths.NCCL_CONF}: {describe_error(e)}")
    return out, problems


def check_nccl(host: Host, facts: Facts) -> list[Finding]:
    """Return whether NCCL will use P2P between GPUs that meet at the CPU (``NCCL_P2P_LEVEL``)."""
    topo = facts.topo()
    pairs = _gpu_pairs(topo.gpus)
    if not pairs:
        return [Finding(id="nccl.level", severity=Severity.INFO, message="topo -m lists one GPU: NCCL has no pair")]
    cells = sorted({topo.cell(a, b) for a, b in pairs})
    needed = nccl_level_needed(cells)
    if needed is None:
        return [
            Finding(
                id="nccl.level",
                severity=Severity.OK,
                message=f"GPUs meet at {', '.join(cells)} (NVLink or a shared PCIe switch): NCCL's default uses P2P",
            )
        ]
    meet = ", ".join(c for c in cells if c in AT_CPU)
    sources, problems = env_sources(facts)
    out: list[Finding] = []
    for s in sources:
        if s.env.get("NCCL_P2P_DISABLE", "").strip() == "1":
            out.append(
                Finding(
                    id="nccl.level",
                    severity=Severity.BLOCK,
                    message=f"NCCL_P2P_DISABLE=1 in {s.where}: NCCL never uses P2P there",
                    evidence={"where": s.where},
                    fix=f"remove NCCL_P2P_DISABLE from {s.where}",
                )
            )
    workloads = [s for s in sources if s.uses_gpu]
    global_conf = next((s for s in sources if s.kind == "nccl.conf" and "NCCL_P2P_LEVEL" in s.env), None)
    for s in workloads:
        value = s.env.get("NCCL_P2P_LEVEL")
        covers = nccl_level_covers(value, needed) if value is not None else False
        if covers:
            out.append(
                Finding(
                    id="nccl.level",
                    severity=Severity.OK,
                    message=f"NCCL_P2P_LEVEL={value} in {s.label}: covers GPUs meeting at {meet}",
                )
            )
        elif covers is None:
            out.append(
                Finding(
                    id="nccl.level",
                    severity=Severity.WARN,
                    message=f"NCCL_P2P_LEVEL={value} in {s.label} is not a named level; GPUs meet at {meet}",
                    fix=s.fix("NCCL_P2P_LEVEL=SYS"),
                )
            )
        else:
            what = f"NCCL_P2P_LEVEL={value} is too low" if value is not None else "NCCL_P2P_LEVEL not set"
            out.append(
                Finding(
                    id="nccl.level",
                    severity=Severity.BLOCK,
                    message=f"{what} in {s.label}: GPUs meet at {meet}, so NCCL stages through host memory "
                    "instead of P2P",
                    evidence={"where": s.where, "topology": meet, "needed": needed},
                    fix=s.fix("NCCL_P2P_LEVEL=SYS") + "; `NCCL_DEBUG=INFO` then shows P2P/CUMEM channels",
                )
            )
    if global_conf is not None:
        value = global_conf.env["NCCL_P2P_LEVEL"]
        ok = nccl_level_covers(value, needed)
        out.append(
            Finding(
                id="nccl.level",
                severity=Severity.OK if ok else Severity.WARN,
                message=f"NCCL_P2P_LEVEL={value} in {paths.NCCL_CONF} (processes on this host, not in containers)"
                + ("" if ok else f": does not cover GPUs meeting at {meet}"),
                fix=None if ok else f"set NCCL_P2P_LEVEL=SYS in {paths.NCCL_CONF}",
            )
        )
    if not workloads and global_conf is None:
        out.append(
            Finding(
                id="nccl.level",
                severity=Severity.WARN,
                message=f"GPUs meet at {meet}: NCCL needs NCCL_P2P_LEVEL=SYS, and no place that sets it was checked",
                fix="point doctor at where your workload gets its environment: `--env-file FILE` (docker/compose "
                ".env), `--unit FILE` (systemd unit); GPU containers in /etc/pve/lxc are checked by themselves",
            )
        )
    for p in problems:
        out.append(Finding(id="nccl.level", severity=Severity.INFO, message=f"could not check {p}"))
    return out


# -- 7. vLLM custom all-reduce ----------------------------------------------------------------------------------
def check_vllm(host: Host, facts: Facts) -> list[Finding]:
    """Return whether vLLM's custom all-reduce is disabled where vLLM runs over PCIe (it assumes NVLink)."""
    try:
        topo = facts.topo()
        cells = [topo.cell(a, b) for a, b in _gpu_pairs(topo.gpus)]
    except FwmanError:
        cells = []
    if cells and all(re.fullmatch(r"NV\d+", c) for c in cells):
        return [Finding(id="vllm.allreduce", severity=Severity.OK, message="GPUs are linked by NVLink")]
    sources, _ = env_sources(facts)
    # only files that hold a command line or its options: a container config names a host, not a command
    runs = [s for s in sources if s.kind in ("env-file", "unit") and mentions_vllm(s.text)]
    out = []
    for s in runs:
        if disables_custom_all_reduce(s.text):
            out.append(
                Finding(
                    id="vllm.allreduce",
                    severity=Severity.OK,
                    message=f"vLLM in {s.where} runs with --disable-custom-all-reduce",
                )
            )
        else:
            out.append(
                Finding(
                    id="vllm.allreduce",
                    severity=Severity.WARN,
                    message=f"vLLM in {s.where} runs without --disable-custom-all-reduce: its custom all-reduce "
                    "assumes NVLink, and over PCIe on 3090s it has produced wrong outputs",
                    fix=f"add --disable-custom-all-reduce to the vLLM command line in {s.where}",
                )
            )
    if not runs:
        out.append(
            Finding(
                id="vllm.allreduce",
                severity=Severity.INFO,
                message="if you serve with vLLM over PCIe, pass --disable-custom-all-reduce (its custom all-reduce "
                "assumes NVLink; on 3090s over PCIe it has produced wrong outputs)",
            )
        )
    return out


# -- 8. PCIe links ------------------------------------------------------------------------------------------------
def _link(speed: float | None, width: int | None) -> str:
    s = f"{speed:g} GT/s" if speed is not None else "? GT/s"
    return f"{s} x{width if width is not None else '?'}"


def check_links(host: Host, facts: Facts) -> list[Finding]:
    """Return the cards whose PCIe link trained below its maximum (width: a real limit; speed: maybe idle)."""
    out = []
    good, unknown = [], []
    for c in facts.cards:
        link = c.link
        now = _link(link.current_speed_gts, link.current_width)
        top = _link(link.max_speed_gts, link.max_width)
        narrow = link.current_width is not None and link.max_width is not None and link.current_width < link.max_width
        slow = (
            link.current_speed_gts is not None
            and link.max_speed_gts is not None
            and link.current_speed_gts < link.max_speed_gts
        )
        if link.downtrained is None:
            unknown.append(c)
        elif narrow:
            out.append(
                Finding(
                    id="pcie.link",
                    severity=Severity.WARN,
                    message=f"{c.bus_id}: link trained at {now} of {top}: the width caps every transfer",
                    evidence={"bus_id": c.bus_id, "current": now, "max": top},
                    fix="reseat the card or its riser, or move it to a CPU-attached x16 slot (chipset-attached "
                    "slots and some risers train narrower)",
                )
            )
        elif slow:
            out.append(
                Finding(
                    id="pcie.link",
                    severity=Severity.INFO,
                    message=f"{c.bus_id}: link at {now} of {top}: GPUs lower the link speed when idle; check under "
                    "load",
                    evidence={"bus_id": c.bus_id, "current": now, "max": top},
                    fix=f"run a workload and read `nvidia-smi -q -d PCIE -i {c.bus_id}`; still below max under load "
                    "means a riser, slot or firmware-setup PCIe generation setting limits it",
                )
            )
        else:
            good.append(c)
    if good:
        tops = ", ".join(sorted({_link(c.link.max_speed_gts, c.link.max_width) for c in good}))
        out.append(
            Finding(id="pcie.link", severity=Severity.OK, message=f"links at their maximum on {_buses(good)} ({tops})")
        )
    if unknown:
        out.append(
            Finding(
                id="pcie.link",
                severity=Severity.INFO,
                message=f"could not check the PCIe link of {_buses(unknown)} (speed/width not readable)",
            )
        )
    return out


# -- 9. power limit -------------------------------------------------------------------------------------------------
def check_power(host: Host, facts: Facts) -> list[Finding]:
    """Return the cards whose power limit is below their default."""
    out = []
    good, unknown = [], []
    for c in facts.cards:
        if c.power_limit_w is None or c.default_power_limit_w is None:
            unknown.append(c)
        elif c.power_limit_w < c.default_power_limit_w:
            out.append(
                Finding(
                    id="power.limit",
                    severity=Severity.WARN,
                    message=f"{c.bus_id}: power limit {c.power_limit_w:g} W is below the default "
                    f"{c.default_power_limit_w:g} W",
                    evidence={"bus_id": c.bus_id, "limit_w": f"{c.power_limit_w:g}"},
                    fix=f"if not on purpose: `nvidia-smi -i {c.bus_id} -pl {c.default_power_limit_w:g}` (as root; "
                    "a firmware with a lower default power limit shows here too)",
                )
            )
        else:
            good.append(c)
    if good:
        out.append(
            Finding(
                id="power.limit",
                severity=Severity.OK,
                message=f"power limit at or above default on {_buses(good)}",
            )
        )
    if unknown:
        out.append(
            Finding(
                id="power.limit",
                severity=Severity.INFO,
                message=f"could not check the power limit of {_buses(unknown)} (nvidia-smi did not report it)",
            )
        )
    return out


# -- the chain -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """One link of the chain: ``pairwise`` checks only matter between two GPUs (demoted on a one-GPU host)."""

    id: str
    title: str
    run: Callable[[Host, Facts], list[Finding]]
    pairwise: bool = False


def _gates() -> tuple[Check, ...]:
    # imported here: the gate modules import this one (iommu_mode) and Facts
    from fwman.reports.doctor.gates import check_acs, check_slots, check_vm
    from fwman.reports.doctor.verification import check_verified

    return (
        Check("platform.vm", "Running inside a VM", check_vm),
        Check("pcie.acs", "PCIe ACS on the path between GPUs", check_acs, pairwise=True),
        Check("pcie.slot", "Slot width versus link training", check_slots),
        Check("p2p.verified", "P2P verified on this configuration", check_verified),
    )


_VM, _ACS, _SLOT, _VERIFIED = _gates()

CHECKS: tuple[Check, ...] = (
    _VM,
    Check("gpus", "GPUs", check_gpus),
    Check("firmware.rebar", "Firmware offers a large BAR1", check_firmware),
    Check("bar1.size", "BAR1 covers VRAM (firmware setup)", check_bar1),
    Check("driver", "Driver: the P2P fork at the user space's version", check_driver, pairwise=True),
    Check("p2p.topo", "nvidia-smi topo -p2p r", check_p2p_topo, pairwise=True),
    Check("iommu.mode", "IOMMU", check_iommu, pairwise=True),
    Check("iommu.vms", "Devices passed to VMs", check_vm_isolation, pairwise=True),
    _ACS,
    Check("nccl.level", "Topology and NCCL", check_nccl, pairwise=True),
    Check("vllm.allreduce", "vLLM custom all-reduce", check_vllm, pairwise=True),
    Check("pcie.link", "PCIe links", check_links),
    _SLOT,
    Check("power.limit", "Power limit", check_power),
    _VERIFIED,
)
