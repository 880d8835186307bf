"""Sources for catalog facts: every board and every image of a ``format = 2`` board file cites public pages.

A fact nobody can check is not a fact. From board format 2 on, ``[board] sources`` lists the public pages that state the
board's identity (its PCI IDs, name, maker, board IDs, part numbers, dual firmware switch) and each ``[[images]]
sources`` the pages that state that image's version, dates, hashes, status and its reason. :func:`source_issues` returns
what ``fwman catalog lint`` reports: in a format 2 file a fact without a source is an error; a format 1 file (written
before sources existed, signed as it is) gets one warning per board saying its facts cite no public page. Local entries
are not checked here: their provenance is the ``[local]`` table (what the machine read and what the owner typed), see
:mod:`fwman.firmware.catalog.local`."""

from __future__ import annotations

from typing import Any

#: the image facts a source must back (the ones issue 17 names first: version, dates, hashes, status reason)
IMAGE_FACTS = (
    "version",
    "release_date",
    "status_date",
    "status_reason",
    "md5",
    "sha256",
    "chain_sha256",
    "superseded_by",
    "rebar",
    "max_bar1_bytes",
    "power_limit_w",
    "min_driver",
)
BOARD_FACTS = ("part_numbers", "board_ids", "dual_firmware_switch", "vram_bytes")
SOURCES_FROM_FORMAT = 2


def _stated(model: Any, names: tuple[str, ...]) -> list[str]:
    """Return the fields of ``model`` among ``names`` that hold a value (not empty, not None)."""
    return [n for n in names if getattr(model, n) not in (None, "", [])]


def source_issues(board: Any, rel: str) -> list[tuple[str, str, str]]:
    """Return (level, where, message) for every fact of ``board`` (a catalog Board) that cites no source."""
    out: list[tuple[str, str, str]] = []
    if board.format < SOURCES_FROM_FORMAT:
        if not board.board.sources and not any(i.sources for i in board.images):
            why = "format 1: no fact in this file cites a public source (format 2 requires one per board and "
            out.append(("warning", "format", why + "per image)"))
        return out
    if not board.board.sources:
        facts = ", ".join(["pci", "name", "maker", *_stated(board.board, BOARD_FACTS)])
        out.append(("error", "board.sources", f"no source for the board's facts ({facts})"))
    for n, image in enumerate(board.images):
        if not image.sources:
            facts = ", ".join(_stated(image, IMAGE_FACTS))
            out.append(("error", f"images[{n}].sources", f"no source for {image.version} ({facts})"))
    return out
