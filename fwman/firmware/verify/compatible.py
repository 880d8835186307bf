"""Is this VBIOS file right for this card? Findings from a parsed image and a :class:`Card` (no I/O).

Every check reports, pass or fail, so the user sees what was checked. Blocks protect hardware and cannot be
overridden: wrong vendor/device, wrong subsystem, wrong board ID, an image kind that is not a flash source, a
broken x86 checksum, NVGI and NPDE disagreeing, an unreadable version. A version older than the card's is a
``warn`` that ``--allow-downgrade`` accepts.

The catalog checks (hash match, status not withdrawn) live with the catalog
(:func:`fwman.firmware.catalog.model.catalog_findings`); :func:`verify_image` adds them when given the entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwman.core.findings import Finding, Severity
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.gpu.card import Card

if TYPE_CHECKING:
    from fwman.firmware.catalog.model import CatalogEntry

DOWNGRADE_FLAG = "--allow-downgrade"


def version_key(version: str) -> tuple[int, ...] | None:
    """Return the first four fields of ``94.02.26.48.15`` as ints, None when it is not such a version.

    The fifth field is the OEM build: not ordered (EVGA replaced 94.02.42.80.AD by 94.02.42.80.27), so two
    images that differ only there are neither older nor newer.
    """
    parts = version.strip().split(".")
    if len(parts) != 5:
        return None
    try:
        return tuple(int(p, 16) for p in parts[:4])
    except ValueError:
        return None


def normalise_board_id(text: str) -> str | None:
    """Return a board ID as ``0x`` and four upper-case hex digits (``0x0240``); None when it is not hex."""
    try:
        return f"0x{int(text.strip().lower().removeprefix('0x'), 16):04X}"
    except ValueError:
        return None


def _ids(image: RomImage, card: Card) -> Finding:
    ev = {
        "image": f"{image.vendor_id}:{image.device_id}",
        "card": f"{card.vendor_id}:{card.device_id}",
        "image_offset": f"0x{image.offsets.get('device_id', 0):X}",
    }
    if (image.vendor_id, image.device_id) != (card.vendor_id.lower(), card.device_id.lower()):
        return Finding(
            id="rom.device",
            severity=Severity.BLOCK,
            message=f"image is for PCI device {ev['image']}, the card is {ev['card']}",
            evidence=ev,
            fix="use an image made for this GPU model",
        )
    return Finding(id="rom.device", severity=Severity.OK, message=f"PCI device {ev['card']} matches", evidence=ev)


def _subsystem(image: RomImage, card: Card) -> Finding:
    ev = {"image": image.subsystem or "unknown", "card": card.subsystem}
    if image.subsystem is None:
        return Finding(
            id="rom.subsystem",
            severity=Severity.BLOCK,
            message="image carries no subsystem ID (no NPDE rev 0x101 on its x86 image): cannot match the board",
            evidence=ev,
        )
    if image.subsystem != card.subsystem.lower():
        return Finding(
            id="rom.subsystem",
            severity=Severity.BLOCK,
            message=f"image is for board {image.subsystem}, the card is {card.subsystem}",
            evidence=ev,
            fix="use the image for this card's subsystem ID (see `fwman scan`)",
        )
    return Finding(id="rom.subsystem", severity=Severity.OK, message=f"subsystem {card.subsystem} matches", evidence=ev)


def _board(card: Card, board_ids: list[str], source: str) -> Finding:
    wanted = sorted({n for n in (normalise_board_id(b) for b in board_ids) if n is not None})
    card_id = normalise_board_id(card.board_id) if card.board_id else None
    ev = {"image": ", ".join(wanted) or "unknown", "card": card_id or "unknown", "source": source}
    if not wanted or card_id is None:
        return Finding(
            id="rom.board_id",
            severity=Severity.INFO,
            message="board ID not compared: no open parser finds it in an image; nvflash checks it again when flashing",
            evidence=ev,
            fix="pass --board-id from `nvflash --version FILE` (or use a catalog image) to compare it here",
        )
    if card_id not in wanted:
        return Finding(
            id="rom.board_id",
            severity=Severity.BLOCK,
            message=f"image board ID {ev['image']} ({source}) differs from the card's {card_id} "
            "(nvflash refuses this too)",
            evidence=ev,
        )
    return Finding(
        id="rom.board_id", severity=Severity.OK, message=f"board ID {card_id} matches ({source})", evidence=ev
    )


def _kind(image: RomImage) -> Finding:
    ev = {"kind": image.kind.value, "size": str(image.size)}
    if image.kind is RomKind.STRIPPED:
        return Finding(
            id="rom.kind",
            severity=Severity.BLOCK,
            message="a stripped image (NVGI prefix cut off, as VFIO guides do) is not a flash source",
            evidence=ev,
            fix="flash a full `nvflash --save` dump or the vendor's update image",
        )
    if image.kind is RomKind.SYSFS_TRUNCATED:
        return Finding(
            id="rom.kind",
            severity=Severity.BLOCK,
            message=f"a sysfs-truncated image ({image.pci_walk_images} of the card's images: x86 + EFI) "
            "is neither a flash source nor a backup",
            evidence=ev,
            fix="back a card up with `nvflash --save` (fwman backup), not /sys/bus/pci/devices/*/rom",
        )
    return Finding(
        id="rom.kind", severity=Severity.OK, message=f"{image.kind.description}: a flash source", evidence=ev
    )


def _checksum(image: RomImage) -> Finding:
    x86 = image.images[0]
    ev = {"sum": f"0x{image.x86_checksum:02X}", "x86_offset": f"0x{x86.offset:X}", "x86_length": str(x86.length)}
    if not image.x86_checksum_ok:
        return Finding(
            id="rom.x86_checksum",
            severity=Severity.BLOCK,
            message=f"x86 image bytes sum to 0x{image.x86_checksum:02X}, not 0: the file is damaged or modified",
            evidence=ev,
            fix="get a fresh copy; fwman never 'fixes' a checksum (Ampere images are signed)",
        )
    return Finding(id="rom.x86_checksum", severity=Severity.OK, message="x86 image checksum is valid", evidence=ev)


def _agreement(image: RomImage) -> list[Finding]:
    out: list[Finding] = []
    agree = image.subsystems_agree
    ev = {"nvgi": image.nvgi_subsystem or "absent", "npde": image.subsystem or "absent"}
    if agree is False:
        out.append(
            Finding(
                id="rom.nvgi_npde",
                severity=Severity.BLOCK,
                message=f"NVGI header says {image.nvgi_subsystem}, the x86 image says {image.subsystem}: "
                "the file was assembled from two boards' parts",
                evidence=ev,
            )
        )
    elif agree:
        out.append(
            Finding(id="rom.nvgi_npde", severity=Severity.OK, message="NVGI and NPDE subsystems agree", evidence=ev)
        )
    else:
        out.append(
            Finding(
                id="rom.nvgi_npde",
                severity=Severity.INFO,
                message="no NVGI header to cross-check (option-ROM file)",
                evidence=ev,
            )
        )
    for note in image.notes:
        if note.id in ("rfrd_offset_disagree", "rfrd_length_disagree", "nvgi_copy_disagree", "version_disagree"):
            out.append(
                Finding(
                    id=f"rom.{note.id}",
                    severity=Severity.WARN,
                    message=note.message,
                    evidence={"offset": f"0x{note.offset:X}" if note.offset is not None else "unknown"},
                    fix="compare the file with a fresh download or dump before flashing",
                )
            )
    return out


def _version(image: RomImage, card: Card) -> Finding:
    ev = {"image": image.version or "unknown", "card": card.vbios_version or "unknown"}
    if image.version is None:
        return Finding(
            id="rom.version",
            severity=Severity.BLOCK,
            message="image version unreadable (no BIT token B): the image cannot be identified",
            evidence=ev,
        )
    if card.vbios_version is None:
        return Finding(
            id="rom.version",
            severity=Severity.INFO,
            message=f"image is {image.version}; the card's version is unknown (nvidia-smi unavailable)",
            evidence=ev,
        )
    new, old = version_key(image.version), version_key(card.vbios_version)
    if new is None or old is None:
        return Finding(id="rom.version", severity=Severity.INFO, message="versions not comparable", evidence=ev)
    if new < old:
        return Finding(
            id="rom.version",
            severity=Severity.WARN,
            message=f"image {image.version} is older than the card's {card.vbios_version}",
            evidence=ev,
            fix="flash a downgrade only on purpose",
            override=DOWNGRADE_FLAG,
        )
    if new == old:
        same = image.version.upper() == card.vbios_version.upper()
        what = "the card's version" if same else f"the card's {card.vbios_version} apart from the OEM field"
        return Finding(
            id="rom.version",
            severity=Severity.INFO,
            message=f"image {image.version} is {what} (identity is the chain hash, not the string)",
            evidence=ev,
        )
    return Finding(
        id="rom.version",
        severity=Severity.OK,
        message=f"image {image.version} is newer than the card's {card.vbios_version}",
        evidence=ev,
    )


def verify_image(
    image: RomImage, card: Card, *, catalog_entry: CatalogEntry | None = None, board_id: str | None = None
) -> list[Finding]:
    """Return the findings for flashing ``image`` onto ``card`` (every check, passed or not).

    ``board_id`` is the image's board ID where known (``nvflash --version FILE``): compared with
    ``card.board_id``. ``catalog_entry`` is a :class:`fwman.firmware.catalog.model.CatalogEntry` the image claims to
    be; when given, its board's compatible board IDs are used when ``board_id`` is None, and the catalog's own
    checks (hash match, status not withdrawn: :func:`fwman.firmware.catalog.model.catalog_findings`) are appended.
    Raises nothing.
    """
    if board_id is not None:
        board_ids, source = [board_id], "given"
    elif catalog_entry is not None:
        board_ids, source = list(catalog_entry.board.board.board_ids), "catalog"
    else:
        board_ids, source = [], "unknown"
    findings = [
        _kind(image),
        _ids(image, card),
        _subsystem(image, card),
        _board(card, board_ids, source),
        _checksum(image),
        *_agreement(image),
        _version(image, card),
    ]
    if catalog_entry is not None:
        # imported here: the catalog module is heavier (TOML, signatures) and only needed with an entry
        from fwman.firmware.catalog.model import catalog_findings

        findings.extend(catalog_findings(image, catalog_entry))
    return findings
