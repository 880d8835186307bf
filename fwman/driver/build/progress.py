"""Build progress from make's output: which phase the build is in, objects done of expected, elapsed time.

A clean build of the real fork takes minutes and prints nothing useful at a glance. The lines that mark
progress, as the fork's makefiles print them:

- ``conftest``: kernel-open's Kbuild prints `` CONFTEST: <test>`` for each compile test of the target kernel;
- ``kernel-independent objects``: ``src/nvidia`` and ``src/nvidia-modeset`` build through ``utils.mk``,
  whose quiet rule prints `` [ nvidia            ]  CC           <file>`` (the bracket holds
  NV_MODULE_LOGGING_NAME, 17 columns; ``CXX``/``HOST_CC`` likewise);
- ``kernel-open``: kbuild prints ``  CC [M]  <file>.o`` for each object;
- ``linking``: kbuild's ``  LD [M]  <module>.ko``, ``  MODPOST ...``, and the ``LD`` of the big objects.

The expected count per phase comes from the previous build log of the same tree when there is one (the
numbers barely move between kernels), else the line says only how many are done. Pure: the pipeline feeds
lines, a sink draws them (a live line on a terminal, one line per phase in hooks and the boot service).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

PHASES = ("conftest", "kernel-independent objects", "kernel-open", "linking")

_CONFTEST = re.compile(r"^\s*CONFTEST:\s+\S")
_NV_QUIET = re.compile(r"^\s*\[\s*[\w.+-]+\s*\]\s+(CC|CXX|HOST_CC|HOST_CXX)\s+\S")
_NV_LINK = re.compile(r"^\s*\[\s*[\w.+-]+\s*\]\s+(LD|LINK|OBJCOPY)\s+\S")
_KBUILD_CC = re.compile(r"^\s+CC \[M\]\s+\S")
_KBUILD_LINK = re.compile(r"^\s+(LD \[M\]|MODPOST|LD)\s+\S")


def classify(line: str) -> str | None:
    """Return the phase a make output line counts for (one of :data:`PHASES`), or None for any other line."""
    if _CONFTEST.match(line):
        return "conftest"
    if _NV_QUIET.match(line):
        return "kernel-independent objects"
    if _KBUILD_CC.match(line):
        return "kernel-open"
    if _NV_LINK.match(line) or _KBUILD_LINK.match(line):
        return "linking"
    return None


def count_phases(text: str) -> dict[str, int]:
    """Return {phase: lines} over a whole build log (the expected counts for the next build)."""
    counts = dict.fromkeys(PHASES, 0)
    for line in text.splitlines():
        phase = classify(line)
        if phase is not None:
            counts[phase] += 1
    return counts


def format_elapsed(seconds: float) -> str:
    """Return ``seconds`` as ``42s`` or ``3m05s``."""
    whole = max(0, int(seconds))
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


@dataclass
class Progress:
    """The running state of one build: the current phase, objects done per phase, and what to expect."""

    kver: str
    expected: dict[str, int] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    phase: str | None = None

    def feed(self, line: str) -> str | None:
        """Count ``line``; return the phase it starts when it starts a new one (for the one-line-per-phase log)."""
        phase = classify(line)
        if phase is None:
            return None
        self.done[phase] += 1
        if phase != self.phase:
            self.phase = phase
            return phase
        return None

    def line(self, elapsed: float) -> str:
        """Return the live progress line: ``KVER: kernel-open 120/214 objects, 3m05s``."""
        if self.phase is None:
            return f"{self.kver}: starting make, {format_elapsed(elapsed)}"
        done = self.done[self.phase]
        expected = self.expected.get(self.phase)
        count = f"{done}/{expected}" if expected and expected >= done else f"{done}"
        unit = "tests" if self.phase == "conftest" else "objects"
        return f"{self.kver}: {self.phase} {count} {unit}, {format_elapsed(elapsed)}"

    def phase_line(self, phase: str, elapsed: float) -> str:
        """Return the line logged when ``phase`` starts."""
        expected = self.expected.get(phase)
        about = f" (about {expected} expected)" if expected else ""
        return f"{self.kver}: build phase: {phase}{about}, {format_elapsed(elapsed)} in"


#: what the pipeline calls: (progress, elapsed seconds, phase that just started or None)
ProgressSink = Callable[[Progress, float, str | None], None]
