"""VBIOS version order: the one place that says which of two versions (or catalog images) is newer.

A VBIOS version is five two-digit hex fields, ``94.02.42.80.27``. The first four are NVIDIA's and grow with each
release, so they compare as numbers. The fifth is the board maker's build code: it is *not* ordered (EVGA replaced
94.02.42.80.AD by 94.02.42.80.27), so two versions that differ only there are neither older nor newer. Which of two
catalog images is newer is the catalog's word (``superseded_by``, release dates), the first four fields only where the
catalog says nothing, and never the fifth.

Standard library only; no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Protocol, TypeVar


class Order(Enum):
    """How one version relates to another."""

    OLDER = "older"
    SAME = "same"  # the same five fields
    SAME_BASE = "same base"  # the first four fields equal, the build codes differ: neither is newer
    NEWER = "newer"


def base_key(version: str) -> tuple[int, int, int, int] | None:
    """Return the four ordered fields of ``94.02.26.48.15`` as ints; None when it is not a five-field version."""
    parts = version.strip().split(".")
    if len(parts) != 5 or any(len(p) != 2 for p in parts):
        return None
    try:
        a, b, c, d = (int(p, 16) for p in parts[:4])
        int(parts[4], 16)
    except ValueError:
        return None
    return a, b, c, d


def compare(version: str, other: str) -> Order | None:
    """Return how ``version`` relates to ``other`` by their first four fields; None when either is malformed.

    Case does not matter. Two versions that differ only in the fifth field are :attr:`Order.SAME_BASE`.
    """
    mine, theirs = base_key(version), base_key(other)
    if mine is None or theirs is None:
        return None
    if mine < theirs:
        return Order.OLDER
    if mine > theirs:
        return Order.NEWER
    return Order.SAME if version.strip().upper() == other.strip().upper() else Order.SAME_BASE


class Dated(Protocol):
    """What the catalog order reads of an image (:class:`fwman.firmware.catalog.schema.CatalogImage`)."""

    @property
    def version(self) -> str: ...
    @property
    def release_date(self) -> str: ...
    @property
    def superseded_by(self) -> str: ...


_T = TypeVar("_T", bound=Dated)


def _replaced_by(image: Dated, by_version: dict[str, Dated]) -> set[str]:
    """Return every version that (transitively) supersedes ``image`` in the catalog."""
    out: set[str] = set()
    current = image.superseded_by.upper()
    while current and current not in out and current in by_version:
        out.add(current)
        current = by_version[current].superseded_by.upper()
    return out


def _date_order(a: str, b: str) -> int:
    """Return -1/0/1 for release dates ``a`` and ``b`` (YYYY[-MM[-DD]]) at their common precision; 0: unknown."""
    if not a or not b:
        return 0
    n = min(len(a), len(b))
    return (a[:n] > b[:n]) - (a[:n] < b[:n])


def catalog_newer(a: Dated, b: Dated, images: Sequence[Dated]) -> bool | None:
    """Return True when the catalog makes ``a`` newer than ``b``, False when older, None when it cannot tell.

    In this order: one supersedes the other (directly or through a chain), their release dates differ, their
    first four version fields differ. Images that differ only in the build code and carry no such fact are
    unordered.
    """
    by_version = {i.version.upper(): i for i in images}
    if a.version.upper() in _replaced_by(b, by_version):
        return True
    if b.version.upper() in _replaced_by(a, by_version):
        return False
    dated = _date_order(a.release_date, b.release_date)
    if dated:
        return dated > 0
    order = compare(a.version, b.version)
    return order is Order.NEWER if order in (Order.NEWER, Order.OLDER) else None


def newest_first(images: Sequence[_T]) -> list[_T]:
    """Return ``images`` newest first by :func:`catalog_newer`; unordered ones keep the catalog file's order.

    Each step takes the first remaining image (in file order) that no remaining image is newer than; should the
    facts contradict each other (a cycle), the first remaining image is taken.
    """
    remaining = list(images)
    out: list[_T] = []
    while remaining:
        top = next(
            (a for a in remaining if not any(catalog_newer(b, a, images) for b in remaining if b is not a)),
            remaining[0],
        )
        out.append(top)
        remaining.remove(top)
    return out
