"""NCCL versions with known P2P hangs: a table, each row with its source, matched against a container's libnccl.

Rows come from ../shared/docs/field-late-2026.md ("NCCL and the model servers"), which names each source; a row is
added only with one. The match is exact (``2.30.4`` is not ``2.30.5``): the sources name one version each, and a
range would be a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownHang:
    """One NCCL version reported to hang with P2P, where (the topology the GPUs met at), and what got past it."""

    version: str
    where: tuple[str, ...]  # nvidia-smi topo -m cells the report's GPUs met at ("PHB")
    what: str
    workaround: str
    source: str


KNOWN_HANGS: tuple[KnownHang, ...] = (
    KnownHang(
        "2.30.4",
        ("PHB",),
        "hung on its first all_reduce on 2x RTX PRO 6000 meeting at PHB",
        "NCCL_P2P_DISABLE=1 (or an image with another NCCL)",
        "local-inference-lab/rtx6kpro issue 15, June 2026",
    ),
)


def known_hangs(versions: Iterable[str], table: tuple[KnownHang, ...] = KNOWN_HANGS) -> list[KnownHang]:
    """Return the rows of ``table`` whose version is one of ``versions`` (exact match), in table order."""
    found = set(versions)
    return [row for row in table if row.version in found]
