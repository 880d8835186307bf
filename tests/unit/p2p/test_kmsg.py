"""/dev/kmsg records (the kernel's Documentation/ABI/testing/dev-kmsg): parsed into records or a ParseError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.p2p.kmsg import KmsgRecord, kernel_lines, parse_kmsg, parse_record

# the ABI document's example, byte for byte (its continuation lines start with one space)
ABI_EXAMPLE = (
    b"7,160,424069,-;pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)\n"
    b" SUBSYSTEM=acpi\n"
    b" DEVICE=+acpi:PNP0A03:00\n"
    b"6,339,5140900,-;NET: Registered protocol family 10\n"
    b"30,340,5690716,-;udevd[80]: starting version 181\n"
)


def test_the_abi_documents_example() -> None:
    first, net, udevd = parse_kmsg(ABI_EXAMPLE)
    assert (first.level, first.facility, first.seq, first.usec, first.flags) == (7, 0, 160, 424069, "-")
    assert first.text == "pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)"
    assert first.fields == {"SUBSYSTEM": "acpi", "DEVICE": "+acpi:PNP0A03:00"}
    assert net.line() == "[    5.140900] NET: Registered protocol family 10"
    # 30 = facility 3 (daemon) << 3 | level 6: user space wrote it, so it is not the kernel's
    assert (udevd.facility, udevd.level) == (3, 6)
    assert kernel_lines([first, net, udevd]) == [first.line(), net.line()]
    assert kernel_lines([first, net, udevd], since_usec=5_000_000) == [net.line()]


def test_later_fields_are_ignored_and_the_text_stays_escaped() -> None:
    # "Future extensions might add more comma separated values before the terminating ';'"; the text keeps the
    # kernel's \x escapes (a device's control characters never reach a terminal)
    [record] = parse_kmsg(b"3,12,99,c,caller=T1,more;nvidia: bad\\x1b[2Jname\n")
    assert (record.level, record.flags, record.text) == (3, "c", "nvidia: bad\\x1b[2Jname")


def test_a_damaged_record_is_a_parse_error_naming_it() -> None:
    with pytest.raises(ParseError, match="record 2 has no 'prio,seq,usec,flags;' prefix"):
        parse_kmsg(b"6,1,2,-;fine\nnot a record\n", "/dev/kmsg")
    with pytest.raises(ParseError, match="a continuation line comes first"):
        parse_kmsg(b" SUBSYSTEM=pci\n6,1,2,-;x\n")
    with pytest.raises(ParseError):
        parse_record("6,1," + "9" * 40 + ",-;too many digits")
    assert parse_kmsg(b"") == []


@given(st.binary(max_size=300))
def test_any_bytes_are_records_or_a_parse_error(data: bytes) -> None:
    try:
        records = parse_kmsg(data)
    except ParseError:
        return
    for r in records:
        assert 0 <= r.level <= 7 and r.facility >= 0 and r.seq >= 0 and r.usec >= 0
        assert "\n" not in r.text and "\n" not in r.line()


_TEXT = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=60)


@given(
    st.lists(
        st.tuples(st.integers(0, 2047), st.integers(0, 2**64 - 1), st.integers(0, 2**63), st.sampled_from("-c"), _TEXT),
        max_size=8,
    )
)
def test_records_written_in_the_documented_form_read_back(items: list[tuple[int, int, int, str, str]]) -> None:
    data = "".join(f"{prio},{seq},{usec},{flags};{text}\n" for prio, seq, usec, flags, text in items).encode()
    assert parse_kmsg(data) == [
        KmsgRecord(prio & 7, prio >> 3, seq, usec, flags, text) for prio, seq, usec, flags, text in items
    ]
