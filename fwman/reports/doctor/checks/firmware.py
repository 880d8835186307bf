"""The GPUs, the BAR1 size their firmware offers (else the catalog's upgrade), and whether the
firmware setup enlarged BAR1 to cover VRAM."""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Topic
from fwman.gpu.card import Card
from fwman.reports.doctor.checks.common import buses, gib
from fwman.reports.doctor.facts import Facts, describe_error

#: BAR1 of a card without Resizable BAR (or with it switched off in firmware setup)
LEGACY_BAR1 = 256 * 1024 * 1024
FIRMWARE_SETUP_FIX = (
    "in the firmware setup (BIOS/UEFI) turn on 'Above 4G Decoding' and 'Re-Size BAR Support' (many boards also "
    "want CSM off for it); `systemctl reboot --firmware-setup` reboots straight into setup when "
    "the remote console misses the prompt"
)


# -- the GPUs -----------------------------------------------------------------------------------------------------
def check_gpus(facts: Facts) -> list[Finding]:
    """Return how many GPUs there are (peer-to-peer needs two) and whether nvidia-smi could be used."""
    inv = facts.inventory.get()
    cards = inv.cards
    names = sorted({c.name or f"{c.vendor_id}:{c.device_id}" for c in cards})
    out = []
    if len(cards) >= 2:
        out.append(
            Topic("gpus.count", {"gpus": str(len(cards))}).ok(f"{len(cards)} GPUs: {', '.join(names)} ({buses(cards)})")
        )
    else:
        out.append(
            Topic("gpus.count", {"gpus": str(len(cards))}).info(
                f"one GPU ({', '.join(names)} at {buses(cards)}): peer-to-peer between GPUs does not "
                "apply; the chain below is shown for what it says about this card"
            )
        )
    if inv.smi_problem:
        out.append(
            Topic("gpus.nvidia-smi").info(
                f"could not check with nvidia-smi: {inv.smi_problem} (VRAM, power limits unknown)",
                "load the NVIDIA driver and install its user space (nvidia-smi)",
            )
        )
    return out


# -- firmware offers a large BAR1 -------------------------------------------------------------------------------
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
        catalog = facts.catalog.get()
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
        f"({board.board.name}){caveat}: `fwman upgrade --dry-run`, then `fwman upgrade --apply` (it backs up "
        "every card first)",
        {"catalog": f"{board.subsystem}/{target.version}"},
    )


def check_firmware(facts: Facts) -> list[Finding]:
    """Return whether each card's firmware offers a BAR1 as large as its VRAM (else the catalog upgrade)."""
    t = Topic("firmware.rebar")
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
        cap = f"offers BAR1 up to {gib(offered)}" if offered else f"has no Resizable BAR (BAR1 {gib(LEGACY_BAR1)})"
        fix, evidence = _catalog_fix(facts, cards[0])
        count = "1 card needs" if len(cards) == 1 else f"{len(cards)} cards need"
        out.append(
            t.block(
                f"{count} firmware with Resizable BAR: {buses(cards)} ({subsystem} on "
                f"{vbios or 'unknown firmware'} {cap})",
                fix,
                evidence={"cards": buses(cards), "subsystem": subsystem, "vbios": vbios or "unknown", **evidence},
            )
        )
    if unknown:
        out.append(
            t.info(
                f"could not check the BAR sizes the firmware offers on {buses(unknown)}: the Resizable BAR "
                "capability is not readable (extended config space needs root)",
                "run fwman doctor as root",
            )
        )
    if good:
        sizes = ", ".join(sorted({gib(c.max_rebar_bytes or c.bar1_bytes) for c in good}))
        out.append(
            t.ok(f"firmware offers a large BAR1 on {buses(good)} (up to {sizes})", evidence={"cards": buses(good)})
        )
    return out


# -- firmware setup: BAR1 covers VRAM ---------------------------------------------------------------------------
def check_bar1(facts: Facts) -> list[Finding]:
    """Return whether BAR1 covers VRAM on every card (else: the firmware-setup settings)."""
    t = Topic("bar1.size")
    small = [c for c in facts.cards if c.bar1_covers_vram is False]
    unknown = [c for c in facts.cards if c.bar1_covers_vram is None]
    good = [c for c in facts.cards if c.bar1_covers_vram]
    out = []
    if small:
        sizes = sorted({f"{gib(c.bar1_bytes)} of {gib(c.vram_bytes)} VRAM" for c in small})
        need_fw = [c for c in small if _offers_large_bar(c) is False]
        fix = FIRMWARE_SETUP_FIX
        if need_fw:
            fix += f"; {buses(need_fw)} first need the Resizable-BAR firmware above"
        out.append(
            t.block(
                f"BAR1 not enlarged on {len(small)} card{'s' if len(small) > 1 else ''}: "
                f"{buses(small)} ({'; '.join(sizes)})",
                fix,
                evidence={c.bus_id: f"BAR1 {gib(c.bar1_bytes)}, VRAM {gib(c.vram_bytes)}" for c in small},
            )
        )
    if unknown:
        out.append(
            t.info(
                f"could not check BAR1 against VRAM on {buses(unknown)}: "
                + "; ".join(f"BAR1 {gib(c.bar1_bytes)}, VRAM {gib(c.vram_bytes)}" for c in unknown),
                "load the NVIDIA driver so nvidia-smi reports the VRAM size",
            )
        )
    if good:
        out.append(
            t.ok(
                f"BAR1 covers VRAM on {buses(good)} ("
                + ", ".join(sorted({f"{gib(c.bar1_bytes)} for {gib(c.vram_bytes)}" for c in good}))
                + ")"
            )
        )
    return out
