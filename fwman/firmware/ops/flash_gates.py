"""The flash gates: pure functions over facts, as doctor's checks are, and the verdict they add up to.

A gate looks only at the facts it is given, never at the host: :class:`~fwman.firmware.ops.flash.Flasher` gathers them
(euid, who holds the device, nvflash and its adapters, nvflash's identity of the card and of the image, the backups),
calls the gates, and runs nvflash only when the verdict allows it. The gates, in the order a flash meets them:

1. :func:`host_gates` (``flash.root``; ``flash.driver``/``flash.device-busy``/``flash.driver-loaded``, from
   :func:`fwman.firmware.nvflash.gates.driver_gate`; ``flash.nvflash``; ``flash.adapter.<bus>``) over
   :class:`HostFacts`;
2. :func:`image_gates` (identity, board ID, catalog status: :func:`fwman.firmware.verify.compatible.check_compatible`;
   ``restore.owner``/``restore.hash`` for a restore; ``flash.dual-bios``) over :class:`ImageFacts`, then
   :func:`gates_verdict` with the :func:`overrides` the user passed;
3. the backups: :func:`reused_backups_verdict` or :func:`taken_backups_verdict`;
4. :func:`size_verdict`: a full dump shorter than the card's own (cut short) is no flash source.

Test a gate with facts built by hand (tests/unit/firmware/ops/test_flash_gates.py); the Flasher's reading and nvflash
are tested on the stand-in rig (tests/unit/firmware/ops/test_flash.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fwman.core.errors import BlockedError
from fwman.core.findings import Finding, Severity, Topic, blocking
from fwman.firmware.nvflash.gates import DeviceHolder, driver_gate
from fwman.firmware.ops.backup import BackupEntry
from fwman.firmware.ops.images import ImageSource
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.verify.compatible import DOWNGRADE_FLAG, check_compatible
from fwman.gpu.card import Card

NO_BACKUP_BIOS_FLAG = "--i-understand-no-backup-bios"


@dataclass(frozen=True)
class Adapter:
    """What nvflash says of one card: its adapter index, or why it has none for it."""

    bus_id: str
    index: int | None = None
    problem: str | None = None  # nvflash's refusal (no adapter at that bus, several), when index is None


@dataclass(frozen=True)
class HostFacts:
    """What the host-wide gates look at. A fact the gates do not reach is not read, so it stays None/empty:
    nothing is read past a root check that fails, and nvflash is not asked while the driver holds the cards
    (it would refuse anyway)."""

    euid: int
    holders: tuple[DeviceHolder, ...] | None = None
    modules: tuple[str, ...] | None = None  # the nvidia* modules loaded, in unload order
    nvflash: tuple[str, str] | None = None  # (version, path)
    adapters: tuple[Adapter, ...] = ()


@dataclass(frozen=True)
class ImageFacts:
    """What the image gates look at: the card as nvflash reads it now, the image, and its catalog facts."""

    card: Card  # version and board ID as nvflash read them from the EEPROM just now
    rom: RomImage
    image_board_id: str | None  # the board ID nvflash reads from the image file, None when it prints none
    source: ImageSource  # the catalog entry (status, hashes), the owner's MD5, a restore's backup, the dual switch


@dataclass(frozen=True)
class GateVerdict:
    """What a gate decided: allowed (``message`` None), or blocked with the reasons.

    ``message`` and ``hint`` are the refusal as the user reads it, ``detail`` the line the journal records,
    ``findings`` what the refusal carries (for ``--json``).
    """

    message: str | None = None
    hint: str | None = None
    detail: str = ""
    findings: tuple[Finding, ...] = ()

    @property
    def allowed(self) -> bool:
        """Return True when nothing blocks."""
        return self.message is None

    def error(self) -> BlockedError:
        """Return the refusal as the BlockedError (exit 3) that stops the flash before any write."""
        return BlockedError(self.message or "blocked", hint=self.hint, findings=list(self.findings))


ALLOWED = GateVerdict()


def root_gate(euid: int) -> Finding:
    """Return the ``flash.root`` finding: flashing needs root."""
    if euid != 0:
        return Topic("flash.root").block("flashing needs root", "run with sudo")
    return Topic("flash.root").ok("running as root")


def host_gates(facts: HostFacts) -> list[Finding]:
    """Return the host-wide findings (root, driver, nvflash, an adapter per card), stopping where one blocks
    what follows (not root: nothing else; the driver holds the cards: nvflash is not asked)."""
    root = root_gate(facts.euid)
    if root.severity is Severity.BLOCK:
        return [root]
    findings = [root]
    driver = driver_gate(facts.holders or (), facts.modules or ())
    findings.extend(driver)
    if blocking(driver) or facts.nvflash is None:
        return findings
    version, path = facts.nvflash
    findings.append(Topic("flash.nvflash").ok(f"nvflash {version} at {path}"))
    for a in facts.adapters:
        if a.index is not None:
            findings.append(Topic(f"flash.adapter.{a.bus_id}").ok(f"{a.bus_id} is nvflash <{a.index}>"))
        else:
            findings.append(Topic(f"flash.adapter.{a.bus_id}").block(a.problem or "no adapter"))
    return findings


def restore_gates(card: Card, entry: BackupEntry, rom: RomImage) -> list[Finding]:
    """Return the findings for putting backup ``entry`` (whose image is ``rom``) back onto ``card``: only the
    card's own backup, unchanged since it was recorded."""
    out: list[Finding] = []
    if not entry.is_of(card):
        out.append(
            Topic("restore.owner").block(
                f"this backup belongs to card {entry.card} ({entry.subsystem}), not {card.bus_id} ({card.subsystem})",
                f"restore {card.bus_id} from its own backups: fwman backup list",
            )
        )
    if rom.sha256 != entry.sha256:
        out.append(Topic("restore.hash").block("backup changed since it was recorded"))
    if not out:
        out.append(Topic("restore.owner").ok(f"backup of {card.bus_id} from run {entry.run}"))
    return out


def dual_firmware_gate(switch: bool | None) -> Finding:
    """Return the ``flash.dual-bios`` finding: a warning (overridable) unless the catalog says the board has a
    second firmware chip to fall back on."""
    if switch:
        return Topic("flash.dual-bios").ok("the board has a second firmware chip (switch)")
    return Topic("flash.dual-bios").warn(
        "the catalog does not say this board has a second firmware chip: a failed flash has no fallback",
        f"confirm you can recover the card (another GPU for display, a programmer), then pass {NO_BACKUP_BIOS_FLAG}",
        override=NO_BACKUP_BIOS_FLAG,
    )


def image_gates(facts: ImageFacts) -> list[Finding]:
    """Return the findings for writing ``facts.source`` onto ``facts.card``: identity, board ID and catalog
    status (a restore puts the card's own backup back: the catalog has no say over it, the restore gates do),
    then the second firmware chip."""
    source = facts.source
    restore = source.restore_of
    entry = None if restore is not None else source.catalog_entry
    findings = check_compatible(
        facts.rom,
        facts.card,
        entry,
        board_id=facts.image_board_id,
        override_md5=source.override_md5,
        catalog=restore is None,
    )
    if restore is not None:
        findings.extend(restore_gates(facts.card, restore, facts.rom))
    findings.append(dual_firmware_gate(source.dual_firmware_switch))
    return findings


def overrides(*, no_backup_bios_ok: bool, allow_downgrade: bool, restore: bool) -> list[str]:
    """Return the warning overrides in effect: the flags the user passed (a restore may always go back to an
    older version: it is the card's own firmware)."""
    out = [NO_BACKUP_BIOS_FLAG] if no_backup_bios_ok else []
    if allow_downgrade or restore:
        out.append(DOWNGRADE_FLAG)
    return out


def gates_verdict(bus_id: str, findings: Sequence[Finding], accepted: Sequence[str] = ()) -> GateVerdict:
    """Return the verdict of the host and image gates' ``findings`` for card ``bus_id`` with the ``accepted``
    overrides: blocked by every ``block`` and each warning not overridden; the hint is the first fix."""
    bad = blocking(findings, accepted)
    if not bad:
        return ALLOWED
    return GateVerdict(
        message=f"{bus_id}: blocked before any write: {bad[0].message}",
        hint=next((f.fix for f in bad if f.fix), None),
        detail="; ".join(f.message for f in bad),
        findings=tuple(bad),
    )


def reused_backups_verdict(run: str, findings: Sequence[Finding]) -> GateVerdict:
    """Return the verdict on reusing the backups of ``run`` (``findings``: one per card, from checking them)."""
    bad = blocking(findings)
    if not bad:
        return ALLOWED
    message = f"backups of run {run} do not cover and verify for every card"
    return GateVerdict(message=message, hint=bad[0].message, detail=message, findings=tuple(findings))


def taken_backups_verdict(total: int, failed: Mapping[str, str]) -> GateVerdict:
    """Return the verdict on the backups just taken of ``total`` cards (``failed``: bus ID -> why it failed)."""
    if not failed:
        return ALLOWED
    first = next(iter(failed.values()))
    message = f"no card is flashed: {len(failed)} of {total} backups failed ({first})"
    return GateVerdict(
        message=message,
        hint="every card needs a verified backup before any flash; fix the cause and run again (after a "
        "failed write, use `fwman flash resume`: it reuses the backups taken before it)",
        detail=message,
    )


def cut_source(source: ImageSource, rom: RomImage, own: BackupEntry) -> str | None:
    """Return why ``source`` looks cut short, or None. A full dump (``NVGI``) shorter than this card's own full
    dump (its backup ``own``, taken by nvflash from the same EEPROM) has lost what follows the chain: the
    catalog's chain-hash check alone would take it ("differs only in per-card data")."""
    if source.restore_of is not None or rom.kind is not RomKind.NVGI_DUMP or len(source.data) >= own.size:
        return None
    return (
        f"the image is a full dump of {len(source.data):,} bytes, shorter than this card's own "
        f"({own.size:,} bytes, {own.path}): a cut file is not a flash source"
    )


def size_verdict(bus_id: str, source: ImageSource, rom: RomImage, own: BackupEntry) -> GateVerdict:
    """Return the verdict on the image's size against the card's own backup (:func:`cut_source`)."""
    cut = cut_source(source, rom, own)
    if cut is None:
        return ALLOWED
    return GateVerdict(
        message=f"{bus_id}: blocked before any write: {cut}",
        hint="use the whole file (fwman fetch it again, or take the card's own dump: fwman backup list)",
        detail=cut,
    )
