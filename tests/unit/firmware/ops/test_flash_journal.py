"""The journal and the history: what survives a crash, and what a damaged file does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core import paths
from fwman.core.errors import ParseError, VerificationError
from fwman.firmware.ops.history import HistoryRecord, append_history, read_history, read_history_checked
from fwman.firmware.ops.journal import Journal, OpState, StepState, parse_operation
from fwman.host.live import LiveHost


def test_steps_are_written_before_and_after_they_run(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    j = Journal(host)
    op = j.create("flash", card="0000:41:00.0")
    j.begin(op, "gates")
    on_disk = j.load(op.id)
    assert on_disk.step("gates").state is StepState.RUNNING  # a crash now leaves "running at gates"
    j.finish(op, "gates")
    j.begin(op, "write")
    j.fail(op, "write", "cut")
    again = j.load(op.id)
    assert again.state is OpState.FAILED and again.current_step is not None
    assert again.current_step.name == "write" and again.message == "cut"
    assert [o.id for o in j.unfinished()] == [op.id]
    again.extra["resolved"] = "by hand"
    j.save(again)
    assert j.unfinished() == []


def test_unreadable_journal_files_are_skipped(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    j = Journal(host)
    op = j.create("flash")
    host.write_bytes("/var/lib/fwman/journal/zzz.json", b"{not json")
    assert [o.id for o in j.all()] == [op.id]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), st.dictionaries(st.text(max_size=8), st.integers(), max_size=4).map(str)))
def test_parse_operation_gives_a_model_or_a_parse_error(text: str) -> None:
    try:
        parse_operation(text)
    except ParseError:
        pass


def test_parse_operation_refuses_another_version() -> None:
    with pytest.raises(ParseError, match="version"):
        parse_operation('{"format": "fwman-journal", "version": 99}')


def test_history_appends_past_a_damaged_line_and_reports_it(tmp_path: Path) -> None:
    # a damaged line is evidence (issue 14): appending keeps it, reading reports it with its line number
    host = LiveHost(str(tmp_path))
    rec = HistoryRecord(time="t", kind="flash", card="0000:41:00.0", result="success")
    append_history(host, rec)
    host.write_bytes(paths.FLASH_HISTORY_FILE, host.read_bytes(paths.FLASH_HISTORY_FILE) + b"{half a line")
    append_history(host, rec.model_copy(update={"result": "failed"}))
    records, damaged = read_history_checked(host)
    assert [r.result for r in records] == ["success", "failed"]
    assert damaged == [
        f"{paths.FLASH_HISTORY_FILE} line 2: not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    ]
    with pytest.raises(VerificationError, match=r"damaged flash history: .*history\.jsonl line 2"):
        read_history(host)
