"""The records of ``/dev/kmsg``, the kernel's printk buffer: a pure parser (bytes in, records or a ParseError).

The format is the kernel's Documentation/ABI/testing/dev-kmsg (since 3.5). Every read() of the device gives one
record: a prefix of comma-separated fields ending at the first ``;`` (the syslog priority and facility as one
decimal number, "the 3 lowest bits being the syslog priority and the next 8 bits the syslog facility number";
the 64-bit sequence number; "the monotonic timestamp in microseconds"; a flag field, ``-`` by default and ``c``
for a fragment of a line; "Future extensions might add more comma separated values before the terminating ';'.
Unknown fields and values should be gracefully ignored"), then the text up to a ``\\n``, in which "all
non-printable characters and '\\' itself ... are escaped by "\\x00" C-style hex encoding". A line starting with
a space is a continuation line, a ``KEY=value`` pair of the record before it. The document's example::

    7,160,424069,-;pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)
     SUBSYSTEM=acpi
     DEVICE=+acpi:PNP0A03:00
    6,339,5140900,-;NET: Registered protocol family 10
    30,340,5690716,-;udevd[80]: starting version 181

User space may write to ``/dev/kmsg`` too, but "It is not possible to inject messages from userspace with the
facility number LOG_KERN (0)": :func:`kernel_lines` keeps facility 0 only, so no program can plant an Xid line.
The text is kept as the kernel escaped it (no control character of a device's string reaches a terminal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.errors import ParseError

#: LOG_KERN, the facility of the kernel's own messages
KERNEL_FACILITY = 0

# priority, sequence, timestamp, flags, then any later fields (ignored, as the ABI document asks); the digits are
# bounded so that a damaged record is an error, not an integer of a million digits
_PREFIX = re.compile(r"(\d{1,10}),(\d{1,20}),(\d{1,20}),([^,;]*)(?:,[^;]*)?;")


@dataclass(frozen=True)
class KmsgRecord:
    """One record: ``level`` (0 emerg .. 7 debug), ``facility`` (0 the kernel), ``seq``, ``usec`` (microseconds
    since boot, the kernel's monotonic clock), ``flags`` (``-``, or ``c`` for a fragment), the text (escaped
    as the kernel wrote it) and the continuation lines' ``KEY=value`` pairs."""

    level: int
    facility: int
    seq: int
    usec: int
    flags: str
    text: str
    fields: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def line(self) -> str:
        """Return the record as dmesg prints it: ``[seconds.micros] text``."""
        return f"[{self.usec // 1_000_000:5d}.{self.usec % 1_000_000:06d}] {self.text}"


def parse_record(line: str, source: str = "/dev/kmsg", number: int = 1) -> KmsgRecord:
    """Return the record of one ``/dev/kmsg`` line (its prefix and text, without continuation lines).

    Raises ParseError naming ``source`` and record ``number`` when the line has no ``prio,seq,usec,flags;``
    prefix.
    """
    m = _PREFIX.match(line)
    if not m:
        raise ParseError(
            "kernel log record", source, f"record {number} has no 'prio,seq,usec,flags;' prefix: {line[:60]!r}"
        )
    prio = int(m.group(1))
    return KmsgRecord(prio & 7, prio >> 3, int(m.group(2)), int(m.group(3)), m.group(4), line[m.end() :])


def parse_kmsg(data: bytes, source: str = "/dev/kmsg") -> list[KmsgRecord]:
    """Return the records of ``data`` (records as read from ``/dev/kmsg``, one after another), in order.

    Raises ParseError naming the record when a line is neither a record nor a continuation of one (a
    continuation line before any record, a line without the prefix). Empty data is no records.
    """
    text = data.decode("utf-8", errors="replace")
    records: list[KmsgRecord] = []
    for line in text.split("\n"):
        if not line:
            continue
        if line.startswith(" "):
            if not records:
                raise ParseError("kernel log record", source, f"a continuation line comes first: {line[:60]!r}")
            key, sep, value = line[1:].partition("=")
            if sep:
                records[-1].fields[key] = value
            continue
        records.append(parse_record(line, source, len(records) + 1))
    return records


def kernel_lines(records: list[KmsgRecord], since_usec: int = 0) -> list[str]:
    """Return the kernel's own records (facility 0) stamped at or after ``since_usec``, as dmesg lines."""
    return [r.line() for r in records if r.facility == KERNEL_FACILITY and r.usec >= since_usec]
