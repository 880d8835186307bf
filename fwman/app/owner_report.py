"""``fwman flash report``: the owner report of one card's last flash and check, as a result that owns its text and its
``fwman.report/1`` document (the report itself is :mod:`fwman.firmware.ops.report`; the use case reading it is
:func:`fwman.app.report.owner_report`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fwman.app.report import owner_report
from fwman.app.text import Out, Result, say
from fwman.core.units import human_bytes
from fwman.firmware.ops.report import OwnerReport, report_document
from fwman.host.base import Host
from fwman.host.userfiles import write_user_file


@dataclass
class CardReport(Result):
    """The owner report of one card, and the file it was written to (None: not written)."""

    report: OwnerReport
    out: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.report/1`` (without the schema key)."""
        return {k: v for k, v in report_document(self.report).items() if k != "schema"}

    def text(self, verbose: int = 0) -> Out:
        """Return the report as lines for people, and where its JSON went."""
        out: Out = [say(text.rstrip()) for text in report_lines(self.report)]
        return out + ([say(f"wrote {self.out} (JSON, fwman.report/1)")] if self.out else [])


def card_report(host: Host, bus: str, out: str | None = None) -> CardReport:
    """Return the owner report of the card at ``bus``, written as JSON to the user file ``out`` when given.

    Raises as :func:`fwman.app.report.owner_report`, and what writing ``out`` raises.
    """
    report = owner_report(host, bus)
    if out:
        write_user_file(out, (json.dumps(report_document(report), indent=2) + "\n").encode())
    return CardReport(report, out)


def _offers(sizes: list[int] | None) -> str:
    if not sizes:
        return "unknown"
    return f"{human_bytes(min(sizes))} .. {human_bytes(max(sizes))}" if len(sizes) > 1 else human_bytes(sizes[0])


def _power(limit: float | None, default: float | None) -> str:
    if limit is None and default is None:
        return "unknown"
    now = f"{limit:g} W" if limit is not None else "? W"
    return f"{now} (default {default:g} W)" if default is not None else now


def report_lines(report: OwnerReport) -> list[str]:
    """Return the report as lines for people (the same facts as the JSON, for pasting into an issue)."""
    c, f, b, a = report.card, report.flash, report.before, report.after
    board_id = c.board_id or "unknown"
    lines = [
        f"fwman owner report (fwman.report/1), generated {report.generated_at} by fwman {report.fwman_version}",
        f"{'Card':<16}{c.vendor_id}:{c.device_id} subsystem {c.subsystem_vendor_id}:{c.subsystem_device_id}, "
        f"board ID {board_id}" + (f" ({c.name})" if c.name else ""),
        f"{'Flash':<16}{f.kind} {f.result} at {f.time}" + (f", image {f.image}" if f.image else ""),
        f"{'Image SHA-256':<16}{f.image_sha256 or 'unknown'}",
        f"{'Image chain':<16}{f.image_chain_sha256 or 'unknown'}",
        "",
        f"{'':<16}{'BEFORE':<66}AFTER",
    ]

    def size(n: int | None) -> str:
        return human_bytes(n) if n else "unknown"

    rows = [
        ("Version", b.version or "unknown", a.version or "unknown"),
        ("Chain SHA-256", b.chain_sha256 or "unknown", a.chain_sha256 or "unknown"),
        ("BAR1", size(b.bar1_bytes), size(a.bar1_bytes)),
        ("BAR1 offers", _offers(b.bar1_offers_bytes), _offers(a.bar1_offers_bytes)),
        (
            "Power limit",
            _power(b.power_limit_w, b.default_power_limit_w),
            _power(a.power_limit_w, a.default_power_limit_w),
        ),
        ("Recorded by", f"{b.recorded_by} {b.recorded_at or ''}", f"{a.recorded_by} {a.recorded_at or ''}"),
    ]
    lines += [f"{label:<16}{before:<66}{after}" for label, before, after in rows]
    lines.append("")
    if report.check is None:
        lines.append(f"{'Check':<16}not run yet")
    else:
        lines.append(f"{'Check':<16}{report.check.result} at {report.check.time}: {report.check.message}")
    lines.append(f"{'Left out':<16}{', '.join(report.redacted)}")
    lines += [f"note: {n}" for n in report.notes]
    return lines
