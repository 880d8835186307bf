"""Build progress from make's output: which phase the build is in, objects done of expected, elapsed time.

A clean build of the real fork takes minutes and prints nothing useful at a glance. The lines that mark
progress, as the fork's makefiles print them, in the order the fork's top-level Makefile runs them (the
kernel-independent objects are prerequisites of ``make -C kernel-open``, whose Kbuild runs the conftests before
it compiles):

- ``kernel-independent objects``: ``src/nvidia`` and ``src/nvidia-modeset`` build through ``utils.mk``,
  whose quiet rule prints `` [ nvidia            ]  CC           <file>`` (the bracket holds
  NV_MODULE_LOGGING_NAME, 17 columns; ``CXX``/``HOST_CC``/``LD`` likewise: the ``LD`` of ``nv-kernel.o`` ends
  this phase, it is not the modules' linking);
- ``conftest``: kernel-open's Kbuild prints `` CONFTEST: <test>`` for each compile test of the target kernel;
- ``kernel-open``: kbuild's ``  CC [M]  <file>.o`` for each object, and ``  LD [M]  <module>.o`` joining a
  module's objects (kbuild does that while other objects still compile);
- ``linking``: kbuild's ``  MODPOST ...``, then per module ``CC [M] <module>.mod.o``, ``LD [M] <module>.ko``
  and ``BTF [M]``.

A phase only moves forward in that order: a line of an earlier kind that comes late (make runs targets in
parallel) counts for the phase in progress and never "starts" an earlier one again, so a log of phase lines
cannot flap. The expected count per phase comes from the previous log of the same kernel when that build
finished (:func:`count_phases` of a log that ends in :func:`end_line` with status 0); a failed build's log says
nothing about the next build's size. Pure: the pipeline feeds lines, a sink draws them: a live line on a terminal,
:class:`PhaseLog` (a line per phase start and end, and a heartbeat) in hooks and the boot service.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

PHASES = ("kernel-independent objects", "conftest", "kernel-open", "linking")

_CONFTEST = re.compile(r"^\s*CONFTEST:\s+\S")
_NV_QUIET = re.compile(r"^\s*\[\s*[\w.+-]+\s*\]\s+(CC|CXX|HOST_CC|HOST_CXX|LD|LINK|HOST_LINK|OBJCOPY|AR)\s+\S")
_KBUILD_CC = re.compile(r"^\s+CC \[M\]\s+\S")
_KBUILD_MOD_O = re.compile(r"^\s+CC \[M\]\s+\S*\.mod\.o\s*$")
_KBUILD_LD_O = re.compile(r"^\s+LD \[M\]\s+\S*\.o\s*$")
_KBUILD_LINK = re.compile(r"^\s+(LD \[M\]|BTF \[M\]|MODPOST)\s+\S")
#: the first pattern that matches a line says its phase (a module's .mod.o is linking, other CC [M] kernel-open)
_CLASSES = [(_CONFTEST, "conftest"), (_NV_QUIET, "kernel-independent objects"), (_KBUILD_MOD_O, "linking")]
_CLASSES += [(_KBUILD_CC, "kernel-open"), (_KBUILD_LD_O, "kernel-open"), (_KBUILD_LINK, "linking")]

#: the seconds between two lines of a :class:`PhaseLog` at most while make runs (a heartbeat fills the gap)
HEARTBEAT_SECONDS = 30.0

#: the last line fwman appends to a build log (``# make exited 0 after 3m05s``): a finished log's signature
_END = re.compile(r"^# make exited (?P<rc>-?\d+) after \S+$")


def classify(line: str) -> str | None:
    """Return the phase a make output line is of (one of :data:`PHASES`), or None for any other line."""
    return next((phase for pattern, phase in _CLASSES if pattern.match(line)), None)


def end_line(rc: int, seconds: float) -> str:
    """Return the line that closes a build log: make's exit status and the build's wall time."""
    return f"# make exited {rc} after {format_elapsed(seconds)}"


def count_phases(text: str) -> dict[str, int]:
    """Return {phase: lines} over a whole build log, counted as :class:`Progress` counts them while it runs."""
    state = Progress("")
    for line in text.splitlines():
        state.feed(line)
    return dict(state.done)


def expected_from_log(text: str) -> dict[str, int]:
    """Return the expected counts for the next build from the previous log: {} unless that build finished ok."""
    lines = text.rstrip("\n").rsplit("\n", 1)
    m = _END.match(lines[-1]) if lines else None  # the log ends with make's exit status (:func:`end_line`)
    return count_phases(text) if m is not None and m.group("rc") == "0" else {}


def format_elapsed(seconds: float) -> str:
    """Return ``seconds`` as ``42s`` or ``3m05s``."""
    whole = max(0, int(seconds))
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


@dataclass
class Progress:
    """The running state of one build: the current phase, objects done per phase, and what to expect.

    ``started_at`` holds the elapsed seconds at which each phase started (for the end lines); ``rc`` is make's
    exit status once it has exited (None while it runs).
    """

    kver: str
    expected: dict[str, int] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    phase: str | None = None
    rc: int | None = None

    def feed(self, line: str) -> str | None:
        """Count ``line``; return the phase it starts when it starts a new one (phases only move forward).

        A line of the phase in progress or of an earlier one counts for the phase in progress.
        """
        kind = classify(line)
        if kind is None:
            return None
        started = None
        if self.phase is None or PHASES.index(kind) > PHASES.index(self.phase):
            self.phase = started = kind
        self.done[self.phase] += 1
        return started

    def unit(self, phase: str) -> str:
        """Return what ``phase`` counts: tests or objects."""
        return "tests" if phase == "conftest" else "objects"

    def line(self, elapsed: float) -> str:
        """Return the live progress line: ``KVER: kernel-open 120/214 objects, 3m05s``."""
        if self.phase is None:
            return f"{self.kver}: starting make, {format_elapsed(elapsed)}"
        done = self.done[self.phase]
        expected = self.expected.get(self.phase)
        count = f"{done}/{expected}" if expected and expected >= done else f"{done}"
        return f"{self.kver}: {self.phase} {count} {self.unit(self.phase)}, {format_elapsed(elapsed)}"


#: what the pipeline calls: (progress, elapsed seconds, phase that just started or None); it calls once more
#: after make exited, with ``progress.rc`` set
ProgressSink = Callable[[Progress, float, str | None], None]


class PhaseLog:
    """The progress sink without a terminal (hooks, the boot service, a redirected stderr): whole lines only.

    It says when each phase starts and ends (with its count and time), a heartbeat when
    nothing was said for ``interval`` seconds, and how make ended: in which phase a failure happened, never an
    expected count (a log reader wants facts, and the previous build's size is not one). One instance may
    follow several builds in turn (a new :class:`Progress` starts over).
    """

    def __init__(self, tell: Callable[[str], None], interval: float = HEARTBEAT_SECONDS) -> None:
        self._report = tell
        self._interval = interval
        self._state: Progress | None = None
        self._last = 0.0  # elapsed seconds of the last line said
        self._phase: str | None = None  # the phase this log said started and has not closed
        self._phase_at = 0.0  # elapsed seconds at which that phase started

    def _say(self, text: str, elapsed: float) -> None:
        self._report(text)
        self._last = elapsed

    def _close_phase(self, state: Progress, elapsed: float) -> None:
        phase, self._phase = self._phase, None
        if phase is not None:
            took = format_elapsed(elapsed - self._phase_at)
            self._say(f"{state.kver}: {phase} done: {state.done[phase]} {state.unit(phase)} in {took}", elapsed)

    def __call__(self, state: Progress, elapsed: float, started: str | None) -> None:
        """Say what changed since the last call (see the class); return nothing."""
        if state is not self._state:  # a new build: the caller has said that make runs
            self._state, self._phase, self._last = state, None, elapsed
        if started is not None:
            self._close_phase(state, elapsed)
            self._phase, self._phase_at = started, elapsed
            self._say(f"{state.kver}: {started} started, {format_elapsed(elapsed)} in", elapsed)
            return
        if state.rc is not None:
            if state.rc == 0:
                self._close_phase(state, elapsed)
                self._say(f"{state.kver}: make finished in {format_elapsed(elapsed)}", elapsed)
            else:
                where = f"in the {state.phase} phase" if state.phase else "before its first phase"
                took = format_elapsed(elapsed)
                self._say(f"{state.kver}: make FAILED {where} after {took} (exit status {state.rc})", elapsed)
            return
        if elapsed - self._last >= self._interval:
            if state.phase is None:
                self._say(f"{state.kver}: make running, no phase yet, {format_elapsed(elapsed)} in", elapsed)
            else:
                count = f"{state.done[state.phase]} {state.unit(state.phase)}"
                self._say(
                    f"{state.kver}: still in {state.phase}: {count} so far, {format_elapsed(elapsed)} in", elapsed
                )
