"""The flash gates over facts built by hand: no Host, no nvflash (the Flasher's reading is test_flash.py's)."""

from __future__ import annotations

import hashlib

import pytest

from fixtures.nvflash.rig import LAUNCH_3987, REBAR_3987, image
from fwman.core.findings import Severity
from fwman.firmware.nvflash.gates import DeviceHolder, driver_gate
from fwman.firmware.ops.backup import BackupEntry
from fwman.firmware.ops.flash_gates import (
    NO_BACKUP_BIOS_FLAG,
    Adapter,
    HostFacts,
    ImageFacts,
    gates_verdict,
    host_gates,
    image_gates,
    overrides,
    reused_backups_verdict,
    size_verdict,
    taken_backups_verdict,
)
from fwman.firmware.ops.images import ImageSource
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import DOWNGRADE_FLAG
from fwman.gpu.card import Card

BUS = "0000:41:00.0"
NEW = image(REBAR_3987)
OLD = image(LAUNCH_3987)


def card_for(rom: RomImage, bus: str = BUS, version: str | None = LAUNCH_3987) -> Card:
    """Return the card ``rom`` is for, at ``bus``, running ``version``."""
    vendor, device = (rom.subsystem or "").split(":")
    return Card(bus, rom.vendor_id, rom.device_id, vendor, device, vbios_version=version)


def backup_of(card: Card, data: bytes, run: str = "20261201-100000") -> BackupEntry:
    """Return the backup entry of ``data`` taken from ``card``."""
    rom = parse_rom(data)
    return BackupEntry(
        path=f"/var/lib/fwman/backups/{run}/{card.bus_id}.rom",
        run=run,
        time="2026-12-01T10:00:00Z",
        card=card.bus_id,
        subsystem=card.subsystem,
        device_id=card.device_id,
        version=rom.version,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        md5=hashlib.md5(data, usedforsecurity=False).hexdigest(),
        chain_sha256=rom.chain_sha256,
    )


def ids(findings: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(f.id, f.severity.value) for f in findings]


# -- host gates ------------------------------------------------------------------------------------------------
def test_not_root_is_the_only_finding() -> None:
    # a non-root run reads nothing else: whatever the other facts say, the root gate alone answers
    found = host_gates(HostFacts(1000, (DeviceHolder(7, "python3", "/dev/nvidia0"),), ("nvidia",), ("5.590.0", "/x")))
    assert ids(found) == [("flash.root", "block")]
    assert found[0].fix == "run with sudo"


def test_a_held_device_blocks_with_the_command_that_frees_it_and_nvflash_is_not_reached() -> None:
    holders = (DeviceHolder(4242, "nvidia-persiste", "/dev/nvidiactl"), DeviceHolder(777, "python3", "/dev/nvidia0"))
    found = host_gates(HostFacts(0, holders, ("nvidia_uvm", "nvidia"), ("5.590.0", "/usr/bin/nvflash")))
    assert ids(found) == [("flash.root", "ok"), ("flash.device-busy", "block"), ("flash.driver-loaded", "block")]
    assert found[1].fix == "systemctl stop nvidia-persistenced; kill 777  # python3"
    assert found[1].message == "2 process(es) hold /dev/nvidia*: nvidia-persiste (pid 4242), python3 (pid 777)"
    assert found[2].fix == "rmmod nvidia_uvm nvidia"


def test_every_card_needs_an_nvflash_adapter() -> None:
    facts = HostFacts(
        0, (), (), ("5.590.0", "/usr/bin/nvflash"), (Adapter(BUS, index=2), Adapter("0000:61:00.0", problem="gone"))
    )
    found = host_gates(facts)
    assert ids(found) == [
        ("flash.root", "ok"),
        ("flash.driver", "ok"),
        ("flash.nvflash", "ok"),
        (f"flash.adapter.{BUS}", "ok"),
        ("flash.adapter.0000:61:00.0", "block"),
    ]
    assert found[2].message == "nvflash 5.590.0 at /usr/bin/nvflash" and found[3].message == f"{BUS} is nvflash <2>"
    verdict = gates_verdict(BUS, found)
    assert not verdict.allowed and verdict.message == f"{BUS}: blocked before any write: gone"
    assert verdict.error().exit_code == 3


def test_the_driver_gate_passes_an_idle_host() -> None:
    assert ids(driver_gate((), ())) == [("flash.driver", "ok")]


# -- image gates -----------------------------------------------------------------------------------------------
def test_an_image_for_another_subsystem_blocks() -> None:
    other = parse_rom(image("94.02.42.C0.05", 0x3982))
    found = image_gates(ImageFacts(card_for(parse_rom(NEW)), other, None, ImageSource("3982.rom", b"")))
    assert any(f.severity is Severity.BLOCK and "3842:3982" in f.message for f in found)


def test_no_second_firmware_chip_is_a_warning_only_the_flag_accepts() -> None:
    rom = parse_rom(NEW)
    card = card_for(rom)
    own = backup_of(card, OLD)
    source = ImageSource("backup", OLD, restore_of=own)
    found = image_gates(ImageFacts(card, parse_rom(OLD), None, source))
    assert ("flash.dual-bios", "warn") in ids(found)
    accepted = overrides(no_backup_bios_ok=False, allow_downgrade=False, restore=True)
    assert DOWNGRADE_FLAG in accepted and NO_BACKUP_BIOS_FLAG not in accepted  # a restore may go back
    blocked = gates_verdict(BUS, found, accepted)
    assert (
        [f.id for f in blocked.findings] == ["flash.dual-bios"] and blocked.hint and NO_BACKUP_BIOS_FLAG in blocked.hint
    )
    accepted = overrides(no_backup_bios_ok=True, allow_downgrade=False, restore=True)
    assert gates_verdict(BUS, found, accepted).allowed
    switch = ImageSource("backup", OLD, restore_of=own, dual_firmware_switch=True)
    assert ("flash.dual-bios", "ok") in ids(image_gates(ImageFacts(card, parse_rom(OLD), None, switch)))


def test_a_restore_takes_only_the_cards_own_unchanged_backup() -> None:
    rom = parse_rom(OLD)
    card = card_for(rom)
    own = backup_of(card, OLD)
    restore = [f for f in image_gates(ImageFacts(card, rom, None, ImageSource("b", OLD, restore_of=own)))]
    assert ("restore.owner", "ok") in ids(restore)
    assert not [f for f in restore if f.id.startswith("catalog")]  # the catalog has no say over a restore
    neighbour = backup_of(card_for(rom, "0000:61:00.0"), OLD)
    found = image_gates(ImageFacts(card, rom, None, ImageSource("b", OLD, restore_of=neighbour)))
    owner = next(f for f in found if f.id == "restore.owner")
    assert owner.severity is Severity.BLOCK and "belongs to card 0000:61:00.0" in owner.message
    changed = own.model_copy(update={"sha256": "0" * 64})
    found = image_gates(ImageFacts(card, rom, None, ImageSource("b", OLD, restore_of=changed)))
    assert ("restore.hash", "block") in ids(found)


# -- backups and size --------------------------------------------------------------------------------------------
def test_backup_verdicts_name_the_run_or_the_failures() -> None:
    from fwman.core.findings import Finding

    bad = Finding(id="backup.0000:61:00.0", severity=Severity.BLOCK, message="0000:61:00.0 has no backup in run r1")
    ok = Finding(id=f"backup.{BUS}", severity=Severity.OK, message="verified")
    verdict = reused_backups_verdict("r1", [ok, bad])
    assert verdict.message == "backups of run r1 do not cover and verify for every card"
    assert verdict.hint == bad.message and list(verdict.findings) == [ok, bad]
    assert reused_backups_verdict("r1", [ok]).allowed
    verdict = taken_backups_verdict(4, {"0000:61:00.0": "nvflash --save failed"})
    assert verdict.message == "no card is flashed: 1 of 4 backups failed (nvflash --save failed)"
    assert verdict.hint is not None and "fwman flash resume" in verdict.hint
    assert taken_backups_verdict(4, {}).allowed


@pytest.mark.parametrize(("cut", "blocked"), [(4096, True), (0, False)])
def test_a_full_dump_shorter_than_the_cards_own_is_no_flash_source(cut: int, blocked: bool) -> None:
    data = NEW[: len(NEW) - cut] if cut else NEW
    card = card_for(parse_rom(OLD))
    own = backup_of(card, OLD)
    rom = parse_rom(data)
    verdict = size_verdict(BUS, ImageSource("x.rom", data), rom, own)
    assert verdict.allowed is not blocked
    if blocked:
        assert verdict.message is not None and "a cut file is not a flash source" in verdict.message
        assert verdict.message.startswith(f"{BUS}: blocked before any write: the image is a full dump of")
        # a restore puts the card's own dump back, whatever its size
        assert size_verdict(BUS, ImageSource("b", data, restore_of=own), rom, own).allowed
