"""The ``--json`` payloads the encoder writes from field metadata (fwman.core.jsonout) for commands the golden
replay does not reach (a real move, a real install, ``catalog update``): each key in the documented order, each
value as the hand-written payloads wrote it (a dict's == ignores order, so the key lists are compared too)."""

from __future__ import annotations

from typing import Any

from fixtures.romgen import RomSpec, build_rom
from fwman.app.capture import Captured, CaptureReport
from fwman.app.catalog.commands import Updated
from fwman.app.change import ChangeResult
from fwman.app.driver.move import MoveResult
from fwman.app.flash import History
from fwman.app.hooks import HooksInstall
from fwman.app.modules.hooks import Forget
from fwman.app.modules.unpin import UnpinResult
from fwman.app.rom import Inspection, rom_json
from fwman.app.userspace import Release
from fwman.core.jsonout import encode
from fwman.core.signing import TrustedKey
from fwman.driver.boot.pin import PinRecord
from fwman.driver.forks.model import DonorPatch
from fwman.driver.hooks.files import HookFileState, HooksStatus
from fwman.driver.move.record import COMMITTED, MoveRecord
from fwman.firmware.catalog.update import UpdateResult
from fwman.firmware.ops.history import HistoryRecord
from fwman.firmware.rom.parse import parse_rom


def _keys(doc: dict[str, Any]) -> list[str]:
    return list(doc)


def test_change_result_is_dry_run_changed_actions_without_the_texts() -> None:
    doc = ChangeResult(False, ["wrote x"], "nothing here", "finished").to_json()
    assert _keys(doc) == ["dry_run", "changed", "actions"]
    assert doc == {"dry_run": False, "changed": True, "actions": ["wrote x"]}


def test_release_adds_packages_and_leaves_holding_out() -> None:
    doc = Release(True, ["remove pin"], packages={"libcuda1": "570.86.16-1"}, holding=True).to_json()
    assert _keys(doc) == ["dry_run", "changed", "actions", "packages"]
    assert doc["changed"] is False and doc["packages"] == {"libcuda1": "570.86.16-1"}


def test_move_result_writes_the_record_as_move() -> None:
    record = MoveRecord("570.86.16", "575.51.02", COMMITTED, ["6.1.0-50-amd64"], fork="story", at="now")
    doc = MoveResult(False, ["install"], record=record, notes=["reboot"], phases={"stage": 1.5}).to_json()
    assert _keys(doc) == ["dry_run", "changed", "actions", "move", "notes", "phases"]
    assert _keys(doc["move"]) == ["from_version", "to_version", "stage", "kernels", "from_branch", "to_branch",
                                  "fork", "hold_moved", "at", "containers", "packages"]  # fmt: skip
    assert doc["move"]["to_version"] == "575.51.02" and doc["notes"] == ["reboot"] and doc["phases"] == {"stage": 1.5}
    assert MoveResult(True).to_json()["move"] is None


def test_hooks_install_lists_the_skipped_files_and_leaves_the_message_out() -> None:
    doc = HooksInstall(True, ["write a"], package=None, message="owned", skipped={"/etc/x": "no apt"}).to_json()
    assert _keys(doc) == ["dry_run", "changed", "actions", "package", "skipped"]
    assert doc["skipped"] == [{"path": "/etc/x", "reason": "no apt"}]


def test_catalog_update_payload() -> None:
    key = TrustedKey("k1", "keys.d/k1.pub", b"\0" * 32)
    result = UpdateResult("https://c.example", True, 7, 6, "2026-12-01", 3, key, "/var/lib/fwman/catalog",
                          "2027-01-01", 2, "root1", True, True)  # fmt: skip
    doc = Updated(result).to_json()
    assert doc == {
        "url": "https://c.example", "installed": True, "serial": 7, "previous_serial": 6, "date": "2026-12-01",
        "files": 3, "key_id": "k1", "location": "/var/lib/fwman/catalog", "expires": "2027-01-01",
        "keys_serial": 2, "keys_root_key_id": "root1", "keys_installed": True,
    }  # fmt: skip
    assert _keys(doc) == ["url", "installed", "serial", "previous_serial", "date", "files", "key_id", "location",
                          "expires", "keys_serial", "keys_root_key_id", "keys_installed"]  # fmt: skip


def test_forget_names_the_kernel_first_and_changed_after_dry_run() -> None:
    doc = Forget("6.1.0-50-amd64", False, ["dropped the manifest"], ["no pin"], pin_released=True).to_json()
    assert _keys(doc) == ["kernel", "dry_run", "changed", "actions", "problems", "pin_released", "boot"]
    assert doc["kernel"] == "6.1.0-50-amd64" and doc["changed"] is True and doc["boot"] is None
    assert Forget("6.1.0-50-amd64", True, ["drop x"]).to_json()["changed"] is False


def test_rom_inspect_is_the_file_and_the_image_with_its_derived_fields() -> None:
    image = parse_rom(build_rom(RomSpec()))
    doc = Inspection("image.rom", image).to_json()
    assert _keys(doc) == ["file", "image"] and doc["image"] == rom_json(image)
    assert "flashable" in doc["image"] and "subsystems_agree" in doc["image"]


def test_capture_payload_flattens_the_report_between_directory_and_redacted() -> None:
    report = CaptureReport(4, 120, 30, ["nvflash"], ["lspci: timed out"])
    doc = Captured("/tmp/snap", report, redacted=False).to_json()
    assert doc == {"directory": "/tmp/snap", "gpu_count": 4, "file_count": 120, "command_count": 30,
                   "missing_tools": ["nvflash"], "problems": ["lspci: timed out"], "redacted": False}  # fmt: skip
    assert _keys(doc) == ["directory", "gpu_count", "file_count", "command_count", "missing_tools", "problems",
                          "redacted"]  # fmt: skip


def test_unpin_shows_the_pin_in_its_own_order_without_previous_and_warning() -> None:
    pin = PinRecord("6.1.0-49-amd64", "6.1.0-50-amd64", "no modules", "grub-saved", "2026-12-01T00:00:00Z",
                    previous={"saved_entry": "0"}, warning="w")  # fmt: skip
    doc = UnpinResult(False, pin).to_json()
    assert _keys(doc) == ["dry_run", "changed", "pin", "next_boot"] and doc["changed"] is True
    assert list(doc["pin"].items()) == [("kernel", "6.1.0-49-amd64"), ("avoided", "6.1.0-50-amd64"),
                                        ("method", "grub-saved"), ("at", "2026-12-01T00:00:00Z"),
                                        ("reason", "no modules")]  # fmt: skip


def test_history_prints_each_record_card_as_bus_id_in_place() -> None:
    record = HistoryRecord(time="2026-12-01T00:00:00Z", kind="flash", card="0000:01:00.0", result="ok")
    doc = History([record], ["line 3: not JSON"]).to_json()
    assert _keys(doc) == ["records", "damaged"] and doc["damaged"] == ["line 3: not JSON"]
    assert _keys(doc["records"][0])[:3] == ["time", "kind", "bus_id"] and doc["records"][0]["bus_id"] == "0000:01:00.0"


def test_donor_patch_is_patch_sha256_versions_without_where_they_came_from() -> None:
    doc = encode(DonorPatch("https://example.org/p2p.diff", "ab" * 32, ("595.58.03",), versions_from="name"))
    assert list(doc.items()) == [("patch", "https://example.org/p2p.diff"), ("sha256", "ab" * 32),
                                 ("versions", ["595.58.03"])]  # fmt: skip


def test_hooks_status_lists_each_file_as_path_present_current_note() -> None:
    files = [HookFileState("/etc/kernel/postinst.d/fwman", True, False, "changed")]
    doc = HooksStatus(files, enabled=True, order={"postinst.d": ["dkms", "fwman"]}).to_json()
    assert _keys(doc) == ["installed", "enabled", "files", "order"] and doc["installed"] is False
    assert list(doc["files"][0].items()) == [("path", "/etc/kernel/postinst.d/fwman"), ("present", True),
                                             ("current", False), ("note", "changed")]  # fmt: skip
