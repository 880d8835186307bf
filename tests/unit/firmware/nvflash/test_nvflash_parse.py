"""nvflash output parsers and command builders: documented lines, the stand-in's real output, fuzzing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.nvflash.rig import STANDIN_DIR, build_rig
from fwman.core.errors import ParseError
from fwman.firmware.nvflash import protocol as nvflash
from fwman.firmware.nvflash.protocol import FlashOutcome

DOC_LIST = "<1> GeForce RTX 3080     (10DE,2206,1043,87B0) S:00,B:0F,D:00,F:00"


def test_list_line_from_the_docs() -> None:
    (a,) = nvflash.parse_list(nvflash.BANNER_PREFIX + " (Version 5.867.0)\n" + DOC_LIST + "\n")
    assert (a.index, a.name, a.bus_id) == (1, "GeForce RTX 3080", "0000:0f:00.0")
    assert (a.vendor_id, a.device_id, a.subsystem) == ("10de", "2206", "1043:87b0")


def test_list_line_of_older_builds_with_h_suffix() -> None:
    (a,) = nvflash.parse_list(DOC_LIST + " H:--:NRM\n")
    assert a.bus_id == "0000:0f:00.0"


@pytest.mark.parametrize(
    "line",
    [
        "<1> GeForce RTX 3080 (10DE,2206,1043) S:00,B:0F,D:00,F:00",
        "<x> GeForce (10DE,2206,1043,87B0) S:00,B:0F,D:00,F:00",
        "<1> GeForce RTX 3080 (10DE,2206,1043,87B0)",
    ],
)
def test_malformed_list_line_is_a_parse_error_naming_the_line(line: str) -> None:
    with pytest.raises(ParseError) as e:
        nvflash.parse_list("banner\n" + line)
    assert e.value.offset == 2


def test_duplicate_index_is_refused() -> None:
    with pytest.raises(ParseError, match="twice"):
        nvflash.parse_list(DOC_LIST + "\n" + DOC_LIST.replace("B:0F", "B:10"))


def test_block_with_documented_keys() -> None:
    text = """Version               : 94.02.42.40.65
Build Date            : 11/06/20
Modification Date     : 03/24/21
IFR Subsystem ID      : 1043-87B0
Subsystem Vendor ID   : 0x1043
Subsystem ID          : 0x87B0
UEFI Version          : N/A
Board ID              : 0x0240
Device ID             : 0x2206
"""
    b = nvflash.parse_block(text)
    assert (b.version, b.subsystem, b.board_id, b.device_id) == ("94.02.42.40.65", "1043:87b0", "0x0240", "2206")
    assert b.uefi_version is None  # N/A is unknown, not a value
    assert b.modification_date == "03/24/21"


def test_block_where_ifr_and_subsystem_disagree_is_refused() -> None:
    text = "Version : 1\nIFR Subsystem ID : 1043-87B0\nSubsystem Vendor ID : 0x1043\nSubsystem ID : 0x88E2\n"
    with pytest.raises(ParseError, match="disagrees"):
        nvflash.parse_block(text)


def test_block_without_version_is_refused() -> None:
    with pytest.raises(ParseError, match="Version"):
        nvflash.parse_block("Board ID : 0x0240\n")


def test_tool_version_from_banner() -> None:
    assert nvflash.parse_tool_version("NVIDIA Firmware Update Utility (Version 5.867.0)\n") == "5.867.0"
    with pytest.raises(ParseError, match="banner"):
        nvflash.parse_tool_version("bash: nvflash: Permission denied\n")


DOC_FLASH_OK = """NVIDIA Firmware Update Utility (Version 5.867.0)
Checking for matches between display adapter(s) and image(s)...

Current      - Version:94.02.42.40.65 ID:10DE:2206:1043:87B0
Replace with - Version:94.02.42.40.70 ID:10DE:2206:1043:87B0

Update display adapter firmware?
Press 'y' to confirm (any other key to abort): y
\r[====      ] 40%\r[==========] 100%
A reboot is required for the update to take effect.
"""


def test_flash_success_needs_the_reboot_line() -> None:
    t = nvflash.parse_flash(DOC_FLASH_OK)
    assert t.outcome is FlashOutcome.SUCCESS
    assert (t.current_version, t.replace_version) == ("94.02.42.40.65", "94.02.42.40.70")
    assert t.current_ids == "10de:2206:1043:87b0" and t.prompted
    cut = DOC_FLASH_OK.split("A reboot")[0]
    assert nvflash.parse_flash(cut).outcome is FlashOutcome.INCOMPLETE


def test_flash_board_id_mismatch_from_the_docs() -> None:
    text = """WARNING: None of the firmware image compatible Board ID's
match the Board ID of the adapter.
  Adapter Board ID:        03E3
  Firmware image Board ID: 0475
ERROR: Board ID mismatch.
Nothing changed!
"""
    t = nvflash.parse_flash(text)
    assert t.outcome is FlashOutcome.BOARD_ID_MISMATCH
    assert (t.adapter_board_id, t.image_board_id) == ("0x03e3", "0x0475")
    assert t.nothing_changed


def test_flash_subsystem_mismatch_and_driver_loaded() -> None:
    text = (
        "WARNING: Firmware image PCI Subsystem ID (1043.88E2)\n"
        "  does not match adapter PCI Subsystem ID (1043.889C).\nNothing changed!\n"
    )
    t = nvflash.parse_flash(text)
    assert t.outcome is FlashOutcome.SUBSYSTEM_MISMATCH
    assert (t.image_subsystem, t.adapter_subsystem) == ("1043:88e2", "1043:889c")
    loaded = (
        "ERROR: In order to avoid the irreparable damage to your graphics adapter it is necessary to unload the "
        "NVIDIA kernel driver first: rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia_peermem nvidia\n"
    )
    assert nvflash.parse_flash(loaded).outcome is FlashOutcome.DRIVER_LOADED


def test_command_builders() -> None:
    assert nvflash.save_argv(2, "/x.rom") == ["nvflash", "--index", "2", "--save", "/x.rom"]
    assert nvflash.flash_argv(1, "/i.rom", override_subsystem=True) == [
        "nvflash",
        "--index",
        "1",
        "--overridesub",
        "/i.rom",
    ]
    assert nvflash.version_argv(file="/i.rom") == ["nvflash", "--version", "/i.rom"]
    assert nvflash.protectoff_argv(0) == ["nvflash", "--index", "0", "--protectoff"]
    with pytest.raises(ValueError):
        nvflash.version_argv()


def test_parsers_read_the_stand_ins_real_output(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    env = {**rig.env.host_env()}
    run = lambda *a: subprocess.run(  # noqa: E731
        [str(STANDIN_DIR / "nvflash"), *a], capture_output=True, text=True, env=env, check=False
    )
    adapters = nvflash.parse_list(run("--list").stdout)
    assert [a.bus_id for a in adapters] == ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]
    assert nvflash.match_adapter(adapters, "41:00.0", "10de", "2204", "3842:3987").index == 2
    with pytest.raises(ParseError, match="inventory"):
        nvflash.match_adapter(adapters, "41:00.0", "10de", "2204", "3842:3982")
    block = nvflash.parse_block(run("--index", "2", "--save", str(tmp_path / "s.rom")).stdout)
    assert (block.version, block.subsystem) == ("94.02.26.48.15", "3842:3987")
    other = tmp_path / "other.rom"
    other.write_bytes(rig.eeprom("0000:01:00.0"))
    t = nvflash.parse_flash(run("--index", "2", str(other)).stdout)
    assert t.outcome is FlashOutcome.SUBSYSTEM_MISMATCH


KEYS = ["Version", "IFR Subsystem ID", "Subsystem Vendor ID", "Subsystem ID", "Board ID", "Device ID", "Build Date"]
key_value = st.tuples(st.sampled_from(KEYS), st.text(alphabet="0123456789abcdefxX:.- N/A", max_size=14)).map(
    lambda kv: f"{kv[0]} : {kv[1]}"
)
text_lines = st.lists(
    st.one_of(
        st.text(max_size=60),
        key_value,
        st.sampled_from(
            [
                DOC_LIST,
                "Version : 94.02.26.48.15",
                "IFR Subsystem ID : 3842-3987",
                "Subsystem ID : 0xZZ",
                "Board ID : 0x",
                "Device ID : ",
                "Device ID : a:",
                "Device ID : 10DE:2204 (GA102)",
                "<7> x (10DE,2204,3842,3987) S:00,B:41,D:00,F:00",
                "Nothing changed!",
                nvflash.SUCCESS_LINE,
                "  Adapter Board ID: FFFFFFFFFFFF",
            ]
        ),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_lines)
def test_parsers_give_a_model_or_a_parse_error(lines: list[str]) -> None:
    text = "\n".join(lines)
    for parse in (nvflash.parse_list, nvflash.parse_block, nvflash.parse_tool_version):
        try:
            parse(text)
        except ParseError:
            pass
    nvflash.parse_flash(text)  # never raises
