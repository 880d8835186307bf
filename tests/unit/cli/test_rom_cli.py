"""`fwman rom inspect` and `fwman rom verify` through the CLI: output, exit codes, pinned JSON keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.romgen import RomSpec, build_rom
from fwman.gpu.inventory import find_card, scan_cards
from fwman.host.snapshot import SnapshotHost
from tests.support.env import EXAMPLE_HOST, FwmanEnv

SNAP = str(EXAMPLE_HOST)
# the example host: 41:00.0 is a 3842:3987 on 94.02.26.48.15, 01:00.0 a 3842:3982 on 94.02.42.C0.05
# a synthetic newer version that no catalog lists (so the catalog only warns "not in the catalog")
NEWER_3987 = RomSpec(version="94.02.71.00.01")

INSPECT_IMAGE_KEYS = {
    "kind", "size", "version", "vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id",
    "subsystem_origin", "nvgi_subsystem", "build_date", "modification_date", "sign_on", "version_string",
    "uefi_version", "images",
    "x86_checksum_ok", "x86_checksum", "chain_offset", "chain_length", "md5", "sha256", "chain_sha256",
    "nvgi_offsets", "rfrd_offset", "rfrd_chain_offset", "rfrd_chain_length", "bit_offset", "bit_tokens",
    "offsets", "notes", "subsystem", "flashable", "subsystems_agree", "pci_walk_images",
    "declared_size", "container_head", "x86_index",
}  # fmt: skip
CHAIN_IMAGE_KEYS = {
    "index", "offset", "length", "signature", "code_type", "code_type_name", "vendor_id", "device_id",
    "code_revision", "pcir_offset", "pcir_signature", "pcir_revision", "pcir_length_blocks", "pcir_last",
    "npde_offset", "npde_revision", "npde_length_blocks", "npde_last", "last",
}  # fmt: skip


def write(tmp_path: Path, spec: RomSpec, name: str = "image.rom") -> str:
    path = tmp_path / name
    path.write_bytes(build_rom(spec))
    return str(path)


def test_inspect_prints_the_nvflash_fields_with_offsets(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "inspect", write(tmp_path, RomSpec()))
    assert r.code == 0, r.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in r.stdout.splitlines() if ":" in line}
    assert "94.02.26.48.15" in lines["Version"] and "@0x" in lines["Version"]
    assert "3842-3987" in lines["IFR Subsystem ID"] and "@0x0000000C" in lines["IFR Subsystem ID"]
    assert "0x3842" in lines["Subsystem Vendor ID"]
    assert "0x3987" in lines["Subsystem ID"]
    assert "0x2204" in lines["Device ID"]
    for label in ("Build Date", "Modification Date", "UEFI Version", "MD5", "SHA-256", "Chain SHA-256"):
        assert label in lines
    assert "a flash source" in lines["Kind"]
    # the chain table: four images, and the note on where a PCI-rule reader stops
    assert "fwsec (0xE0)" in r.stdout and "efi (0x03)" in r.stdout
    assert "stops after image 1" in r.stdout


def test_inspect_says_where_a_pre_kepler_rom_keeps_its_subsystem(fwman: FwmanEnv, tmp_path: Path) -> None:
    spec = RomSpec(era="pre_kepler", kind="option_rom", version="70.00.21.00.01", device_id=0x06C0)
    r = fwman("rom", "inspect", write(tmp_path, spec))
    assert r.code == 0, r.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in r.stdout.splitlines() if ":" in line}
    assert "0x3842" in lines["Subsystem Vendor ID"] and "@0x00000054" in lines["Subsystem Vendor ID"]
    assert lines["Subsystem Vendor ID"].endswith("x86 image +0x54 (HWINFO block checks)")
    assert "0x3987" in lines["Subsystem ID"] and "@0x00000056" in lines["Subsystem ID"]
    assert "none (no NVGI header)" in lines["IFR Subsystem ID"]
    doc = fwman("rom", "inspect", write(tmp_path, spec), "--json").json()["image"]
    assert (doc["subsystem"], doc["subsystem_origin"]) == ("3842:3987", "rom_strap_word")


def test_inspect_json_keys_are_pinned(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = write(tmp_path, RomSpec())
    r = fwman("rom", "inspect", path, "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.rom.inspect/1"
    assert set(doc) == {"schema", "file", "image"}
    assert set(doc["image"]) == INSPECT_IMAGE_KEYS
    assert all(set(im) == CHAIN_IMAGE_KEYS for im in doc["image"]["images"])
    assert doc["image"]["kind"] == "nvgi_dump" and doc["image"]["subsystem"] == "3842:3987"
    assert doc["image"]["version"] == "94.02.26.48.15" and doc["file"] == path


def test_inspect_sysfs_image_says_it_is_not_a_flash_source(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "inspect", write(tmp_path, RomSpec(kind="sysfs")))
    assert r.code == 0
    assert "sysfs-truncated" in r.stdout and "NOT a flash source" in r.stdout


def test_inspect_garbage_is_exit_4_naming_field_and_offset(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"MZ" + bytes(2000))
    r = fwman("rom", "inspect", str(path))
    assert r.code == 4
    assert r.stdout == ""
    assert "fwman: error: VBIOS image: signature at offset 0x0: starts with 4D 5A 00 00" in r.stderr


def test_inspect_truncated_dump_shows_what_is_there_and_verify_refuses_it(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = tmp_path / "cut.rom"
    path.write_bytes(build_rom(RomSpec())[:0x20000])
    r = fwman("rom", "inspect", str(path))
    assert r.code == 0, r.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in r.stdout.splitlines() if ":" in line}
    assert "truncated file" in lines["Kind"] and "NOT a flash source" in lines["Kind"]
    declared = 0x9400 + 0xBE * 512  # the x86 NPDE sub-image length: where the cut image should end
    assert lines["Truncated"].endswith(f"the header says {declared:,} bytes, the file has {0x20000:,}")
    assert "94.02.26.48.15" in lines["Version"] and "0x3987" in lines["Subsystem ID"]
    assert "not taken" in lines["x86 Checksum"]
    doc = fwman("rom", "inspect", str(path), "--json").json()["image"]
    assert (doc["kind"], doc["declared_size"], doc["size"]) == ("truncated", declared, 0x20000)
    assert doc["x86_checksum_ok"] is None and doc["flashable"] is False and doc["subsystem"] == "3842:3987"
    v = fwman("rom", "verify", str(path), "--card", "41:00.0", "--snapshot", SNAP, "--json")
    assert v.code == 3
    found = {f["id"]: f for f in v.json()["findings"]}
    assert found["rom.kind"]["severity"] == "block" and "truncated" in found["rom.kind"]["message"]


def test_inspect_kepler_image_reads_the_hwinfo_subsystem(fwman: FwmanEnv, tmp_path: Path) -> None:
    spec = RomSpec(kind="option_rom", version="80.07.2C.00.02", npde_subsystem=False, hwinfo="block")
    r = fwman("rom", "inspect", write(tmp_path, spec))
    assert r.code == 0, r.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in r.stdout.splitlines() if ":" in line}
    assert "0x3842" in lines["Subsystem Vendor ID"] and "@0x00000054" in lines["Subsystem Vendor ID"]
    assert lines["Subsystem ID"].endswith("x86 image +0x56 (HWINFO block checks)")
    doc = fwman("rom", "inspect", write(tmp_path, spec), "--json").json()["image"]
    assert (doc["subsystem"], doc["subsystem_origin"], doc["version"]) == (
        "3842:3987",
        "rom_strap_word",
        "80.07.2C.00.02",
    )


def test_inspect_blackwell_container(fwman: FwmanEnv, tmp_path: Path) -> None:
    spec = RomSpec(
        kind="container", version="98.06.1F.40.45", device_id=0x2D04, subsystem_vendor=0x1043,
        subsystem_device=0x8A07, chain_offset=0x35400, dump_size=0x35400 + 0x600 * 512 + 0x4000,
    )  # fmt: skip
    path = write(tmp_path, spec)
    r = fwman("rom", "inspect", path)
    assert r.code == 0, r.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in r.stdout.splitlines() if ":" in line}
    assert "prefix fwman does not know" in lines["Kind"] and "NOT a flash source" in lines["Kind"]
    assert "4C C0 E0 0C (meaning not documented)" in lines["Prefix"] and "0x35400" in lines["Prefix"]
    assert "0x1043" in lines["Subsystem Vendor ID"] and "0x8A07" in lines["Subsystem ID"]
    assert "98.06.1F.40.45" in lines["Version"] and "0x2D04" in lines["Device ID"]
    assert "RFRD @0x35200: 0x35400" in lines["Chain"]
    doc = fwman("rom", "inspect", path, "--json").json()["image"]
    assert (doc["kind"], doc["container_head"], doc["chain_offset"]) == ("container", "4C C0 E0 0C", 0x35400)
    assert doc["subsystem"] == "1043:8a07" and doc["flashable"] is False
    v = fwman("rom", "verify", path, "--card", "41:00.0", "--snapshot", SNAP, "--json")
    found = {f["id"]: f for f in v.json()["findings"]}
    assert v.code == 3 and found["rom.kind"]["severity"] == "block"
    assert "4C C0 E0 0C" in found["rom.kind"]["message"]


def test_inspect_names_another_makers_option_rom(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "inspect", write(tmp_path, RomSpec(kind="option_rom", vendor_id=0x8086)))
    assert r.code == 4 and r.stdout == ""
    assert "not an NVIDIA image (vendor 8086)" in r.stderr and "image[0].pcir.vendor_id" in r.stderr
    assert "more than 16 images" not in r.stderr
    j = fwman("rom", "inspect", write(tmp_path, RomSpec(kind="option_rom", vendor_id=0x8086)), "--json")
    assert j.code == 4 and "not an NVIDIA image (vendor 8086)" in j.stderr


def test_inspect_missing_file_is_exit_5(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "inspect", str(tmp_path / "nope.rom"))
    assert r.code == 5
    assert "no such file" in r.stderr


def test_verify_matching_image_is_exit_0(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "verify", write(tmp_path, NEWER_3987), "--card", "41:00.0", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    assert "BLOCK" not in r.stdout
    assert "OK     rom.subsystem" in r.stdout
    assert "nothing blocks" in r.stdout


VERIFY_KEYS = {"schema", "file", "gpu", "image", "findings", "worst", "blocked"}
VERIFY_CARD_KEYS = {"bus_id", "vendor_id", "device_id", "subsystem", "vbios_version", "board_id"}
VERIFY_IMAGE_KEYS = {"kind", "version", "subsystem", "device", "flashable", "md5", "sha256", "chain_sha256"}
FINDING_KEYS = {"id", "severity", "message", "evidence", "fix", "override"}


def test_verify_json_keys_are_pinned(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "verify", write(tmp_path, NEWER_3987), "--card", "0000:41:00.0", "--json", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.rom.verify/2"
    assert set(doc) == VERIFY_KEYS
    assert set(doc["gpu"]) == VERIFY_CARD_KEYS and set(doc["image"]) == VERIFY_IMAGE_KEYS
    assert all(set(f) == FINDING_KEYS for f in doc["findings"])
    assert doc["blocked"] is False and doc["gpu"]["bus_id"] == "0000:41:00.0"
    assert {f["id"] for f in doc["findings"]} >= {"rom.kind", "rom.device", "rom.subsystem", "rom.version"}


def test_verify_wrong_board_is_exit_3_after_printing_findings(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "verify", write(tmp_path, NEWER_3987), "--card", "01:00.0", "--json", "--snapshot", SNAP)
    assert r.code == 3
    doc = r.json()  # the findings are printed before the exit
    assert doc["blocked"] is True and doc["worst"] == "block"
    blocks = [f["id"] for f in doc["findings"] if f["severity"] == "block"]
    assert blocks == ["rom.subsystem"]
    assert {f["id"]: f["severity"] for f in doc["findings"]}["catalog.entry"] == "warn"
    assert "rom.subsystem" in r.stderr and "must not be flashed" in r.stderr


@pytest.mark.parametrize("kind", ["stripped", "sysfs"])
def test_verify_refuses_stripped_and_sysfs_images(fwman: FwmanEnv, tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, RomSpec(version="94.02.42.80.27", kind=kind))  # type: ignore[arg-type]
    r = fwman("rom", "verify", path, "--card", "41:00.0", "--snapshot", SNAP)
    assert r.code == 3
    assert "BLOCK  rom.kind" in r.stdout


def test_verify_board_id_is_not_compared_with_nvidia_smis_board_id(fwman: FwmanEnv, tmp_path: Path) -> None:
    """nvidia-smi's <board_id> is derived from the PCI location (0x4100 for bus 0x41), not the VBIOS board ID:
    a scan leaves the card's board ID unknown, so --board-id cannot be compared and says so (nvflash checks it
    again when flashing; the mismatch block itself is covered in test_rom_verify)."""
    target = find_card(scan_cards(SnapshotHost(SNAP)), "41:00.0")
    assert target.board_id is None and target.driver_board_id == "0x4100"
    path = write(tmp_path, NEWER_3987)
    r = fwman("rom", "verify", path, "--card", "41:00.0", "--board-id", "0x4100", "--snapshot", SNAP)
    assert r.code == 0 and "INFO   rom.board_id" in r.stdout and "board ID not compared" in r.stdout


def test_verify_downgrade_warns_but_does_not_block(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = write(tmp_path, RomSpec(subsystem_device=0x3982))  # launch 94.02.26 for a card on 94.02.42.C0
    r = fwman("rom", "verify", path, "--card", "01:00.0", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    assert "WARN   rom.version" in r.stdout and "older" in r.stdout


def test_verify_unknown_card_is_exit_2(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("rom", "verify", write(tmp_path, NEWER_3987), "--card", "99:00.0", "--snapshot", SNAP)
    assert r.code == 2
    assert "no NVIDIA GPU at 0000:99:00.0" in r.stderr


def test_verify_garbage_is_exit_4(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = tmp_path / "zero.rom"
    path.write_bytes(bytes(4096))
    r = fwman("rom", "verify", str(path), "--card", "41:00.0", "--snapshot", SNAP)
    assert r.code == 4 and "signature at offset 0x0" in r.stderr


def test_help_teaches_with_examples(fwman: FwmanEnv) -> None:
    for sub in ("inspect", "verify"):
        r = fwman("rom", sub, "--help")
        assert r.code == 0 and "Examples:" in r.stdout and "fwman rom " + sub in r.stdout


def test_verify_consults_the_catalog_unverified_entry_blocks(fwman: FwmanEnv, tmp_path: Path) -> None:
    # the bundled catalog lists 3842:3987 94.02.42.80.27 without a published hash: "unverified", never flashed
    path = write(tmp_path, RomSpec(version="94.02.42.80.27"))
    r = fwman("rom", "verify", path, "--card", "41:00.0", "--json", "--snapshot", SNAP)
    assert r.code == 3
    sev = {f["id"]: f["severity"] for f in r.json()["findings"]}
    assert sev["catalog.hash"] == "block"
    assert sev["rom.subsystem"] == "ok" and sev["rom.kind"] == "ok"


def test_verify_withdrawn_image_blocks(fwman: FwmanEnv, tmp_path: Path) -> None:
    path = write(tmp_path, RomSpec(version="94.02.42.80.AD"))
    r = fwman("rom", "verify", path, "--card", "41:00.0", "--snapshot", SNAP)
    assert r.code == 3
    assert "BLOCK  catalog.status" in r.stdout and "withdrawn" in r.stdout
