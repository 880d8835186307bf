"""Branch families: what a P2P branch's name says it is for, and which revision a host's GPUs get by default.

The forks name their branches ``<version>-p2p``, then revisions of it (``610.57.04-p2p-v2``, ``-p2p-v3``), and
downstream families name the card they serve: ``-p2p-48g`` for RTX 4090 boards modded to 48 GB (590.48.01,
595.71.05, 615.71.09 in Duanyll/open-gpu-kernel-modules; 610.57.04-p2p-48g in LingzheZhao's fork) and
``615.71.09-p2p-3080-20g`` (../shared/docs/field-late-2026.md, "The forks"). The name is parsed here:

    <version>-p2p[-<family>][-v<N>]

``family`` is ``p2p`` (the plain build, for stock boards), ``48g``, ``3080-20g``, or another word a fork uses
(kept as written, serving no card until fwman knows it); ``N`` is the revision (a bare name is revision 1). A name
with ``p2p`` in another shape (``bar1-p2p``) is a drop-in branch of the plain family with no revision number. A
donor-patch fork's revisions are NVIDIA's tags with a patch: plain family, no number.

Which family a card needs is read from its name and VRAM size (a 48 GB 4090 reports as an RTX 4090: only its
memory tells it apart). A host's GPUs share one kernel module, so a host needs one family; GPUs that need
different ones have none in common. Pure: no Host, never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fwman.core.driver_version import DriverVersion
from fwman.core.errors import ParseError

PLAIN = "p2p"
G48 = "48g"
G20_3080 = "3080-20g"
_GIB = 1 << 30

#: the families fwman knows: what cards each serves, and who says the family exists
FAMILIES: dict[str, tuple[str, str]] = {
    PLAIN: ("stock boards (RTX 3090, 4090, 5090 as sold)", "aikitoria/open-gpu-kernel-modules README"),
    G48: (
        "RTX 4090 boards modded to 48 GB",
        "Duanyll/open-gpu-kernel-modules (590.48.01, 595.71.05, 615.71.09 -p2p-48g); LingzheZhao's fork "
        "(610.57.04-p2p-48g)",
    ),
    G20_3080: ("RTX 3080 boards with 20 GB", "615.71.09-p2p-3080-20g (field-late-2026.md, The forks)"),
}

_NAME = re.compile(
    r"^(?P<version>\d{3}\.\d{1,3}(?:\.\d{1,3})?)-p2p"
    r"(?:-(?P<family>(?!v\d+(?:-|$))[a-z0-9]+(?:-(?!v\d+(?:-|$))[a-z0-9]+)*?))?"
    r"(?:-v(?P<rev>[1-9]\d{0,3}))?$"
)


@dataclass(frozen=True)
class BranchName:
    """What a P2P branch's name says: the version (a hint), the family and the revision number."""

    version: DriverVersion | None  # None for a name without ``<version>-p2p``
    family: str  # PLAIN, G48, G20_3080 or a fork's own word
    revision: int | None  # N of ``-vN``; 1 for a bare name; None for a name of another shape


def parse_branch_name(name: str) -> BranchName | None:
    """Return what P2P branch ``name`` says (``refs/heads/`` in front accepted), None when it is not a P2P branch
    (no ``p2p`` in it, any case). Never raises."""
    name = name.removeprefix("refs/heads/")
    if "p2p" not in name.lower():
        return None
    m = _NAME.match(name)
    if m is None:
        return BranchName(None, PLAIN, None)
    try:
        version: DriverVersion | None = DriverVersion.parse(m.group("version"))
    except ParseError:
        version = None
    rev = m.group("rev")
    return BranchName(version, m.group("family") or PLAIN, int(rev) if rev else 1)


@dataclass(frozen=True)
class CardMemory:
    """What picks a card's family: its name (nvidia-smi's) and its VRAM in bytes (None: unknown)."""

    name: str | None
    vram_bytes: int | None


def card_family(card: CardMemory) -> str:
    """Return the family a card needs: ``48g`` for an RTX 4090 with more than 24 GiB (a 48 GB mod), ``3080-20g``
    for an RTX 3080 with more than 12 GiB (stock boards have 10 or 12 GB), else the plain family (also when the
    VRAM is unknown: a modded board is said by its memory only)."""
    name = (card.name or "").upper()
    vram = card.vram_bytes
    if vram is not None and "4090" in name and vram > 24 * _GIB:
        return G48
    if vram is not None and "3080" in name and vram > 12 * _GIB:
        return G20_3080
    return PLAIN


def host_family(cards: Iterable[CardMemory]) -> str | None:
    """Return the one family every card needs (the plain family when there are none), None when the cards need
    different families (one module serves them all, so no branch serves the host)."""
    found = {card_family(c) for c in cards}
    if not found:
        return PLAIN
    return found.pop() if len(found) == 1 else None


def serves(family: str, cards: Sequence[CardMemory]) -> bool:
    """Return True when a branch of ``family`` serves every card of ``cards`` (a 48g branch a 48 GB 4090 and only
    it)."""
    return host_family(cards) == family


def describe(family: str) -> str:
    """Return what a family is for, or that fwman does not know it."""
    known = FAMILIES.get(family)
    return known[0] if known else f"unknown family {family!r}: serves no card until fwman knows it"
