"""The PCIe path between GPUs: ACS redirect on the ports a pair's traffic crosses, and a slot narrower (or slower)
than the card versus a link that trained down. Pure over :mod:`fwman.gpu.bridges`' readings."""

from __future__ import annotations

from fwman.core.findings import Finding, Severity, Topic
from fwman.gpu.acs import AcsState, bit_meanings, bit_names
from fwman.gpu.bridges import AcsFacts, SlotFacts
from fwman.reports.doctor.checks.platform import is_guest
from fwman.reports.doctor.facts import Facts


def acs_fix(ports: list[str]) -> str:
    """Return the fix for ACS redirect on ``ports`` (their PCI addresses): the firmware switch, else the commands
    for exactly those ports (the kernel parameter takes them separated by semicolons: Linux commit aaca43fda742,
    "PCI: Add pci=disable_acs_redir= parameter for peer-to-peer support")."""
    setpci = "; ".join(f"setpci -s {p} ECAP_ACS+0x6.w=0000" for p in ports)
    return (
        "turn ACS off in the firmware setup where the board has a switch for it (names vary by vendor; on many EPYC "
        "boards 'ACS Enable' under AMD CBS > NBIO); otherwise owners clear the redirect bits at boot, e.g. "
        f"`{setpci}` (NCCL troubleshooting guide, 'PCI Access Control Services'), or boot with "
        f"`pci=disable_acs_redir={';'.join(ports)}`. Caveat: ACS is what keeps "
        "devices passed to VMs isolated from each other (it shapes the IOMMU groups); on a host that passes devices "
        "to VMs, clear it only on the ports between the GPUs the host itself uses"
    )


def acs_findings(acs: AcsFacts, guest: bool = False) -> list[Finding]:
    """Return the ACS findings: each port with Request/Completion Redirect on a GPU pair's path, ports that
    could not be read (not root: 64 bytes of config space), and an ok line when no path has redirect on."""
    t = Topic("pcie.acs")
    out: list[Finding] = []
    if not acs.pairs:
        return [t.info("fewer than two GPUs: no path between GPUs")]
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
            t.warn(
                f"ACS redirects peer-to-peer traffic to the root complex on {len(redirecting)} "
                f"port{'s' if len(redirecting) > 1 else ''} between the GPUs ({', '.join(redirecting)}: "
                f"{' and '.join(bit_meanings(bits))} on): {len(pairs)} of {len(acs.pairs)} GPU pairs cross one, so "
                "their P2P goes up through the root complex and the IOMMU (slower, or a hang with the P2P forks); "
                "Linux sets these bits when an IOMMU driver is active",
                acs_fix(redirecting),
                evidence=evidence,
            )
        )
    unreadable = sorted(b for b in users if (r := acs.readings.get(b)) is not None and r.state is AcsState.UNREADABLE)
    if unreadable:
        sizes = sorted({acs.readings[b].config_bytes for b in unreadable})
        out.append(
            t.info(
                f"could not read ACS on {', '.join(unreadable)}: only {'/'.join(map(str, sizes))} bytes of "
                "config space are readable (the ACS capability lies beyond 256; run fwman doctor as root)",
                "sudo fwman doctor",
                evidence={"ports": ", ".join(unreadable)},
            )
        )
    out += [t.info(f"could not read the PCI path of {name}: {why}") for name, why in sorted(acs.problems.items())]
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
            out.append(t.ok(f"no ACS redirect on the ports between the GPUs ({'; '.join(parts)})"))
        elif direct:
            out.append(
                t.ok(
                    "no PCI bridge between the GPUs in this tree (they share a root bus): no ACS port to redirect them"
                )
            )
    if guest:
        out.append(
            t.info(
                "in a VM guest the ports above are emulated: the ACS that decides P2P is on the host's "
                "ports (run fwman doctor there)"
            )
        )
    return out


def check_acs(facts: Facts) -> list[Finding]:
    """Return ACS redirect findings for the ports between every GPU pair."""
    return acs_findings(facts.acs.get(), is_guest(facts))


def _gen(speed: float | None) -> str:
    gens = {2.5: "Gen1", 5.0: "Gen2", 8.0: "Gen3", 16.0: "Gen4", 32.0: "Gen5", 64.0: "Gen6"}
    return f"{speed:g} GT/s ({gens.get(speed or 0, '?')})" if speed is not None else "? GT/s"


def slot_findings(slots: list[SlotFacts], cards: int, guest: bool = False) -> list[Finding]:
    """Return, per card below its maximum, whether the slot caps it ("the slot is x4") or the link trained down."""
    t = Topic("pcie.slot")
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
                t.info(
                    f"{s.bus_id}: could not read the link capability of the port above it "
                    f"({s.problem or 'neither sysfs nor config space readable'}); cannot tell a narrow slot from "
                    "a link that trained down",
                    evidence=ev,
                )
            )
            continue
        ev.update({"port": s.port or "?", "port_capability": f"{_gen(s.port_max_speed_gts)} x{s.port_max_width}"})
        if link.narrow and s.port_max_width is not None and s.port_max_width < (link.max_width or 0):
            out.append(
                t.warn(
                    f"{s.bus_id}: the slot is x{s.port_max_width} (port {s.port} supports at most "
                    f"x{s.port_max_width}; the card x{link.max_width}): no reseat changes that{emulated}",
                    "move the card to a CPU-attached x16 slot (the board manual's block diagram says which "
                    "slots are x16 from the CPU; some share lanes with M.2 or other slots)",
                    evidence=ev,
                )
            )
        elif link.narrow:
            out.append(
                t.warn(
                    f"{s.bus_id}: the link trained down to x{link.current_width} in a slot whose port "
                    f"supports x{s.port_max_width}{emulated}",
                    "reseat the card; replace or remove the riser; in the firmware setup set the slot's PCIe "
                    "generation explicitly (risers that fail at Gen4 often train narrower) and check lane "
                    "bifurcation is x16 for that slot",
                    evidence=ev,
                )
            )
        if link.slow and s.port_max_speed_gts is not None and s.port_max_speed_gts < (link.max_speed_gts or 0):
            out.append(
                t.warn(
                    f"{s.bus_id}: the slot's port {s.port} supports at most {_gen(s.port_max_speed_gts)} "
                    f"(the card {_gen(link.max_speed_gts)}): the slot caps the speed{emulated}",
                    "move the card to a slot whose port runs at the card's generation (CPU-attached slots "
                    "usually do; chipset slots often do not), or accept the lower speed",
                    evidence=ev,
                )
            )
        elif link.slow and not link.narrow:
            out.append(
                t.info(
                    f"{s.bus_id}: the port supports {_gen(s.port_max_speed_gts)}, so a lower speed is link "
                    f"training or idle power saving, not the slot{emulated}",
                    "check under load (`nvidia-smi -q -d PCIE`); still low means riser, reseat, or the "
                    "firmware setup's PCIe generation setting",
                    evidence=ev,
                )
            )
    if not slots:
        out.append(t.ok(f"no card below its link maximum ({cards} checked): no slot limits a link"))
    return out


def check_slots(facts: Facts) -> list[Finding]:
    """Return slot-versus-training findings for every card whose link is below its maximum."""
    return slot_findings(facts.slots.get(), len(facts.cards), is_guest(facts))
