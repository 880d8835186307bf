"""Which GPU combinations can peer with the P2P forks at all, from the owners' reports (each answer cited).

Pure: the answer for the set of GPU names on a host, before anyone builds a module. Only what the sources say is
here; a combination they do not cover is "unknown", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.driver.settings import ADA, AMPERE, BLACKWELL, OTHER, generation

OK = "ok"
FAILS = "fails"
UNKNOWN = "unknown"

README = "github.com/aikitoria/open-gpu-kernel-modules README"


@dataclass(frozen=True)
class Peering:
    """The sources' answer for one host's GPUs: ``state`` (ok, fails, unknown), how, and the source."""

    state: str
    message: str
    source: str | None


_MODEL = re.compile(r"RTX\s*(PRO\s*6000|\d{4}(?:\s*Ti)?)", re.I)


def model(name: str | None) -> str:
    """Return the model part of a GPU name (``5090``, ``4060 Ti``, ``PRO 6000``), the name itself otherwise."""
    m = _MODEL.search(name or "")
    return re.sub(r"\s+", " ", m.group(1).upper().replace("TI", "Ti")) if m else (name or "unknown")


def peering(names: list[str | None]) -> Peering:
    """Return what the sources say about P2P between GPUs named ``names`` (one host's)."""
    gens = {generation(n) for n in names}
    models = sorted({model(n) for n in names})
    if len(names) < 2:
        return Peering(OK, "one GPU: no pair to peer", None)
    if len(gens) > 1:
        if gens == {AMPERE, ADA}:
            return Peering(FAILS, "a 3080 with a 4090 'is blocked by libcuda.so': Ampere with Ada does not peer",
                           "github.com/aikitoria/open-gpu-kernel-modules issue 40")  # fmt: skip
        return Peering(UNKNOWN, f"GPUs of different generations ({', '.join(sorted(gens))}): no source covers it",
                       None)  # fmt: skip
    gen = next(iter(gens))
    if gen == OTHER:
        return Peering(UNKNOWN, f"{', '.join(models)}: not covered by the P2P forks' sources", None)
    if len(models) == 1:
        how = {AMPERE: "NVLink pairs where bridged, BAR1 otherwise", ADA: "over BAR1", BLACKWELL: "over BAR1"}[gen]
        seen = (
            "; 'mapping of buffer object failed' was reported on 2x5090 (tinygrad/open-gpu-kernel-modules issue 44)"
            if models == ["5090"]
            else ""
        )
        return Peering(OK, f"{models[0]} x{len(names)}: P2P with the fork {how}{seen}", README)
    if gen == BLACKWELL and set(models) <= {"5090", "PRO 6000"}:
        return Peering(OK, "5090 with RTX PRO 6000: a same-generation mix that works", README)
    if gen == BLACKWELL:
        return Peering(FAILS, f"mixed Blackwell cards ({', '.join(models)}): 5060 Ti/5070 Ti/5090 mixes fail to peer",
                       "github.com/aikitoria/open-gpu-kernel-modules issue 13")  # fmt: skip
    if gen == ADA:
        return Peering(FAILS, f"mixed Ada cards ({', '.join(models)}): 4090 with 4060 Ti fails to peer",
                       "github.com/tinygrad/open-gpu-kernel-modules issue 28")  # fmt: skip
    return Peering(UNKNOWN, f"mixed Ampere cards ({', '.join(models)}): no source covers it", None)
