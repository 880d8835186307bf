"""Owner reports (fwman report) and proposals (fwman catalog propose) from constructed history records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import MissingError, UsageError, VerificationError
from fwman.core.tomltext import parse_toml
from fwman.firmware.catalog.lint import lint_board_bytes
from fwman.firmware.catalog.local import LocalEntry, LocalInfo
from fwman.firmware.catalog.schema import Board, BoardInfo, CatalogImage, ImageStatus, PciIds
from fwman.firmware.ops.history import HistoryRecord, append_history
from fwman.firmware.ops.propose import propose_board
from fwman.firmware.ops.report import OwnerReport, build_report, parse_report, redact_text, report_document
from fwman.gpu.card import Card
from fwman.host.live import LiveHost

BUS = "0000:41:00.0"
OLD, NEW = "94.02.26.48.F0", "94.02.42.80.F1"
OLD_CHAIN, NEW_CHAIN = "a" * 64, "b" * 64
UUID = "GPU-5c0f0000-3e21-7a0b-9d4c-1a2b3c4d5e6f"
SERIAL = "1320521041234"
CARD = Card(
    bus_id=BUS,
    vendor_id="10de",
    device_id="2204",
    subsystem_vendor_id="f00d",
    subsystem_device_id="3090",
    name="NVIDIA GeForce RTX 3090",
    uuid=UUID,
)
MiB = 1 << 20


def flash_record(**extra: object) -> HistoryRecord:
    fields: dict[str, object] = {
        "time": "2026-12-01T10:00:00Z",
        "kind": "flash",
        "card": BUS,
        "subsystem": "f00d:3090",
        "result": "success",
        "before_version": OLD,
        "after_version": NEW,
        "image": "/var/cache/fwman/images/10de-2204-f00d-3090/94.02.42.80.F1.rom",
        "image_sha256": "c" * 64,
        "image_chain_sha256": NEW_CHAIN,
        "before_chain_sha256": OLD_CHAIN,
        "after_chain_sha256": NEW_CHAIN,
        "backup": "/var/lib/fwman/backups/run/0000-41-00.0.rom",
        "bar1_bytes": 256 * MiB,
        "bar1_offers_bytes": [64 * MiB, 128 * MiB, 256 * MiB],
        "board_id": "0x0240",
        "operation": "flash-1",
        "log": "/var/log/fwman/flash-1.log",
    }
    fields.update(extra)
    return HistoryRecord.model_validate(fields)


def check_record(**extra: object) -> HistoryRecord:
    fields: dict[str, object] = {
        "time": "2026-12-01T10:20:00Z",
        "kind": "check",
        "card": BUS,
        "subsystem": "f00d:3090",
        "result": "confirmed",
        "before_version": OLD,
        "after_version": NEW,
        "bar1_bytes": 32 << 30,
        "bar1_offers_bytes": [256 * MiB, 32 << 30],
        "power_limit_w": 350.0,
        "default_power_limit_w": 350.0,
        "message": f"runs {NEW}, BAR1 32768 MiB",
    }
    fields.update(extra)
    return HistoryRecord.model_validate(fields)


def report_of(tmp_path: Path, *records: HistoryRecord) -> OwnerReport:
    host = LiveHost(str(tmp_path))
    for record in records:
        append_history(host, record)
    return build_report(host, CARD, generated_at="2026-12-01T11:00:00Z", fwman_version="0.1.0")


def test_a_report_puts_the_flash_and_the_check_side_by_side(tmp_path: Path) -> None:
    report = report_of(tmp_path, flash_record(), check_record())
    assert report.card.key == "10de:2204:f00d:3090" and report.card.board_id == "0x0240"
    assert (report.before.version, report.before.chain_sha256) == (OLD, OLD_CHAIN)
    assert (report.after.version, report.after.chain_sha256) == (NEW, NEW_CHAIN)
    assert (report.before.bar1_bytes, report.after.bar1_bytes) == (256 * MiB, 32 << 30)
    assert report.before.bar1_offers_bytes == [64 * MiB, 128 * MiB, 256 * MiB]
    assert (report.after.power_limit_w, report.after.default_power_limit_w) == (350.0, 350.0)
    assert report.check is not None and report.check.result == "confirmed" and report.confirmed
    assert report.flash.image == "94.02.42.80.F1.rom"  # the label without the owner's directories


def test_before_power_comes_from_an_earlier_check_of_the_same_firmware(tmp_path: Path) -> None:
    earlier = check_record(time="2026-11-30T09:00:00Z", after_version=OLD, default_power_limit_w=420.0,
                           power_limit_w=400.0)  # fmt: skip
    report = report_of(tmp_path, earlier, flash_record(), check_record())
    assert (report.before.power_limit_w, report.before.default_power_limit_w) == (400.0, 420.0)
    assert any("2026-11-30T09:00:00Z" in n for n in report.notes)


def test_before_power_is_unknown_and_says_why(tmp_path: Path) -> None:
    other = check_record(time="2026-11-30T09:00:00Z", after_version="94.02.11.00.01", default_power_limit_w=420.0)
    report = report_of(tmp_path, other, flash_record(), check_record())
    assert report.before.power_limit_w is None and report.before.default_power_limit_w is None
    assert any("driver is unloaded" in n for n in report.notes)


def test_no_check_yet_is_said_and_not_confirmed(tmp_path: Path) -> None:
    report = report_of(tmp_path, flash_record())
    assert report.check is None and not report.confirmed and report.after.recorded_by == "flash"
    assert any("upgrade --check" in n for n in report.notes)


def test_the_report_is_of_the_newest_successful_flash(tmp_path: Path) -> None:
    first = flash_record(time="2026-11-01T00:00:00Z", after_version="94.02.42.80.AD", operation="flash-0")
    failed = flash_record(time="2026-12-02T00:00:00Z", result="failed", operation="flash-2")
    report = report_of(tmp_path, first, check_record(time="2026-11-01T01:00:00Z"), flash_record(), failed)
    assert report.flash.operation == "flash-1" and report.check is None  # no check followed flash-1


def test_nothing_to_report_is_missing(tmp_path: Path) -> None:
    with pytest.raises(MissingError, match=r"no successful flash of 0000:41:00\.0"):
        report_of(tmp_path, flash_record(result="failed"))


def test_uuids_serials_and_paths_never_reach_a_report(tmp_path: Path) -> None:
    check = check_record(message=f"runs {NEW} on {UUID} serial {SERIAL}, log /home/owner/secret/flash.log")
    card = Card(**{**CARD.__dict__, "name": f"RTX 3090 {SERIAL}"})
    host = LiveHost(str(tmp_path))
    for record in (flash_record(), check):
        append_history(host, record)
    report = build_report(host, card, generated_at="t", fwman_version="0.1.0")
    text = json.dumps(report_document(report))
    for secret in (UUID, SERIAL, "/home/owner", "/var/", "flash-1.log", "0000-41-00.0.rom"):
        assert secret not in text
    assert "[redacted]" in text and "flash.log" in text  # the file name stays, its directories go


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.sampled_from([UUID, SERIAL, "1234567890", "/etc/machine-id"]))
def test_redact_text_removes_what_it_names_wherever_it_sits(text: str, secret: str) -> None:
    out = redact_text(f"{text} {secret} {text}")
    assert (secret if not secret.startswith("/") else "/etc/") not in out.replace(text, "")


def test_report_json_round_trips_and_other_documents_are_refused(tmp_path: Path) -> None:
    report = report_of(tmp_path, flash_record(), check_record())
    data = json.dumps(report_document(report)).encode()
    assert parse_report(data, "r.json") == report
    with pytest.raises(VerificationError, match="not an fwman report"):
        parse_report(b'{"schema": "fwman.scan/1"}', "r.json")
    with pytest.raises(VerificationError, match=r"r\.json"):
        parse_report(b"{not json", "r.json")
    doc = report_document(report)
    doc["card"]["uuid"] = UUID
    with pytest.raises(VerificationError, match=r"card\.uuid"):
        parse_report(json.dumps(doc).encode(), "r.json")


# -- proposals ---------------------------------------------------------------------------------------------

URL = "https://forge.example/fwman/issues/41"
ENTRY = LocalEntry(
    board=Board(
        pci=PciIds(vendor="10de", device="2204", subsystem_vendor="f00d", subsystem_device="3090"),
        board=BoardInfo(name="FWMAN SYNTHETIC UNKNOWN GA102 BOARD", maker="unknown"),
        images=[
            CatalogImage(version=NEW, status=ImageStatus.CURRENT, sha256="c" * 64, chain_sha256=NEW_CHAIN, size=999424),
            CatalogImage(version=OLD, status=ImageStatus.SUPERSEDED, superseded_by=NEW, chain_sha256=OLD_CHAIN),
        ],
    ),
    info=LocalInfo(
        created_at="2026-12-01T09:00:00Z",
        card=BUS,
        backup="/var/lib/fwman/backups/run/x.rom",
        backup_sha256="d" * 64,
        image_file="/home/owner/Downloads/F00D.exe",
        image_file_md5="e" * 32,
        md5_source="https://vendor.example/f00d",
    ),
    path="/etc/fwman/catalog.d/10de-2204-f00d-3090.toml",
)


def test_a_proposal_cites_the_reports_and_passes_lint(tmp_path: Path) -> None:
    report = report_of(tmp_path, flash_record(), check_record())
    proposal = propose_board(ENTRY, [(report, URL)])
    doc = parse_toml(proposal.text, "proposal")
    assert doc["format"] == 2 and doc["board"]["sources"] == [URL] and doc["board"]["board_ids"] == ["0x0240"]
    images = {i["version"]: i for i in doc["images"]}
    assert images[NEW]["sources"] == [URL, "https://vendor.example/f00d"] and images[OLD]["sources"] == [URL]
    assert (images[NEW]["max_bar1_bytes"], images[NEW]["rebar"], images[NEW]["power_limit_w"]) == (32 << 30, True, 350)
    assert "max_bar1_bytes" not in images[OLD]  # no report saw the old firmware's offers after a reboot
    assert lint_board_bytes(proposal.text.encode(), "boards/10de-2204-f00d-3090.toml") == []


def test_reports_that_disagree_on_power_leave_it_empty(tmp_path: Path) -> None:
    one = report_of(tmp_path / "a", flash_record(), check_record())
    two = report_of(tmp_path / "b", flash_record(), check_record(default_power_limit_w=390.0))
    proposal = propose_board(ENTRY, [(one, URL), (two, URL + "0")])
    new = next(i for i in proposal.board.images if i.version == NEW)
    assert new.power_limit_w is None and "disagree" in new.notes and new.sources[:2] == [URL, URL + "0"]


def test_an_image_no_report_ran_is_left_out(tmp_path: Path) -> None:
    third = CatalogImage(version="94.02.11.00.01", status=ImageStatus.SUPERSEDED, superseded_by=OLD)
    entry = LocalEntry(ENTRY.board.model_copy(update={"images": [*ENTRY.board.images, third]}), ENTRY.info, ENTRY.path)
    proposal = propose_board(entry, [(report_of(tmp_path, flash_record(), check_record()), URL)])
    assert [i.version for i in proposal.board.images] == [NEW, OLD]
    assert proposal.left_out == ["94.02.11.00.01: no report ran it"]


@pytest.mark.parametrize(
    ("records", "url", "error", "match"),
    [
        ((flash_record(), check_record(result="mismatch")), URL, VerificationError, "check mismatch"),
        ((flash_record(),), URL, VerificationError, "check not run"),
        ((flash_record(image_chain_sha256="f" * 64), check_record()), URL, VerificationError, "another image"),
        ((flash_record(), check_record()), "http://forge.example/1", UsageError, "cite the public page"),
        ((flash_record(), check_record(after_version="94.02.99.00.01")), URL, VerificationError, "does not list"),
    ],
)
def test_a_report_that_does_not_back_the_entry_is_refused(
    tmp_path: Path, records: tuple[HistoryRecord, ...], url: str, error: type[Exception], match: str
) -> None:
    report = report_of(tmp_path, *records)
    with pytest.raises(error, match=match):
        propose_board(ENTRY, [(report, url)])


def test_a_report_of_another_board_is_refused(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    for record in (flash_record(), check_record()):
        append_history(host, record)
    other = Card(**{**CARD.__dict__, "subsystem_device_id": "3091"})
    report = build_report(host, other, generated_at="t", fwman_version="0.1.0")
    with pytest.raises(VerificationError, match="10de:2204:f00d:3091"):
        propose_board(ENTRY, [(report, URL)])
