"""``fwman flash report`` and ``fwman catalog propose`` as use cases: owner reports out, a proposed board file out.
``owner_report`` reads the card and fwman's flash history (no change to the host); ``propose_from_reports`` reads the
local entry of the host and the reports the owner names, and returns the proposed board file with what ``catalog lint``
says of it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fwman import __version__
from fwman.app.text import Out, Result, document, say
from fwman.core.clock import timestamp
from fwman.core.errors import FwmanError, MissingError, UsageError, VerificationError
from fwman.firmware.catalog.lint import LintIssue, lint_board_bytes
from fwman.firmware.catalog.local import LocalEntry, load_local_entries
from fwman.firmware.ops.propose import Proposal, propose_board
from fwman.firmware.ops.report import MAX_REPORT_BYTES, OwnerReport, build_report, parse_report
from fwman.gpu.inventory import find_card, require_cards
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file, write_user_file


def owner_report(host: Host, bus: str) -> OwnerReport:
    """Return the owner report of the card at ``bus``.

    Raises UsageError for an unknown card, MissingError when no successful flash of it is recorded.
    """
    card = find_card(require_cards(host), bus)
    return build_report(host, card, generated_at=timestamp(), fwman_version=__version__)


@dataclass(frozen=True)
class ProposalResult(Result):
    """The proposed board file, where it came from, and the lint of it."""

    proposal: Proposal
    entry: LocalEntry
    lint: list[LintIssue]
    path: str | None = None  # the file the board file was written to (None: not written)

    @property
    def lint_errors(self) -> list[LintIssue]:
        """Return the lint issues of level error."""
        return [i for i in self.lint if i.level == "error"]

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-propose/1``."""
        return {
            "board": self.proposal.board.key,
            "local_entry": self.entry.path,
            "sources": self.proposal.sources,
            "left_out": self.proposal.left_out,
            "path": self.path,
            "board_file": self.proposal.text,
            "lint": [i.model_dump() for i in self.lint],
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the board file (on stdout when it was not written to a file; a whole file, ending in a newline:
        one line of the text) or where it was written, what was left out (on stderr after the board file), and
        each lint issue (on stderr)."""
        p = self.proposal
        out: Out = [say(f"wrote {self.path}: {p.board.key}, {len(p.board.images)} image(s)") if self.path
               else document(p.text)]  # fmt: skip
        out += [say(f"left out: {line}", err=not self.path) for line in p.left_out]
        for issue in self.lint:
            where = f" {issue.where}" if issue.where else ""
            out.append(say(f"lint {issue.level}:{where} {issue.message}", err=True))
        return out

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when the proposal does not pass lint; else None."""
        if not self.lint_errors:
            return None
        return VerificationError(
            f"the proposal does not pass lint ({len(self.lint_errors)} error(s)): {self.lint_errors[0].message}"
        )


def find_local_entry(host: Host, board: str) -> LocalEntry:
    """Return the host's local entry for ``board`` (``vvvv:dddd`` subsystem or the four-part key).

    Raises MissingError when the host has no such entry (the notes of unreadable entries in the hint).
    """
    entries, notes = load_local_entries(host)
    wanted = board.lower()
    for entry in entries:
        if wanted in (entry.board.subsystem, entry.board.key):
            return entry
    known = ", ".join(e.board.subsystem for e in entries) or "none"
    raise MissingError(
        f"no local entry for {board} on this host (local entries: {known})",
        hint="; ".join(notes) or "write one first: fwman catalog add-local --card BUS ...",
    )


def propose_from_reports(host: Host, board: str, reports: list[tuple[bytes, str, str]]) -> ProposalResult:
    """Return the format-2 board file for ``board``'s local entry, sourced by ``reports``.

    ``reports`` holds (file bytes, file name, public https URL where the report is published). Raises
    MissingError (no local entry), UsageError (no report, a bad URL), VerificationError (a report that is not
    one, or that does not back the entry: another board, a flash not confirmed, another image).
    """
    if not reports:
        raise UsageError("name at least one report: --report FILE URL")
    entry = find_local_entry(host, board)
    parsed = [(parse_report(data, name), url) for data, name, url in reports]
    proposal = propose_board(entry, parsed)
    lint = lint_board_bytes(proposal.text.encode(), f"boards/{proposal.board.pci.file_stem}.toml")
    return ProposalResult(proposal, entry, lint)


def propose_to_file(host: Host, board: str, reports: tuple[tuple[str, str], ...], out: str | None) -> ProposalResult:
    """Return the proposed board file for ``board`` from ``reports`` ((report file, public URL) pairs, files the
    user names), written to ``out`` (a file the user names) when given, even when it does not lint clean (the
    maintainer reviews it). Raises as :func:`propose_from_reports`, UsageError when ``out`` cannot be written."""
    loaded = [(read_user_file(path, max_bytes=MAX_REPORT_BYTES + 1), path, url) for path, url in reports]
    result = propose_from_reports(host, board, loaded)
    if out:
        write_user_file(out, result.proposal.text.encode())
    return replace(result, path=out)
