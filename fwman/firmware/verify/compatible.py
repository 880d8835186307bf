"""Is this VBIOS file right for this card? :func:`check_compatible`, the one gate every caller uses (no I/O).

Every check reports, pass or fail, so the user sees what was checked. Blocks protect hardware and cannot be overridden:
wrong vendor/device, wrong subsystem, wrong board ID, an image kind that is not a flash source, a broken x86 checksum,
NVGI and NPDE disagreeing, an unreadable version. A version older than the card's is a ``warn`` that
``--allow-downgrade`` accepts.

With a catalog entry, the catalog's checks follow (board, version string, hash match, status: a hash that differs, no
published hash, a withdrawn image block). Callers: ``fwman rom verify``, the flash gates, ``fwman fetch`` (no card: the
image and catalog checks only) and the backup check (the identity checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwman.core.findings import Finding, Topic
from fwman.core.names import normal_board_id
from fwman.firmware.catalog.schema import CatalogImage, ImageStatus
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.versions import Order, compare
from fwman.gpu.card import Card

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import CatalogEntry, RomLike

DOWNGRADE_FLAG = "--allow-downgrade"

#: the findings that say an image (or dump) is this card's: vendor/device, subsystem, NVGI agreeing with NPDE
IDENTITY_IDS = frozenset({"rom.device", "rom.subsystem", "rom.nvgi_npde"})


def _ids(image: RomImage, card: Card) -> Finding:
    ids, card_ids = f"{image.vendor_id}:{image.device_id}", f"{card.vendor_id}:{card.device_id}"
    offset = f"0x{image.offsets.get('device_id', 0):X}"
    t = Topic("rom.device", {"image": ids, "card": card_ids, "image_offset": offset})
    if (image.vendor_id, image.device_id) != (card.vendor_id.lower(), card.device_id.lower()):
        return t.block(f"image is for PCI device {ids}, the card is {card_ids}", "use an image made for this GPU model")
    return t.ok(f"PCI device {card_ids} matches")


def _subsystem(image: RomImage, card: Card) -> Finding:
    t = Topic("rom.subsystem", {"image": image.subsystem or "unknown", "card": card.subsystem})
    if image.subsystem is None:
        return t.block(
            "image carries no subsystem ID (no NPDE rev 0x101 on its x86 image, and no checking HWINFO "
            "block with a subsystem word at +0x54): cannot match the board"
        )
    if image.subsystem != card.subsystem.lower():
        return t.block(
            f"image is for board {image.subsystem}, the card is {card.subsystem}",
            "use the image for this card's subsystem ID (see `fwman scan`)",
        )
    return t.ok(f"subsystem {card.subsystem} matches")


def _board(card: Card, board_ids: list[str], source: str) -> Finding:
    wanted = sorted({n for n in (normal_board_id(b) for b in board_ids) if n is not None})
    card_id = normal_board_id(card.board_id) if card.board_id else None
    image_ids = ", ".join(wanted) or "unknown"
    t = Topic("rom.board_id", {"image": image_ids, "card": card_id or "unknown", "source": source})
    if wanted and card_id is None:
        return t.info(
            f"board ID not compared: the image's is {image_ids} ({source}), the card's board ID is unknown "
            "(nvflash has not reported it); nvflash checks it again when flashing",
            "run `fwman backup` (it records the board ID nvflash reports), then verify again",
        )
    if not wanted:
        return t.info(
            "board ID not compared: no open parser finds it in an image; nvflash checks it again when flashing",
            "pass --board-id from `nvflash --version FILE` (or use a catalog image) to compare it here",
        )
    if card_id not in wanted:
        return t.block(
            f"image board ID {image_ids} ({source}) differs from the card's {card_id} (nvflash refuses this too)"
        )
    return t.ok(f"board ID {card_id} matches ({source})")


def _kind(image: RomImage) -> Finding:
    ev = {"kind": image.kind.value, "size": str(image.size)}
    t = Topic("rom.kind", ev)
    if image.kind is RomKind.STRIPPED:
        return t.block(
            "a stripped image (NVGI prefix cut off, as VFIO guides do) is not a flash source",
            "flash a full `nvflash --save` dump or the vendor's update image",
        )
    if image.kind is RomKind.SYSFS_TRUNCATED:
        return t.block(
            f"a sysfs-truncated image ({image.pci_walk_images} of the card's images: x86 + EFI) "
            "is neither a flash source nor a backup",
            "back a card up with `nvflash --save` (fwman backup), not /sys/bus/pci/devices/*/rom",
        )
    if image.kind is RomKind.TRUNCATED:
        ev["declared_size"] = str(image.declared_size)
        return t.block(
            f"a truncated file: the header says {image.declared_size:,} bytes, the file has {image.size:,}",
            "get the whole file again (a full `nvflash --save` dump, or the vendor's download)",
        )
    if image.kind is RomKind.CONTAINER:
        ev["head"] = image.container_head or ""
        return t.block(
            f"the file starts with {image.container_head}, a prefix no public source documents: fwman "
            "reads its PCI images but does not flash what it cannot check whole",
            "flash it with nvflash by hand if you trust it; see docs/rom.md (containers)",
        )
    if image.x86_index != 0:
        ev["x86_index"] = str(image.x86_index)
        return t.block(
            f"the option-ROM chain opens with a {image.images[0].code_type_name} image, not the x86 "
            f"image (image[{image.x86_index}]): no public source documents that layout, so fwman reads it "
            "but does not flash what it cannot check whole",
            "flash it with nvflash by hand if you trust it; see docs/rom.md (chains that do not open with x86)",
        )
    return t.ok(f"{image.kind.description}: a flash source")


def _checksum(image: RomImage) -> Finding:
    x86 = image.images[0]
    taken = "not taken" if image.x86_checksum is None else f"0x{image.x86_checksum:02X}"
    t = Topic("rom.x86_checksum", {"sum": taken, "x86_offset": f"0x{x86.offset:X}", "x86_length": str(x86.length)})
    if image.x86_checksum is None:
        return t.block("the x86 image is cut off by the end of the file: its checksum cannot be taken")
    if not image.x86_checksum_ok:
        return t.block(
            f"x86 image bytes sum to {taken}, not 0: the file is damaged or modified",
            "get a fresh copy; fwman never 'fixes' a checksum (Ampere images are signed)",
        )
    return t.ok("x86 image checksum is valid")


#: the notes of a parse that say two copies of one field in the file disagree
_DISAGREE_NOTES = ("rfrd_offset_disagree", "rfrd_length_disagree", "nvgi_copy_disagree", "version_disagree")


def _agreement(image: RomImage) -> list[Finding]:
    agree = image.subsystems_agree
    t = Topic("rom.nvgi_npde", {"nvgi": image.nvgi_subsystem or "absent", "npde": image.subsystem or "absent"})
    if agree is False:
        first = t.block(
            f"NVGI header says {image.nvgi_subsystem}, the x86 image says {image.subsystem}: "
            "the file was assembled from two boards' parts"
        )
    elif agree:
        first = t.ok("NVGI and NPDE subsystems agree")
    else:
        first = t.info("no NVGI header to cross-check (option-ROM file)")
    out = [first]
    for note in (n for n in image.notes if n.id in _DISAGREE_NOTES):
        where = {"offset": f"0x{note.offset:X}" if note.offset is not None else "unknown"}
        fix = "compare the file with a fresh download or dump before flashing"
        out.append(Topic(f"rom.{note.id}", where).warn(note.message, fix))
    return out


def _version(image: RomImage, card: Card) -> Finding:
    t = Topic("rom.version", {"image": image.version or "unknown", "card": card.vbios_version or "unknown"})
    if image.version is None:
        return t.block("image version unreadable (no BIT token B): the image cannot be identified")
    if card.vbios_version is None:
        return t.info(f"image is {image.version}; the card's version is unknown (nvidia-smi unavailable)")
    order = compare(image.version, card.vbios_version)
    if order is None:
        return t.info("versions not comparable")
    if order is Order.OLDER:
        return t.warn(
            f"image {image.version} is older than the card's {card.vbios_version}",
            "flash a downgrade only on purpose",
            override=DOWNGRADE_FLAG,
        )
    if order in (Order.SAME, Order.SAME_BASE):
        same = order is Order.SAME
        what = "the card's version" if same else f"the card's {card.vbios_version} apart from the OEM field"
        return t.info(f"image {image.version} is {what} (identity is the chain hash, not the string)")
    return t.ok(f"image {image.version} is newer than the card's {card.vbios_version}")


def check_compatible(
    image: RomImage,
    card: Card | None,
    entry: CatalogEntry | None,
    *,
    board_id: str | None = None,
    override_md5: str | None = None,
    catalog: bool = True,
) -> list[Finding]:
    """Return the findings for putting ``image`` onto ``card`` (every check, passed or not). Raises nothing.

    ``card`` None (``fwman fetch``: no card yet) checks only the image kind. ``board_id`` is the image's board ID
    where known (``nvflash --version FILE``): compared with ``card.board_id``; without it the catalog entry's
    compatible board IDs are used. ``entry`` is the catalog entry the image claims to be
    (:func:`fwman.firmware.catalog.load.find_entry_for_rom`): its checks (board, version string, hash, status)
    follow, or one ``warn`` that the image is not in the catalog when ``entry`` is None. ``catalog`` False
    leaves every catalog finding out (a restore of the card's own backup, the backup check). ``override_md5``:
    see :func:`_catalog_findings`.
    """
    findings = [_kind(image)]
    if card is not None:
        if board_id is not None:
            board_ids, source = [board_id], "given"
        elif entry is not None:
            board_ids, source = list(entry.board.board.board_ids), "catalog"
        else:
            board_ids, source = [], "unknown"
        findings += [
            _ids(image, card),
            _subsystem(image, card),
            _board(card, board_ids, source),
            _checksum(image),
            *_agreement(image),
            _version(image, card),
        ]
    if catalog:
        findings.extend(_catalog_findings(image, entry, override_md5, card.bus_id if card is not None else None))
    return findings


# -- what the catalog says about an image ---------------------------------------------------------------------


def _catalog_findings(
    image: RomLike, entry: CatalogEntry | None, override_md5: str | None = None, card_bus: str | None = None
) -> list[Finding]:
    """Return what the catalog says about a parsed ROM: board match, hash known and matching, status.

    ``entry`` is the catalog entry the image claims to be (see
    :func:`fwman.firmware.catalog.load.find_entry_for_rom`); None gives one ``warn`` (not in the catalog).
    ``override_md5`` is a vendor MD5 the owner recorded locally (``fwman fetch --expect-md5``) for an entry whose
    catalog hash is unknown; by default the one attached to ``entry`` by
    :func:`fwman.firmware.catalog.load.load_catalog`. Blocks: a different board, a hash mismatch, no known hash,
    a withdrawn image (listed first, its fix naming the board's recommended image and the commands for
    ``card_bus``).
    """
    if entry is None:
        t = Topic("catalog.entry", {"version": image.version or "unknown", "subsystem": image.subsystem or "unknown"})
        why = "image not in the VBIOS catalog: its hash cannot be checked against a published one"
        return [t.warn(why, "compare its MD5 with the one the card maker publishes")]
    board, cat = entry.board, entry.image
    if override_md5 is None and entry.override is not None:
        override_md5 = entry.override.md5
    ev = {"catalog": entry.label, "status": cat.status.value}
    kind = "local" if entry.local else "catalog"
    out: list[Finding] = []
    if image.subsystem is not None and image.subsystem != board.subsystem:
        message = f"image is for subsystem {image.subsystem}, the {kind} entry is {board.subsystem}"
        out.append(Topic("catalog.board", {**ev, "image_subsystem": image.subsystem}).block(message))
    if image.version is not None and image.version.upper() != cat.version:
        out.append(
            Topic("catalog.version", {**ev, "image_version": image.version}).warn(
                f"image says version {image.version}, the {kind} entry is {cat.version}",
                "vendors have shipped different images under one version: trust the hash, not the string",
            )
        )
    signed = entry.override if entry.override is not None and entry.override.signed_package else None
    signed_by = (signed.sha256, signed.provenance(board.board.maker)) if signed is not None else None
    if signed is not None and override_md5 != signed.md5:
        signed_by = None  # a caller's own MD5 is not the one recorded from the signed package
    status = _status_finding(entry, ev, card_bus)
    if cat.status is ImageStatus.WITHDRAWN:
        out.append(status)  # first: the refusal (and its hint) is "withdrawn", never "supply a hash" for it
    out.append(_hash_finding(image, cat, ev, override_md5, entry.local, signed_by))
    if cat.status is not ImageStatus.WITHDRAWN:
        out.append(status)
    if entry.local:
        local = f"{entry.label}: written on this host by `fwman catalog add-local`, not signed by the catalog"
        out.append(Topic("catalog.local", ev).info(local))
    return out


def _hash_finding(
    image: RomLike,
    cat: CatalogImage,
    ev: dict[str, str],
    override_md5: str | None,
    local: bool = False,
    signed_by: tuple[str, str] | None = None,
) -> Finding:
    """Return the ``catalog.hash`` finding: the catalog's hashes (or chain hash), else the override's MD5 (and,
    for an image extracted from a signed package, ``signed_by``: its recorded SHA-256 and the provenance words),
    compared with the image's; a block when none is known or one differs."""
    checks: list[tuple[str, str, str]] = []  # (what, expected, actual)
    if cat.sha256:
        checks.append(("SHA-256", cat.sha256, image.sha256))
    if cat.md5:
        checks.append(("MD5", cat.md5, image.md5))
    if not checks and cat.chain_sha256:
        checks.append(("chain SHA-256", cat.chain_sha256, image.chain_sha256))
    from_override = not checks and bool(override_md5)
    if from_override and override_md5:
        if signed_by is not None and signed_by[0]:
            checks.append(("SHA-256", signed_by[0], image.sha256))
        checks.append(("MD5", override_md5, image.md5))
    t = Topic("catalog.hash", ev)
    if not checks:
        return t.block(
            f"{cat.version} is unverified: no published hash is known, so this file cannot be checked",
            f"vouch for it: fwman fetch {ev['catalog'].split(' ')[0]} --image FILE --expect-md5 HEX (the "
            "vendor-published MD5), or --image the maker's signed update program",
        )
    if from_override and signed_by is not None:
        whose = f"the image {signed_by[1]}, recorded on this host for"
    else:
        whose = "the vendor MD5 recorded on this host for" if from_override else (
            "the local entry's" if local else "the catalog's"
        )  # fmt: skip
    bad = [(what, exp, act) for what, exp, act in checks if exp != act]
    if bad and cat.chain_sha256 and cat.chain_sha256 == image.chain_sha256:
        # a card dump differs after the chain (per-card data): the firmware itself is the same
        return t.ok(
            f"option-ROM chain matches {cat.version} (the file differs only in per-card data)",
            evidence={**ev, "chain_sha256": image.chain_sha256},
        )
    if bad:
        what, exp, act = bad[0]
        return t.block(
            f"{what} does not match {whose} {cat.version}: this is not the published image",
            "download the image again from the vendor; never flash a file whose hash differs",
            evidence={**ev, "expected": exp, "actual": act},
        )
    names = " and ".join(w for w, _, _ in checks)
    verb = "match" if len(checks) > 1 else "matches"
    return t.ok(f"{names} {verb} {whose} {cat.version}", evidence={**ev, **{w: e for w, e, _ in checks}})


def withdrawn_fix(entry: CatalogEntry, card_bus: str | None) -> str:
    """Return what to do instead of a withdrawn image: the board's recommended image and the commands that fetch
    it and (for ``card_bus``) flash it; the board's catalog page when it recommends none."""
    board = entry.board
    better = board.recommended()
    if better is None:
        return f"the catalog recommends no other image for {board.subsystem}: see fwman catalog show {board.subsystem}"
    ref = f"{board.subsystem}/{better.version}"
    return (
        f"use the board's recommended image {better.version}: fwman fetch {ref}, then "
        f"fwman flash --card {card_bus or 'BUS'} --image {ref}"
    )


def _status_finding(entry: CatalogEntry, ev: dict[str, str], card_bus: str | None = None) -> Finding:
    cat, t = entry.image, Topic("catalog.status", ev)
    reason = f": {cat.status_reason}" if cat.status_reason else ""
    if cat.status is ImageStatus.WITHDRAWN:
        return t.block(f"{cat.version} was withdrawn{reason}", withdrawn_fix(entry, card_bus))
    if cat.status is ImageStatus.SUPERSEDED:
        newer = f" by {cat.superseded_by}" if cat.superseded_by else ""
        return t.info(f"{cat.version} is superseded{newer}{reason}")
    if cat.status is ImageStatus.UNVERIFIED:
        return t.info(f"{cat.version} is listed as unverified (no published hash in the catalog)")
    return t.ok(f"{cat.version} is current")
