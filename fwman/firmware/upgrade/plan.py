"""The firmware upgrade plan: which card gets which image, and every step around the flash.

:func:`build_upgrade_plan` is pure apart from reading the image cache and the local hash overrides through the Host; it
changes nothing. ``fwman upgrade --dry-run`` prints the plan; ``--apply`` (fwman.firmware.upgrade.apply) executes the
steps whose ``by`` is ``fwman`` and stops on any ``block`` finding.

Rules: a card whose exact PCI IDs are not in the catalog is reported, never matched to a near board; the recommended
image is the newest ``current`` or ``unverified`` one (withdrawn and superseded images are skipped with their reason,
however high their version sorts); an image without a known hash is planned but blocks the flash until the owner
supplies the vendor MD5."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from fwman.core.errors import NotRecordedError
from fwman.core.findings import Finding, Topic
from fwman.core.units import human_bytes
from fwman.firmware.catalog.load import Catalog
from fwman.firmware.catalog.overrides import HashOverride, find_override, load_overrides
from fwman.firmware.catalog.schema import Board, CatalogImage, ImageStatus
from fwman.firmware.ops.fetch import cache_path
from fwman.firmware.upgrade.model import LEGACY_BAR1, Action, CardPlan, ImageOption, ImageSupply, PlanStep, UpgradePlan
from fwman.firmware.versions import Order, catalog_newer, compare
from fwman.gpu.card import Card
from fwman.gpu.kernel_modules import UNLOAD_ORDER
from fwman.host.base import Host


def _why_not(image: CatalogImage, chosen: CatalogImage | None) -> str:
    """Return why ``image`` is not the recommended one (its status is shown next to this text)."""
    if image.status is ImageStatus.WITHDRAWN:
        return image.status_reason or "withdrawn by the vendor"
    if image.status is ImageStatus.SUPERSEDED:
        return image.status_reason or (f"replaced by {image.superseded_by}" if image.superseded_by else "superseded")
    if chosen is not None:
        return f"older than {chosen.version}"
    return image.status_reason or image.status.value


def image_options(board: Board) -> list[ImageOption]:
    """Return every image of ``board``, newest first, marking the recommended one and why the others are not."""
    chosen = board.recommended()
    out = []
    for image in board.images_newest_first():
        is_chosen = chosen is not None and image.version == chosen.version
        why = "newest image that is neither withdrawn nor superseded" if is_chosen else _why_not(image, chosen)
        facts = image.model_dump(include={"version", "status", "rebar", "power_limit_w"})
        out.append(ImageOption(chosen=is_chosen, why=why, **facts))
    return out


def _decide(card: Card, board: Board) -> tuple[Action, str | None, str, str]:
    """Return (action, target version, reason, status of the running firmware) for a card the catalog knows."""
    target = board.recommended()
    current = card.vbios_version.upper() if card.vbios_version else None
    running = board.image(current) if current else None
    status = running.status.value if running else ("unknown" if current is None else "not in catalog")
    if target is None:
        return "keep", None, "the catalog lists no image that may be recommended for this board", status
    if current is None:
        return "check", target.version, "the running firmware version could not be read (is nvidia-smi there?)", status
    if current == target.version:
        return "keep", None, f"already on {target.version}, the newest recommended image", status
    if running is None:
        order = compare(current, target.version)
        if order is Order.NEWER:
            return "keep", None, f"runs {current}, newer than the catalog knows: left alone", status
        if order is Order.SAME_BASE:
            # the fifth field is the board maker's build code: without a catalog entry nothing says which is newer
            same = f"runs {current}, not in the catalog; it differs from {target.version} only in the build code"
            return "keep", None, f"{same}: left alone", status
        return "flash", target.version, f"{current} is not in the catalog; {target.version} is recommended", status
    if running.status is ImageStatus.WITHDRAWN:
        why = running.status_reason or "no reason given"
        return "flash", target.version, f"{current} was withdrawn ({why})", status
    if running.status is ImageStatus.SUPERSEDED:
        return "flash", target.version, f"{current} is superseded: {target.version} is recommended", status
    if catalog_newer(target, running, board.images):
        return "flash", target.version, f"{target.version} is newer than {current}", status
    return "keep", None, f"{current} is {running.status.value}", status


def _cached(host: Host, path: str) -> bool | None:
    """Return whether ``path`` is in the image cache; None when a replay did not record the cache."""
    try:
        return host.exists(path)
    except NotRecordedError:
        return None


def build_upgrade_plan(
    host: Host, cards: Sequence[Card], catalog: Catalog, selected: Sequence[str] = ()
) -> UpgradePlan:
    """Return the upgrade plan for ``cards`` on ``host`` from ``catalog``. Changes nothing.

    ``selected`` limits which cards are flashed (sysfs bus ids; empty: every card); every card is still backed
    up. Raises VerificationError when the local hash overrides contradict each other.
    """
    chosen = set(selected)
    overrides = load_overrides(host)
    card_plans: list[CardPlan] = []
    findings: list[Finding] = []
    targets: dict[tuple[str, str], list[str]] = {}
    for card in sorted(cards, key=lambda c: c.bus_id):
        board = catalog.board_for(card.vendor_id, card.device_id, card.subsystem_vendor_id, card.subsystem_device_id)
        pci_key = f"{card.vendor_id}:{card.device_id}:{card.subsystem}"
        common = {
            "bus_id": card.bus_id,
            "name": card.name,
            "pci_key": pci_key,
            "subsystem": card.subsystem,
            "current_version": card.vbios_version,
            "bar1_bytes": card.bar1_bytes,
            "max_rebar_bytes": card.max_rebar_bytes,
            "vram_bytes": card.vram_bytes,
            "driver_version": card.driver_version,
            "selected": not chosen or card.bus_id in chosen,
        }
        if board is None:
            card_plans.append(
                CardPlan(
                    **common,
                    board=None,
                    current_status="not in catalog",
                    action="unknown-board",
                    reason=f"no catalog board for {pci_key}: fwman never guesses a firmware",
                )
            )
            bus = short_bus(card.bus_id)
            ev = {"bus_id": card.bus_id, "pci": pci_key, "vbios": card.vbios_version or "unknown"}
            findings.append(
                Topic("upgrade.unknown-board", ev).info(
                    f"{bus}: no catalog entry for {pci_key}; backed up, not flashed",
                    "describe it with a local entry (docs/catalog-local.md) from the card maker's file: "
                    f"fwman backup --card {bus}, then fwman catalog add-local --card "
                    f"{bus} --image FILE --expect-md5 HEX --md5-source URL",
                )
            )
            continue
        action, target, reason, status = _decide(card, board)
        card_plans.append(
            CardPlan(
                **common,
                board=f"{board.board.name} (local entry)" if catalog.is_local(board) else board.board.name,
                dual_firmware_switch=board.board.dual_firmware_switch,
                current_status=status,
                action=action,
                target_version=target,
                reason=reason,
                options=image_options(board),
            )
        )
        if action == "check":
            findings.append(
                Topic("upgrade.version-unknown", {"bus_id": card.bus_id}).block(
                    f"{short_bus(card.bus_id)}: firmware version unknown: no image can be chosen",
                    "load the NVIDIA driver so nvidia-smi can read it, then plan again",
                )
            )
        if action == "flash" and common["selected"] and target is not None:
            targets.setdefault((board.key, target), []).append(card.bus_id)

    for card in cards:
        plan = next(p for p in card_plans if p.bus_id == card.bus_id)
        image, driver = _target_image(catalog, plan), card.driver_version
        if image is not None and image.min_driver and driver and _driver_key(driver) < _driver_key(image.min_driver):
            findings.append(
                Topic("upgrade.driver", {"bus_id": card.bus_id, "driver": driver}).info(
                    f"{short_bus(card.bus_id)}: driver {driver} is older than {image.min_driver}, "
                    f"which {image.version} needs for what it is for",
                    f"install driver {image.min_driver} or later",
                )
            )

    images = [_supply(host, catalog, key, ver, buses, overrides, findings) for (key, ver), buses in targets.items()]
    steps = _steps(card_plans, images, catalog, findings)
    return UpgradePlan(
        host=host.description,
        catalog=catalog.summary(),
        cards=card_plans,
        images=images,
        steps=steps,
        findings=findings,
    )


def _supply(
    host: Host,
    catalog: Catalog,
    board_key: str,
    version: str,
    buses: list[str],
    overrides: list[HashOverride],
    findings: list[Finding],
) -> ImageSupply:
    """Return where the image ``version`` of board ``board_key`` comes from for ``buses``; appends to ``findings``
    what blocks its flash (no known hash, not cached with no URL)."""
    board = catalog.find_board(board_key)
    image = board.image(version)
    assert image is not None
    entry = catalog.entry_for(board, image)
    override = find_override(overrides, board.key, version)
    origin = entry.hash_origin if image.has_hash else ""
    if not image.has_hash and override:
        signed = override.signed_package
        origin = override.provenance(board.board.maker) if signed else f"local override ({override.source})"
    path = cache_path(entry)
    cached = _cached(host, path)
    supply = ImageSupply(
        ref=entry.ref,
        board_key=board.key,
        version=version,
        status=image.status,
        cards=buses,
        cache_path=path,
        cached=cached,
        urls=list(image.urls),
        hash_known=bool(origin),
        hash_origin=origin,
        needs_md5=not origin,
    )
    fetch = f"fwman fetch {entry.ref}"
    # a maker whose update programs the catalog knows the signer of: the signed program vouches, no MD5 needed
    signed_too = f", or {board.board.maker}'s signed update program imported," if board.board.package_signers else ""
    signed_fix = f"{fetch} --image UPDATE-PROGRAM.exe (the maker's signed updater), or " if signed_too else ""
    if not origin:
        findings.append(
            Topic("upgrade.unverified-image", {"image": entry.ref, "cards": ", ".join(buses)}).block(
                f"{version} has no known hash: a vendor MD5 must be supplied (--expect-md5){signed_too} "
                "before it can be flashed",
                f"{signed_fix}{fetch} --image FILE --expect-md5 HEX   (both from the card maker's download page)",
            )
        )
    elif not cached and not image.urls:
        where = "is not in the cache" if cached is False else "may not be in the cache (not recorded)"
        findings.append(
            Topic("upgrade.image-missing", {"image": entry.ref, "cache": path}).block(
                f"{version} {where} and the catalog knows no download URL",
                f"{fetch} --image FILE   (download it from the card maker's site first)",
            )
        )
    return supply


def _bar_evidence(cards: list[CardPlan]) -> list[str]:
    """Return lines saying what the BAR sizes tell about the firmware-setup switches today."""
    lines = []
    for c in cards:
        if c.max_rebar_bytes and c.max_rebar_bytes > LEGACY_BAR1 and c.bar1_bytes is not None:
            if c.bar1_bytes <= LEGACY_BAR1:
                lines.append(
                    f"{short_bus(c.bus_id)} offers a BAR1 of up to {human_bytes(c.max_rebar_bytes)} but has "
                    f"{human_bytes(c.bar1_bytes)}: Re-Size BAR Support (or Above 4G Decoding) looks off today"
                )
            else:
                lines.append(
                    f"{short_bus(c.bus_id)} already has a {human_bytes(c.bar1_bytes)} BAR1: the switches look on"
                )
    return lines


def _steps(
    cards: list[CardPlan], images: list[ImageSupply], catalog: Catalog, findings: list[Finding]
) -> list[PlanStep]:
    flash = [c for c in cards if c.action == "flash" and c.selected]
    steps: list[PlanStep] = []

    def add(
        step_id: str,
        title: str,
        by: Literal["fwman", "you"],
        details: list[str],
        commands: Sequence[str] = (),
        card_ids: Sequence[str] = (),
    ) -> None:
        steps.append(
            PlanStep(
                number=len(steps) + 1,
                id=step_id,
                title=title,
                by=by,
                details=details,
                commands=list(commands),
                cards=list(card_ids),
            )
        )

    everyone = [c.bus_id for c in cards]
    saved = [
        "each card is saved with nvflash --save, read back and parsed before anything is flashed",
        "cards that are not flashed are backed up too: a backup is the only way back after a bad flash",
    ]
    title = f"Back up every card's firmware ({len(cards)} card{'s' if len(cards) != 1 else ''})"
    add("backup", title, "fwman", saved, card_ids=everyone)
    if not flash:
        return steps
    for img in images:
        if img.cached:
            got = f"in the cache: {img.cache_path}"
        elif img.cached is None and not img.urls:
            got = "the snapshot did not record the image cache; no download URL is known: download it by hand"
        elif img.urls:
            got = f"downloaded from {img.urls[0]} into {img.cache_path}"
        else:
            got = "no download URL is known: download it from the card maker's site in a browser"
        details = [got]
        if img.hash_known:
            details.append(f"checked against the {'catalog' if img.hash_origin == 'catalog' else img.hash_origin} hash")
        else:
            details.append("UNVERIFIED: no published hash is known; the vendor's MD5 must be supplied first")
        commands = []
        if not img.cached:
            md5 = "" if img.hash_known else " --expect-md5 HEX"
            src = "" if img.urls else " --image FILE"
            commands.append(f"fwman fetch {img.ref}{src}{md5}")
        title = f"Get {img.version} for {', '.join(short_bus(b) for b in img.cards)}"
        add("image", title, "you" if commands else "fwman", details, commands, img.cards)
    unload = [
        "nvflash refuses to run while the driver is loaded; containers and services using the GPUs stop first",
        "modules, in order: " + " ".join(UNLOAD_ORDER),
    ]
    add("unload", "Stop GPU users and unload the NVIDIA kernel modules", "fwman", unload)
    left = [c for c in cards if c not in flash]
    for n, c in enumerate(flash):
        details = [f"{c.current_version} -> {c.target_version} ({c.board}, {c.subsystem})"]
        if c.dual_firmware_switch:
            details.append("note the firmware switch position: the board's other chip keeps the old firmware")
        details.append("nvflash checks subsystem and board ID; the result is read back before the next card")
        if left and n == len(flash) - 1:
            details.append(
                "left as they are: "
                + ", ".join(f"{short_bus(x.bus_id)} ({x.current_version or 'unknown'})" for x in left)
            )
        add("flash", f"Flash {short_bus(c.bus_id)} with {c.target_version}", "fwman", details, card_ids=[c.bus_id])
    rebar = any((o.rebar is True) for c in flash for o in c.options if o.version == c.target_version)
    if rebar:
        to_setup = "systemctl reboot --firmware-setup"
        setup = [
            f"reboot into the firmware setup: {to_setup}",
            "enable Above 4G Decoding",
            "enable Re-Size BAR Support",
            "save and exit (the names vary by board maker: look under PCI or Advanced settings)",
            *_bar_evidence(cards),
        ]
        add("firmware-setup", "Turn on Resizable BAR in the firmware setup", "you", setup, [to_setup])
        boot = "the new firmware takes effect on this boot (nvflash: a reboot is required)"
        add("reboot", "Boot Linux", "you", [boot])
    else:
        add("reboot", "Reboot", "you", ["the new firmware takes effect after a reboot"], ["systemctl reboot"])
    checks: list[str] = []
    groups: dict[str, list[CardPlan]] = {}
    for c in flash:
        groups.setdefault(f"{c.pci_key}/{c.target_version}", []).append(c)
    for group in groups.values():
        image = _target_image(catalog, group[0])
        if image is None:
            continue
        buses = ", ".join(short_bus(c.bus_id) for c in group)
        checks.append(f"{buses}: VBIOS {image.version}")
        if image.rebar:
            vram = group[0].vram_bytes
            need = f" (at least the {human_bytes(vram)} of VRAM)" if vram else ""
            checks.append(f"{buses}: BAR1 larger than 256 MiB{need}")
        if image.power_limit_w:
            checks.append(f"{buses}: default power limit {image.power_limit_w:g} W")
        if image.min_driver:
            now = group[0].driver_version
            checks.append(f"driver {image.min_driver} or later" + (f" (loaded now: {now})" if now else ""))
    setup_only = [short_bus(c.bus_id) for c in left if c.setup_switch_only]
    if setup_only and rebar:
        checks.append(f"{', '.join(setup_only)}: BAR1 larger than 256 MiB too (their firmware already offers it)")
    if left:
        checks.append("cards not flashed: firmware unchanged")
    checks.append("every card still present with the same subsystem IDs")
    add("post-check", "Check the result", "you", checks, ["fwman scan"])
    return steps


def short_bus(bus: str) -> str:
    """Return a bus id the way `fwman scan` prints it: without the ``0000:`` PCI domain."""
    return bus[5:] if bus.startswith("0000:") else bus


def _driver_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _target_image(catalog: Catalog, plan: CardPlan) -> CatalogImage | None:
    if plan.action != "flash" or plan.target_version is None or not plan.selected:
        return None
    board = catalog.board_for(*plan.pci_key.split(":"))
    return board.image(plan.target_version) if board is not None else None
