"""``fwman rom inspect`` and ``fwman rom verify``: the use cases (a VBIOS file read, and judged against a card),
whose results own their JSON shapes (``fwman.rom.inspect/1``, ``fwman.rom.verify/2``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwman.app.text import Line, Out, Result, Span, line, say, table
from fwman.core.errors import BlockedError, FwmanError, MissingError, UsageError, VerificationError
from fwman.core.findings import Finding, Severity, worst
from fwman.core.jsonout import meta
from fwman.core.names import board_id as valid_board_id
from fwman.firmware.catalog.load import find_entry_for_rom, load_catalog
from fwman.firmware.ops.backup import reported_board_id
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import check_compatible
from fwman.gpu.card import Card
from fwman.gpu.inventory import find_card, require_cards
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import CatalogEntry

#: how each severity's tag stands out in text (fwman.app.text.STYLES)
SEVERITY_STYLES = {"ok": "good", "info": "info", "warn": "loud", "block": "bad"}
#: no VBIOS is near this size (Ada dumps are about 2 MB); refuse before reading a wrong file into memory
MAX_IMAGE_BYTES = 64 << 20


def read_image(path: str) -> RomImage:
    """Return the parsed image of the file the user named. Raises MissingError; VerificationError (exit 4) when
    it is not a VBIOS fwman can read, or far larger than any (not a usage error: as documented)."""
    try:
        data = read_user_file(path, max_bytes=MAX_IMAGE_BYTES)
    except UsageError as e:
        raise VerificationError(e.message) from e
    return parse_rom(data)


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


#: the columns of the image table of ``rom inspect``
IMAGE_COLUMNS = ("#", "OFFSET", "LENGTH", "TYPE", "SIG", "PCI ID", "PCIR", "PCI-LAST", "NPDE", "NPDE-LAST")


@dataclass
class Inspection(Result):
    """A VBIOS file as read: every identity field with its offset, the image chain."""

    file: str
    image: RomImage = field(metadata=meta(via=rom_json))  # in JSON: the model plus its derived fields

    def text(self, verbose: int = 0) -> Out:
        """Return the identity lines, the image table, then the notes."""
        return [*self.head(), table(IMAGE_COLUMNS, self.rows()), *self.notes()]

    def head(self) -> list[Line]:
        """Return the lines above the image table: kind, size, every identity field with its offset and source,
        checksum, subsystem agreement, chain, BIT tokens, hashes; what is wrong stands out (style "red")."""
        image = self.image
        flash = Span("a flash source") if image.flashable else Span("NOT a flash source", "bad")
        out = [
            say(f"VBIOS file {self.file}"),
            line(f"{'Kind':<22}: {image.kind.description}; ", flash),
            say(f"{'Size':<22}: {image.size:,} bytes (0x{image.size:X})"),
        ]
        if image.declared_size is not None:
            said = f"the header says {image.declared_size:,} bytes, the file has {image.size:,}"
            out.append(say(f"{'Truncated':<22}: {said}", "red"))
        if image.container_head is not None:
            out.append(say(f"{'Prefix':<22}: {image.container_head} (meaning not documented); PCI images from "
                           f"0x{image.chain_offset:X}"))  # fmt: skip
        out.append(say())
        out += [say(f"{label:<22}: {value:<34} {at:<12} {source}".rstrip()) for label, value, at, source in
                identity_rows(image)]  # fmt: skip
        if image.x86_checksum is None:
            checksum = Span("not taken (the x86 image is cut off)", "red")
        elif image.x86_checksum_ok:
            checksum = Span("ok (sum 0x00)")
        else:
            checksum = Span(f"BAD (sum 0x{image.x86_checksum:02X})", "red")
        agree = {True: Span("agree"), False: Span("DISAGREE", "red"), None: Span("n/a")}[image.subsystems_agree]
        out += [line(f"{'x86 Checksum':<22}: ", checksum), line(f"{'NVGI/NPDE Subsystem':<22}: ", agree)]
        rfrd = ""
        if image.rfrd_offset is not None:
            chain = f"0x{image.rfrd_chain_offset or 0:X} + {image.rfrd_chain_length or 0:,}"
            rfrd = f" (RFRD @0x{image.rfrd_offset:X}: {chain})"
        out.append(say(f"{'Chain':<22}: 0x{image.chain_offset:X} + {image.chain_length:,} bytes{rfrd}"))
        if image.bit_offset is not None:
            out.append(say(f"{'BIT':<22}: @0x{image.bit_offset:X}, tokens {' '.join(t.id for t in image.bit_tokens)}"))
        return [*out, say(f"{'MD5':<22}: {image.md5}"), say(f"{'SHA-256':<22}: {image.sha256}"),
                say(f"{'Chain SHA-256':<22}: {image.chain_sha256}   (identity of the firmware)"), say()]  # fmt: skip

    def rows(self) -> list[list[str]]:
        """Return the image table rows: index, offset, length, type, signature, PCI ID, PCIR, NPDE."""
        return [
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
            for im in self.image.images
        ]

    def notes(self) -> list[Line]:
        """Return the notes below the table: where a PCI-rule reader stops, and the parser's notes (yellow)."""
        image, out = self.image, list[Line]()
        if image.pci_walk_images < len(image.images):
            last = image.pci_walk_images - 1
            out.append(say(f"note: a PCI-rule reader (the kernel's sysfs rom file) stops after image {last}"))
        for note in image.notes:
            where = f" @0x{note.offset:X}" if note.offset is not None else ""
            out.append(say(f"note: {note.message}{where}", "yellow"))
        return out


def inspect_rom(file: str) -> Inspection:
    """Return the VBIOS ``file`` (a file the user names) as read. Raises as :func:`read_image`."""
    return Inspection(file, read_image(file))


def _catalog_entry(host: Host, image: RomImage, device: str) -> tuple[CatalogEntry | None, Finding | None]:
    """Return (the catalog entry ``image`` is, or None) and, when no catalog is installed, the finding saying so."""
    try:
        catalog = load_catalog(host)
    except MissingError as e:
        return None, Finding(
            id="catalog.entry",
            severity=Severity.WARN,
            message=f"{e.message}: the image's hash cannot be checked against a published one",
            fix=e.hint,
        )
    return find_entry_for_rom(catalog, image, device=device), None


@dataclass
class RomVerdict(Result):
    """What ``rom verify`` found of ``file`` against ``card``: every check, and whether one blocks."""

    file: str
    image: RomImage
    card: Card
    findings: list[Finding]

    @property
    def blocks(self) -> list[Finding]:
        """Return the findings that block the flash."""
        return [f for f in self.findings if f.severity is Severity.BLOCK]

    @property
    def worst(self) -> Severity:
        """Return the worst severity of the findings."""
        return worst(self.findings)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.rom.verify/2`` (the GPU checked against, ``gpu``)."""
        card, image = self.card, self.image
        return {
            "file": self.file,
            "gpu": {
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
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "worst": self.worst.value,
            "blocked": bool(self.blocks),
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: the image, the card, then each check with its severity (and the fix of a
        warning or a block); when nothing blocks, the verdict: the worst severity, and that the file may be
        flashed."""
        image, card = self.image, self.card
        out: Out = [
            say(f"{self.file}: {image.version or 'unknown version'} for {image.subsystem or 'unknown board'} "
                f"({image.kind.description})"),
            say(f"card {card.bus_id}: {card.subsystem}, VBIOS {card.vbios_version or 'unknown'}"),
            say(),
        ]  # fmt: skip
        for f in self.findings:
            tag = Span(f"{f.severity.value.upper():<5}", SEVERITY_STYLES[f.severity.value])
            out.append(line("  ", tag, f"  {f.id:<22} {f.message}"))
            if f.fix and f.severity in (Severity.WARN, Severity.BLOCK):
                out.append(say(f"         {'':<22} fix: {f.fix}"))
        if self.blocks:
            return out
        return [*out, say(), say(f"verdict: {self.worst.value} — nothing blocks flashing this file onto {card.bus_id}")]

    def failure(self) -> FwmanError | None:
        """Return BlockedError (exit 3, the blocking findings attached) when a check blocks, else None."""
        blocks = self.blocks
        if not blocks:
            return None
        return BlockedError(
            f"{self.file} must not be flashed onto {self.card.bus_id}: {len(blocks)} blocking finding(s) "
            f"({', '.join(f.id for f in blocks)})",
            hint="blocks protect the hardware and cannot be overridden",
            findings=list(blocks),
        )


def verify_rom(host: Host, file: str, bus: str, board_id: str | None = None) -> RomVerdict:
    """Judge whether VBIOS ``file`` may be flashed onto the card at ``bus``; return every check.

    ``board_id`` is the image's board ID (from ``nvflash --version FILE``) to compare with the card's. Raises
    UsageError (unknown card, bad board ID), VerificationError (not a readable VBIOS), MissingError.
    """
    if board_id is not None:
        board_id = valid_board_id(board_id)
    image = read_image(file)
    card = find_card(require_cards(host), bus)
    if card.board_id is None:  # sysfs and nvidia-smi do not carry it: what nvflash reported at the last backup
        card = card.model_copy(update={"board_id": reported_board_id(host, card)})
    entry, no_catalog = _catalog_entry(host, image, card.device_id)
    findings = check_compatible(image, card, entry, board_id=board_id, catalog=no_catalog is None)
    if no_catalog is not None:
        findings.append(no_catalog)
    return RomVerdict(file, image, card, findings)
