"""``fwman catalog propose``: a local entry plus owner reports become a format-2 board file for the catalog.

Pure: a :class:`~fwman.firmware.catalog.local.LocalEntry` and parsed :class:`~fwman.firmware.ops.report.OwnerReport`
objects in, the board file's text out. Each report is cited by the public URL where the owner published it (an issue,
say): that URL is the ``sources`` entry of every fact the report states. A report states the board's PCI IDs and board
ID, the versions and chain hashes the card ran before and after, and the BAR1 it offered and the power limits after the
reboot. It does not state the board's name or maker (the local entry's owner typed or defaulted those): the notes say
so, for the maintainer who reviews the proposal."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import UsageError, VerificationError
from fwman.firmware.catalog.local import LocalEntry, render_board
from fwman.firmware.catalog.schema import Board, CatalogImage, check_url
from fwman.firmware.ops.report import OwnerReport

LEGACY_BAR1 = 256 * 1024 * 1024  # a BAR1 offer of 256 MiB or less is no Resizable BAR


@dataclass
class Proposal:
    """The proposed board, its file text, and what was left out and why."""

    board: Board
    text: str
    left_out: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def _check_reports(entry: LocalEntry, reports: list[tuple[OwnerReport, str]]) -> None:
    """Raise UsageError for a bad URL, VerificationError for a report that does not back ``entry``."""
    seen: set[str] = set()
    for n, (report, url) in enumerate(reports, 1):
        if why := check_url(url):
            raise UsageError(f"report {n}: {url!r} {why}: cite the public page where the report is published")
        if url in seen:
            raise UsageError(f"report {n}: {url} is cited twice: one URL per report")
        seen.add(url)
        if report.card.key != entry.board.key:
            raise VerificationError(
                f"report {n} ({url}) is of {report.card.key}, the local entry of {entry.board.key}: "
                "a report backs only its own board"
            )
        if not report.confirmed:
            state = report.check.result if report.check else "not run"
            raise VerificationError(
                f"report {n} ({url}): flash {report.flash.result}, post-reboot check {state}: only a flash the "
                "check confirmed backs a catalog fact"
            )
        new = entry.board.image(report.after.version or "")
        if new is None:
            raise VerificationError(
                f"report {n} ({url}): the card runs {report.after.version}, which the local entry does not list"
            )
        if new.chain_sha256 and report.flash.image_chain_sha256 != new.chain_sha256:
            raise VerificationError(
                f"report {n} ({url}): the flashed image's chain {report.flash.image_chain_sha256} is not the "
                f"local entry's {report.after.version} ({new.chain_sha256}): another image under that version"
            )
        old = entry.board.image(report.before.version or "")
        if old is not None and old.chain_sha256 and report.before.chain_sha256 not in (None, old.chain_sha256):
            raise VerificationError(
                f"report {n} ({url}): the card ran chain {report.before.chain_sha256} before, the local entry's "
                f"{old.version} is {old.chain_sha256}"
            )


def _one(values: list[float]) -> float | None:
    """Return the value when every report agrees on it, else None (a disagreement is the maintainer's call)."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _image(
    image: CatalogImage, after: list[tuple[OwnerReport, str]], before: list[tuple[OwnerReport, str]]
) -> CatalogImage:
    """Return ``image`` with the facts the reports state about it and those reports as its sources."""
    update: dict[str, object] = {}
    notes = [image.notes] if image.notes else []
    if after:
        offers = [max(r.after.bar1_offers_bytes) for r, _ in after if r.after.bar1_offers_bytes]
        if offers:
            update["max_bar1_bytes"] = max(offers)
            update["rebar"] = max(offers) > LEGACY_BAR1
        power = _one([r.after.default_power_limit_w for r, _ in after if r.after.default_power_limit_w is not None])
        if power is not None:
            update["power_limit_w"] = power
        elif any(r.after.default_power_limit_w is not None for r, _ in after):
            notes.append("the reports disagree on the default power limit: left empty")
        notes.append(f"confirmed after a reboot on {len(after)} owner card(s) (fwman upgrade --check)")
    if before and not after:
        notes.append(f"ran on {len(before)} owner card(s) before the flash")
    sources = list(dict.fromkeys(url for _, url in after + before))
    update["sources"] = [*image.sources, *(s for s in sources if s not in image.sources)]
    update["notes"] = "; ".join(notes)
    return image.model_copy(update=update)


def propose_board(entry: LocalEntry, reports: list[tuple[OwnerReport, str]]) -> Proposal:
    """Return the format-2 board file that ``reports`` (each with its public URL) make of ``entry``.

    Images that no report ran are left out (nothing but the owner's own file would source them). Raises
    UsageError (no report, a bad or repeated URL) and VerificationError (a report of another board, one whose
    flash the check did not confirm, or one whose images are not the entry's).
    """
    if not reports:
        raise UsageError("a proposal needs at least one owner report")
    _check_reports(entry, reports)
    board = entry.board
    kept: list[CatalogImage] = []
    left_out: list[str] = []
    for image in board.images:
        after = [(r, u) for r, u in reports if (r.after.version or "").upper() == image.version]
        before = [(r, u) for r, u in reports if (r.before.version or "").upper() == image.version]
        if not after and not before:
            left_out.append(f"{image.version}: no report ran it")
            continue
        new = _image(image, after, before)
        vendor_page = entry.info.md5_source
        # the vendor page the owner took the MD5 from states the downloaded file's hash: a source of the new image
        if after and check_url(vendor_page) is None and vendor_page not in new.sources:
            new = new.model_copy(update={"sources": [*new.sources, vendor_page]})
        kept.append(new)
    versions = {i.version for i in kept}
    kept = [
        i.model_copy(
            update={"superseded_by": "", "status_reason": i.status_reason or f"superseded by {i.superseded_by}"}
        )
        if i.superseded_by and i.superseded_by not in versions
        else i
        for i in kept
    ]
    urls = list(dict.fromkeys(url for _, url in reports))
    board_ids = sorted({*board.board.board_ids, *(r.card.board_id for r, _ in reports if r.card.board_id)})
    info = board.board.model_copy(
        update={
            "sources": [*board.board.sources, *(u for u in urls if u not in board.board.sources)],
            "board_ids": board_ids,
            "notes": (
                f"PCI IDs and board ID as owner reports state them; name {board.board.name!r} and maker "
                f"{board.board.maker!r} come from the owner's local entry, not from a report or a vendor page"
            ),
        }
    )
    proposed = Board(format=2, pci=board.pci, board=info, images=kept)
    header = "\n".join(
        [
            f"# {info.name}: proposed by `fwman catalog propose` from the local entry {entry.path}",
            f"# and {len(reports)} owner report(s): " + ", ".join(urls),
            "# A maintainer reads each report, checks the facts it states, then `fwman catalog lint` and sign.",
        ]
    )
    return Proposal(proposed, render_board(proposed, None, header), left_out, urls)
