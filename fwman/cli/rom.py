"""``fwman rom inspect`` and ``fwman rom verify``: read a VBIOS file, and judge it against a card."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.errors import BlockedError, MissingError, UsageError, VerificationError
from fwman.core.findings import Finding, Severity, worst
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.host.userfiles import read_user_file

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import CatalogEntry

#: no VBIOS is near this size (Ada dumps are about 2 MB); refuse before reading a wrong file into memory
MAX_IMAGE_BYTES = 64 << 20
SEVERITY_COLOURS = {"ok": "green", "info": "blue", "warn": "yellow", "block": "red"}


def _read_image(path: str) -> bytes:
    """Return the bytes of the image file the user named. Raises MissingError; VerificationError when too large.

    A file far larger than any VBIOS is "not a readable VBIOS" (exit 4, as documented), not a usage error.
    """
    try:
        return read_user_file(path, max_bytes=MAX_IMAGE_BYTES)
    except UsageError as e:
        raise VerificationError(e.message) from e


def rom_json(image: RomImage) -> dict[str, Any]:
    """Return the stable JSON form of a parsed image (the model plus its derived fields)."""
    doc = image.model_dump(mode="json")
    doc["subsystem"] = image.subsystem
    doc["flashable"] = image.flashable
    doc["subsystems_agree"] = image.subsystems_agree
    doc["pci_walk_images"] = image.pci_walk_images
    return doc


def _at(image: RomImage, key: str) -> str:
    off = image.offsets.get(key)
    return f"@0x{off:08X}" if off is not None else ""


def _upper_hex(value: str | None) -> str:
    return f"0x{value.upper()}" if value else "unknown"


def identity_rows(image: RomImage) -> list[tuple[str, str, str, str]]:
    """Return (label, value, offset, source) rows in the order and wording of ``nvflash --version``."""
    nvgi = image.nvgi_subsystem.upper().replace(":", "-") if image.nvgi_subsystem else "none (no NVGI header)"

    def val(v: str | None) -> str:
        return v if v is not None else "unknown"

    if image.subsystem_origin == "rom_strap_word":
        sub_v, sub_d = "x86 image +0x54 (HWINFO block checks)", "x86 image +0x56 (HWINFO block checks)"
    else:
        sub_v, sub_d = "NPDE +0x10", "NPDE +0x12"

    return [
        ("Version", val(image.version), _at(image, "version"), "BIT token B"),
        ("Build Date", val(image.build_date), _at(image, "build_date"), "BIT token i +0x0F"),
        ("Modification Date", val(image.modification_date), _at(image, "modification_date"), "x86 image +0x38"),
        ("IFR Subsystem ID", nvgi, _at(image, "nvgi_subsystem"), "NVGI +0x0C"),
        ("Subsystem Vendor ID", _upper_hex(image.subsystem_vendor_id), _at(image, "subsystem_vendor_id"), sub_v),
        ("Subsystem ID", _upper_hex(image.subsystem_device_id), _at(image, "subsystem_device_id"), sub_d),
        ("Vendor ID", _upper_hex(image.vendor_id), _at(image, "vendor_id"), "x86 PCIR +0x04"),
        ("Device ID", _upper_hex(image.device_id), _at(image, "device_id"), "x86 PCIR +0x06"),
        ("UEFI Version", val(image.uefi_version), _at(image, "uefi_version"), "EFI PCIR code revision"),
        ("Sign-On", val(image.sign_on), _at(image, "sign_on"), "BIT token S"),
        ("Version String", val(image.version_string), _at(image, "version_string"), "BIT token S"),
    ]


def _print_inspect(app: AppContext, path: str, image: RomImage) -> None:
    flash = "a flash source" if image.flashable else app.style("NOT a flash source", fg="red", bold=True)
    app.echo(f"VBIOS file {path}")
    app.echo(f"{'Kind':<22}: {image.kind.description}; {flash}")
    app.echo(f"{'Size':<22}: {image.size:,} bytes (0x{image.size:X})")
    if image.declared_size is not None:
        app.echo(
            app.style(
                f"{'Truncated':<22}: the header says {image.declared_size:,} bytes, the file has {image.size:,}",
                fg="red",
            )
        )
    if image.container_head is not None:
        app.echo(
            f"{'Prefix':<22}: {image.container_head} (meaning not documented); PCI images from 0x{image.chain_offset:X}"
        )
    app.echo()
    for label, value, at, source in identity_rows(image):
        app.echo(f"{label:<22}: {value:<34} {at:<12} {source}".rstrip())
    if image.x86_checksum is None:
        sum_text = app.style("not taken (the x86 image is cut off)", fg="red")
    elif image.x86_checksum_ok:
        sum_text = "ok (sum 0x00)"
    else:
        sum_text = app.style(f"BAD (sum 0x{image.x86_checksum:02X})", fg="red")
    app.echo(f"{'x86 Checksum':<22}: {sum_text}")
    agree = {True: "agree", False: app.style("DISAGREE", fg="red"), None: "n/a"}[image.subsystems_agree]
    app.echo(f"{'NVGI/NPDE Subsystem':<22}: {agree}")
    rfrd = ""
    if image.rfrd_offset is not None:
        rfrd = (
            f" (RFRD @0x{image.rfrd_offset:X}: 0x{image.rfrd_chain_offset or 0:X} + {image.rfrd_chain_length or 0:,})"
        )
    app.echo(f"{'Chain':<22}: 0x{image.chain_offset:X} + {image.chain_length:,} bytes{rfrd}")
    if image.bit_offset is not None:
        tokens = " ".join(t.id for t in image.bit_tokens)
        app.echo(f"{'BIT':<22}: @0x{image.bit_offset:X}, tokens {tokens}")
    app.echo(f"{'MD5':<22}: {image.md5}")
    app.echo(f"{'SHA-256':<22}: {image.sha256}")
    app.echo(f"{'Chain SHA-256':<22}: {image.chain_sha256}   (identity of the firmware)")
    app.echo()
    rows = []
    for im in image.images:
        rows.append(
            [
                str(im.index),
                f"0x{im.offset:X}",
                f"{im.length:,}",
                f"{im.code_type_name} (0x{im.code_type:02X})",
                im.signature.upper(),
                f"{im.vendor_id}:{im.device_id}",
                f"0x{im.pcir_offset:X}",
                "last" if im.pcir_last else "-",
                "-" if im.npde_offset is None else f"0x{im.npde_offset:X} r{im.npde_revision or 0:X}",
                "-" if im.npde_last is None else ("last" if im.npde_last else "-"),
            ]
        )
    app.table(["#", "OFFSET", "LENGTH", "TYPE", "SIG", "PCI ID", "PCIR", "PCI-LAST", "NPDE", "NPDE-LAST"], rows)
    if image.pci_walk_images < len(image.images):
        app.echo(f"note: a PCI-rule reader (the kernel's sysfs rom file) stops after image {image.pci_walk_images - 1}")
    for note in image.notes:
        where = f" @0x{note.offset:X}" if note.offset is not None else ""
        app.echo(app.style(f"note: {note.message}{where}", fg="yellow"))


@click.group()
def rom() -> None:
    """Read VBIOS files: what is in them, and whether one fits a card.

    \b
    Examples:
      fwman rom inspect backup-41.rom
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0
    """


@rom.command()
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@common_options
@pass_app
def inspect(app: AppContext, file: str, as_json: bool) -> None:
    """Show every identity field of a VBIOS FILE with the offset it was read from, and the image chain.

    Reads full `nvflash --save` dumps (NVGI), vendor option ROMs (55 AA), stripped images, the truncated
    image Linux exposes at /sys/bus/pci/devices/*/rom, files cut short (shown as far as they go: "the
    header says N bytes, the file has M") and files behind a prefix no source documents (the Blackwell
    image seen in public), walked to their PCI images. All but the first two are recognised and reported,
    and `rom verify` refuses them as flash sources. Another maker's option ROM is named as such. The labels
    follow `nvflash --version`. Nothing is modified.

    \b
    Examples:
      fwman rom inspect backup-41.rom
      fwman rom inspect EVGA-ReBAR.rom --json | jq '.image | {version, subsystem, chain_sha256}'

    Exit 4 when FILE is not a VBIOS image fwman can read (the error names the field and offset).
    """
    image = parse_rom(_read_image(file))
    if as_json:
        app.emit_json("rom.inspect", {"file": file, "image": rom_json(image)})
        return
    _print_inspect(app, file, image)


def finding_json(f: Finding) -> dict[str, Any]:
    """Return the stable JSON form of a finding."""
    return f.model_dump(mode="json")


def _catalog_entry(app: AppContext, image: RomImage, device: str) -> tuple[CatalogEntry | None, Finding | None]:
    """Return (the catalog entry ``image`` is, or None) and, when no catalog is installed, the finding saying so."""
    from fwman.firmware.catalog.load import find_entry_for_rom, load_catalog

    try:
        catalog = load_catalog(app.host)
    except MissingError as e:
        return None, Finding(
            id="catalog.entry",
            severity=Severity.WARN,
            message=f"{e.message}: the image's hash cannot be checked against a published one",
            fix=e.hint,
        )
    return find_entry_for_rom(catalog, image, device=device), None


@rom.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--card", "bus", required=True, metavar="BUS", help="The target card's PCI bus id (see `fwman scan`).")
@click.option(
    "--board-id",
    metavar="HEX",
    help="The image's board ID (from `nvflash --version FILE`) to compare with the card's.",
)
@json_option
@common_options
@pass_app
def verify(app: AppContext, file: str, bus: str, board_id: str | None, as_json: bool) -> None:
    """Check whether FILE may be flashed onto the card at BUS; print every check and its result.

    Blocks (exit 3): wrong vendor/device or subsystem, wrong board ID, a stripped, sysfs-truncated, truncated
    or container image,
    a bad x86 checksum, NVGI and NPDE disagreeing, no readable version, and from the VBIOS catalog: a hash
    that differs from the published one, no published hash at all ("unverified"), a withdrawn image. Warns:
    an image older than the card's firmware, an image not in the catalog, RFRD or NVGI-copy inconsistencies.
    Nothing is written; the card is read from sysfs and nvidia-smi (or from --snapshot).

    \b
    Examples:
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0
      fwman rom verify EVGA-ReBAR.rom --card 41:00.0 --board-id 0x0240 --json
      fwman rom verify img.rom --card 41:00.0 --snapshot fixtures/hosts/rig-4x3090

    Exit 0 when nothing blocks, 3 when a check blocks, 4 when FILE is unreadable as a VBIOS, 2 for an
    unknown card.
    """
    from fwman.core.names import board_id as valid_board_id
    from fwman.firmware.ops.backup import reported_board_id
    from fwman.firmware.verify.compatible import check_compatible
    from fwman.gpu.inventory import find_card, require_cards

    if board_id is not None:
        board_id = valid_board_id(board_id)
    image = parse_rom(_read_image(file))
    card = find_card(require_cards(app.host), bus)
    if card.board_id is None:  # sysfs and nvidia-smi do not carry it: what nvflash reported at the last backup
        card = card.model_copy(update={"board_id": reported_board_id(app.host, card)})
    entry, no_catalog = _catalog_entry(app, image, card.device_id)
    findings = check_compatible(image, card, entry, board_id=board_id, catalog=no_catalog is None)
    if no_catalog is not None:
        findings.append(no_catalog)
    blocks = [f for f in findings if f.severity is Severity.BLOCK]
    if as_json:
        app.emit_json(
            "rom.verify",
            {
                "file": file,
                "card": {
                    "bus_id": card.bus_id,
                    "vendor_id": card.vendor_id,
                    "device_id": card.device_id,
                    "subsystem": card.subsystem,
                    "vbios_version": card.vbios_version,
                    "board_id": card.board_id,
                },
                "image": {
                    "kind": image.kind.value,
                    "version": image.version,
                    "subsystem": image.subsystem,
                    "device": f"{image.vendor_id}:{image.device_id}",
                    "flashable": image.flashable,
                    "md5": image.md5,
                    "sha256": image.sha256,
                    "chain_sha256": image.chain_sha256,
                },
                "findings": [finding_json(f) for f in findings],
                "worst": worst(findings).value,
                "blocked": bool(blocks),
            },
        )
    else:
        app.echo(
            f"{file}: {image.version or 'unknown version'} for {image.subsystem or 'unknown board'} "
            f"({image.kind.description})"
        )
        app.echo(f"card {card.bus_id}: {card.subsystem}, VBIOS {card.vbios_version or 'unknown'}")
        app.echo()
        for f in findings:
            tag = app.style(f"{f.severity.value.upper():<5}", fg=SEVERITY_COLOURS[f.severity.value], bold=True)
            app.echo(f"  {tag}  {f.id:<22} {f.message}")
            if f.fix and f.severity in (Severity.WARN, Severity.BLOCK):
                app.echo(f"         {'':<22} fix: {f.fix}")
    if blocks:
        raise BlockedError(
            f"{file} must not be flashed onto {card.bus_id}: {len(blocks)} blocking finding(s) "
            f"({', '.join(f.id for f in blocks)})",
            hint="blocks protect the hardware and cannot be overridden",
            findings=list(blocks),
        )
    if not as_json:
        app.echo()
        app.echo(f"verdict: {worst(findings).value} — nothing blocks flashing this file onto {card.bus_id}")
