"""More ``--json`` payloads the encoder writes from field metadata (fwman.core.jsonout), for commands the golden
replay does not reach (a real flash, an upgrade, a backup run, a build): each key in the documented order, each
value as the hand-written payloads wrote it (a dict's == ignores order, so the key lists are compared too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fwman.app.backup import BackupRun
from fwman.app.catalog.commands import Signed
from fwman.app.catalog.keys import KeysSigned
from fwman.app.flash import Flashed, record_json
from fwman.app.modules.build import boot_json, outcome_json
from fwman.app.modules.check_boot import CheckBootResult
from fwman.app.modules.preflight import PreflightResult
from fwman.app.upgrade import Applied
from fwman.core.errors import UsageError
from fwman.core.jsonout import encode
from fwman.driver.boot.loaders import BootDefault
from fwman.driver.boot.pin import BootCheck, PinRecord
from fwman.driver.boot.safety import Safety
from fwman.driver.build.failure import BuildFailure
from fwman.driver.build.pipeline import KernelOutcome
from fwman.driver.build.source import Source
from fwman.driver.nova_core import NovaKernel
from fwman.firmware.catalog.schema import CatalogIndex, IndexFile
from fwman.firmware.catalog.signing import CatalogKey, KeysDocument, RetiredKey
from fwman.firmware.ops.backup import BackupEntry
from fwman.firmware.ops.flash import FlashResult
from fwman.firmware.ops.journal import Operation
from fwman.firmware.upgrade.apply import ApplyResult
from fwman.firmware.upgrade.model import UpgradePlan
from tests.support.catalog import REBAR, rom, seed_catalog, sha256
from tests.support.env import FwmanEnv


def _keys(doc: dict[str, Any]) -> list[str]:
    return list(doc)


def _flash_result() -> FlashResult:
    op = Operation(id="op-1", kind="flash", created="now", pid=1, backup_run="run-1", next_steps=["reboot"])
    return FlashResult(op, "0000:01:00.0", "94.02.26.48.15", "94.02.71.00.01", True, "ab" * 32, "catalog", "/log")


def test_flash_is_the_operation_id_the_card_as_bus_id_and_the_runs_steps_in_place() -> None:
    schema, doc = Flashed(_flash_result()).to_json()
    assert schema == "flash"
    assert list(doc.items()) == [("operation", "op-1"), ("bus_id", "0000:01:00.0"),
                                 ("before_version", "94.02.26.48.15"), ("after_version", "94.02.71.00.01"),
                                 ("changed", True), ("readback_chain_sha256", "ab" * 32), ("verified_by", "catalog"),
                                 ("backup_run", "run-1"), ("log", "/log"), ("next_steps", ["reboot"])]  # fmt: skip
    assert Flashed(None, "nothing to resume").to_json() == (
        "flash-resume",
        {"resumed": None, "message": "nothing to resume"},
    )


def test_upgrade_apply_lists_each_flash_in_the_flash_payloads_form() -> None:
    result = ApplyResult(
        UpgradePlan(host="h", catalog={}, cards=[], images=[], steps=[], findings=[]),
        "run-1",
        [_flash_result()],
        operation="up-1",
        next_steps=["reboot"],
    )
    doc = Applied(result).to_json()
    assert _keys(doc) == ["operation", "backup_run", "flashed", "next_steps"]
    assert doc["flashed"] == [Flashed(_flash_result()).to_json()[1]]
    assert _keys(doc["flashed"][0])[-3:] == ["backup_run", "log", "next_steps"]


BOOT_KEYS = ["kernel", "loader", "how", "safe", "reason", "pinned", "released", "problem", "changed", "actions"]


def _pin(kernel: str) -> PinRecord:
    return PinRecord(kernel, "6.1.0-50-amd64", "no modules", "grub-saved", "2026-12-01T00:00:00Z")


def test_check_boot_is_the_next_boot_its_safety_the_pins_by_kernel_and_what_changed() -> None:
    pins = {"pinned": _pin("6.1.0-49-amd64"), "released": _pin("6.1.0-48-amd64")}
    result = CheckBootResult(BootDefault("6.1.0-49-amd64", "grub", "saved entry"), True, "ok", **pins, changed=["pin"])
    doc = result.to_json()
    assert _keys(doc) == BOOT_KEYS
    assert doc == {"kernel": "6.1.0-49-amd64", "loader": "grub", "how": "saved entry", "safe": True,
                   "reason": "ok", "pinned": {"kernel": "6.1.0-49-amd64", "method": "grub-saved"},
                   "released": "6.1.0-48-amd64", "problem": None, "changed": True, "actions": ["pin"]}  # fmt: skip


def test_a_builds_boot_object_has_the_check_boot_shape_with_an_unknown_safety_as_null() -> None:
    default = BootDefault(None, "systemd-boot", "newest installed")
    doc = boot_json(BootCheck(default, None, problem="no kernel"))
    assert doc is not None and _keys(doc) == BOOT_KEYS
    assert doc == {"kernel": None, "loader": "systemd-boot", "how": "newest installed", "safe": None,
                   "reason": None, "pinned": None, "released": None, "problem": "no kernel", "changed": False,
                   "actions": []}  # fmt: skip
    known = boot_json(BootCheck(default, Safety("6.1.0-49-amd64", False, "no modules")))
    assert known is not None and (known["safe"], known["reason"]) == (False, "no modules")
    assert boot_json(None) is None


def test_backup_run_lists_the_entries_with_bus_id_and_each_failure_by_its_message_without_the_count() -> None:
    entry = BackupEntry(path="/var/lib/fwman/backups/run-1/a.rom", run="run-1", time="now", card="0000:01:00.0",
                        subsystem="10de:1234", device_id="2204", version="94.02.26.48.15", size=1024, sha256="ab",
                        md5="cd", chain_sha256="ef")  # fmt: skip
    doc = BackupRun("run-1", 2, {"0000:01:00.0": entry}, {"0000:02:00.0": UsageError("nvflash failed")}).to_json()
    assert _keys(doc) == ["run", "backups", "failed"]
    assert doc["backups"] == [record_json(entry.model_dump())] and _keys(doc["backups"][0])[3] == "bus_id"
    assert doc["failed"] == {"0000:02:00.0": "nvflash failed"}


def test_a_failed_builds_failure_names_the_message_error_and_the_tool_missing_tool_without_the_library() -> None:
    failure = BuildFailure("kernel-open/nvidia/nv-pci.c", 12, "g++: not found", ["l1"], "compile", "missing-tool",
                           "g++", library="libelf.so.1")  # fmt: skip
    doc = outcome_json(KernelOutcome("6.1.0-50-amd64", "failed", "build failed", failure=failure))
    assert list(doc["failure"].items()) == [("file", "kernel-open/nvidia/nv-pci.c"), ("line", 12),
                                            ("error", "g++: not found"), ("excerpt", ["l1"]), ("phase", "compile"),
                                            ("cause", "missing-tool"), ("missing_tool", "g++")]  # fmt: skip
    assert _keys(doc)[:8] == ["kernel", "status", "message", "log", "object_cache_hit", "seconds", "phases", "source"]
    assert _keys(doc)[8:] == ["failure", "newer_branches", "source_error", "changed", "actions"]
    assert outcome_json(KernelOutcome("6.1.0-50-amd64", "built", "ok"))["failure"] is None


def test_catalog_sign_is_dry_run_changed_the_files_that_differ_the_directory_then_the_index() -> None:
    # built without validation: the payload is what is tested, not the index's checks
    files = [IndexFile.model_construct(path="a.json", sha256="ab", size=1)]
    index = CatalogIndex.model_construct(serial=3, date="2026-12-01", expires="2027-06-01T00:00:00Z", files=files)
    signed = Signed(False, {"/c/index.json": True, "/c/index.json.sig": False}, index=index, directory="/c")
    assert list(signed.to_json().items()) == [("dry_run", False), ("changed", True), ("written", ["/c/index.json"]),
                                              ("directory", "/c"), ("serial", 3), ("date", "2026-12-01"),
                                              ("expires", "2027-06-01T00:00:00Z"), ("files", 1)]  # fmt: skip
    assert Signed(True, {"/c/index.json": True}, index=index).to_json()["changed"] is False


def test_catalog_keys_sign_is_dry_run_changed_the_files_that_differ_the_directory_then_the_key_ids() -> None:
    key = CatalogKey.model_construct(key_id="k1")  # without validation, as the index above
    keys = KeysDocument.model_construct(serial=2, date="2026-12-01", expires="2027-06-01T00:00:00Z", keys=[key],
                                        retired=[RetiredKey.model_construct(key_id="k0")])  # fmt: skip
    doc = KeysSigned(True, {"/c/keys.json": True}, doc=keys, directory="/c").to_json()
    assert list(doc.items()) == [("dry_run", True), ("changed", False), ("written", ["/c/keys.json"]),
                                 ("directory", "/c"), ("serial", 2), ("date", "2026-12-01"),
                                 ("expires", "2027-06-01T00:00:00Z"), ("catalog_keys", ["k1"]),
                                 ("retired", ["k0"])]  # fmt: skip


def test_fetch_is_the_entrys_board_and_image_then_the_fields_with_signed_as_signed_package(
    tmp_path: Path, fwman: FwmanEnv
) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    src = tmp_path.parent / f"{tmp_path.name}-downloads" / "EVGA_3987.rom"
    src.parent.mkdir()
    src.write_bytes(image)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", str(src), "--json", "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    doc = r.json()
    assert _keys(doc) == ["schema", "pci_key", "subsystem", "version", "status", "path", "size", "md5", "sha256",
                          "source", "verified_by", "cached_before", "override_recorded", "findings",
                          "signed_package"]  # fmt: skip
    assert (doc["version"], doc["sha256"], doc["signed_package"]) == (REBAR, sha256(image), None)


def test_preflight_is_dry_run_changed_actions_the_source_kernels_holds_and_safe_last() -> None:
    source = Source("/src", "tree:" + "ab" * 32, None, "story", "570.86.16-p2p", "https://example.org/story.git")
    result = PreflightResult(False, ["pin 6.1.0-50-amd64"], source, held=["6.1.0-50-amd64"],
                             newly_held=["6.1.0-50-amd64"], release_only=True)  # fmt: skip
    doc = result.to_json()
    assert _keys(doc) == ["dry_run", "changed", "actions", "source", "kernels", "held_kernels", "newly_held",
                          "released_kernels", "kept_back", "safe"]  # fmt: skip
    assert doc["source"] == {"label": source.label, "commit": "tree:" + "ab" * 32, "fork": "story",
                             "branch": "570.86.16-p2p"}  # fmt: skip
    assert (doc["changed"], doc["held_kernels"], doc["safe"]) == (True, ["6.1.0-50-amd64"], True)
    assert PreflightResult(True, ["pin x"]).to_json()["source"] is None


def test_a_nova_core_kernel_is_kernel_config_module_built_in_without_the_config_path() -> None:
    kernel = NovaKernel("6.15.0-1-amd64", "y", "/boot/config-6.15.0-1-amd64", None)
    assert list(encode(kernel).items()) == [("kernel", "6.15.0-1-amd64"), ("config", "y"), ("module", None),
                                            ("built_in", True)]  # fmt: skip
