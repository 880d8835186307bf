"""Build progress: the phases of the fork's make output, and the lines a run without a terminal prints."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fwman.core import clock
from fwman.driver.build.kbuild import _run_make
from fwman.driver.build.progress import (
    PHASES,
    PhaseLog,
    Progress,
    classify,
    count_phases,
    end_line,
    expected_from_log,
    format_elapsed,
)
from fwman.host.live import LiveHost

KVER = "6.1.0-50-amd64"
K = "/var/cache/fwman/build/6.1.0-50-amd64/kernel-open"

#: a clean build as the fork prints it with -j2 --output-sync=target: the kernel-independent objects of two
#: sub-makes (one links while the other still compiles), the conftests, then kbuild, whose LD [M] of a module's
#: objects comes while other objects still compile, and whose .mod.o compiles come after MODPOST
MAKE_LINES = [
    "make -C src/nvidia",
    " [ nvidia            ]  CC           src/nvidia/src/kernel/gpu/gpu.c",
    " [ nvidia-modeset    ]  CXX          src/nvidia-modeset/src/nvkms.cpp",
    " [ nvidia-modeset    ]  LD           _out/Linux_x86_64/nv-modeset-kernel.o",
    " [ nvidia            ]  CC           src/nvidia/src/kernel/gpu/gpu_mem.c",
    " [ nvidia            ]  LD           _out/Linux_x86_64/nv-kernel.o",
    " CONFTEST: INIT_WORK",
    " CONFTEST: pci_resize_resource_has_exclude_bars_arg",
    f"  CC [M]  {K}/nvidia/nv-pci.o",
    f"  CC [M]  {K}/nvidia-uvm/uvm.o",
    f"  LD [M]  {K}/nvidia-uvm.o",
    f"  CC [M]  {K}/nvidia/nv.o",
    f"  LD [M]  {K}/nvidia.o",
    f"  MODPOST {K}/Module.symvers",
    f"  CC [M]  {K}/nvidia.mod.o",
    f"  LD [M]  {K}/nvidia.ko",
    f"  BTF [M] {K}/nvidia.ko",
    f"  CC [M]  {K}/nvidia-uvm.mod.o",
    f"  LD [M]  {K}/nvidia-uvm.ko",
    "make[1]: Leaving directory '/usr/src/linux-headers-6.1.0-50-amd64'",
]


def test_lines_are_classified_by_the_phase_they_belong_to() -> None:
    assert [classify(line) for line in MAKE_LINES] == [
        None,
        *["kernel-independent objects"] * 5,  # the LD of nv-kernel.o ends that phase, it is not the modules' link
        "conftest",
        "conftest",
        "kernel-open",
        "kernel-open",
        "kernel-open",  # LD [M] of nvidia-uvm.o: joining objects while nv.o still compiles
        "kernel-open",
        "kernel-open",
        "linking",
        "linking",  # the .mod.o compiles after MODPOST
        "linking",
        "linking",
        "linking",
        "linking",
        None,
    ]
    assert count_phases("\n".join(MAKE_LINES)) == {
        "kernel-independent objects": 5,
        "conftest": 2,
        "kernel-open": 5,
        "linking": 6,
    }
    assert format_elapsed(59.9) == "59s" and format_elapsed(185) == "3m05s"


def test_phases_only_move_forward() -> None:
    """A late line of an earlier kind counts for the phase in progress and starts nothing (no flapping)."""
    state = Progress(KVER)
    lines = [MAKE_LINES[8], MAKE_LINES[14], MAKE_LINES[9], MAKE_LINES[1], MAKE_LINES[15]]
    assert [state.feed(line) for line in lines] == ["kernel-open", "linking", None, None, None]
    assert state.phase == "linking" and state.done["linking"] == 4 and state.done["kernel-open"] == 1


def test_the_live_line_counts_against_the_last_finished_build() -> None:
    state = Progress(KVER, {"kernel-open": 214})
    assert state.line(3) == f"{KVER}: starting make, 3s"
    for line in MAKE_LINES[6:10]:
        state.feed(line)
    assert state.line(185) == f"{KVER}: kernel-open 2/214 objects, 3m05s"


def test_a_failed_builds_log_promises_nothing() -> None:
    """The counts of a failed build (2 objects before nv-pci.c failed) are not what the next build expects."""
    failed = "$ make\n" + "\n".join(MAKE_LINES[6:9]) + "\nnv-pci.c:17:12: error: boom\n" + end_line(2, 61) + "\n"
    finished = "$ make\n" + "\n".join(MAKE_LINES) + "\n" + end_line(0, 185) + "\n"
    unfinished = "$ make\n" + "\n".join(MAKE_LINES) + "\n"  # fwman was killed while make ran
    assert end_line(2, 61) == "# make exited 2 after 1m01s"
    assert expected_from_log(failed) == {} and expected_from_log(unfinished) == {}
    assert expected_from_log(finished)["kernel-open"] == 5


def _log(lines: list[str], times: list[float], rc: int, interval: float = 30.0) -> list[str]:
    """Feed ``lines`` (line i arriving at ``times[i]``) and make's exit at the last time; return what was said."""
    said: list[str] = []
    sink = PhaseLog(said.append, interval)
    state = Progress(KVER, {"kernel-open": 999})  # an expected count, which a log line must never show
    for line, at in zip(lines, times, strict=False):
        started = state.feed(line)
        if started is not None:
            sink(state, at, started)
        sink(state, at, None)  # the pipeline's once-a-second call
    state.rc = rc
    sink(state, times[-1], None)
    return said


def test_without_a_terminal_each_phase_starts_and_ends_once() -> None:
    said = _log(MAKE_LINES, [float(i) for i in range(len(MAKE_LINES))], 0)
    assert said == [
        f"{KVER}: kernel-independent objects started, 1s in",
        f"{KVER}: kernel-independent objects done: 5 objects in 5s",
        f"{KVER}: conftest started, 6s in",
        f"{KVER}: conftest done: 2 tests in 2s",
        f"{KVER}: kernel-open started, 8s in",
        f"{KVER}: kernel-open done: 5 objects in 5s",
        f"{KVER}: linking started, 13s in",
        f"{KVER}: linking done: 6 objects in 6s",
        f"{KVER}: make finished in 19s",
    ]


def test_a_long_phase_gets_a_heartbeat_and_a_failure_names_its_phase() -> None:
    """Seconds 2..100 without a marking line: a heartbeat at most every 30 s; the failure says its phase."""
    times = [0.0, 1.0, *[float(t) for t in range(2, 101)], 101.0]
    lines = [MAKE_LINES[0], MAKE_LINES[8], *["cc1: note: still compiling"] * 99, "make: *** [modules] Error 2"]
    said = _log(lines, times, 2)
    assert said == [
        f"{KVER}: kernel-open started, 1s in",
        f"{KVER}: still in kernel-open: 1 objects so far, 31s in",
        f"{KVER}: still in kernel-open: 1 objects so far, 1m01s in",
        f"{KVER}: still in kernel-open: 1 objects so far, 1m31s in",
        f"{KVER}: make FAILED in the kernel-open phase after 1m41s (exit status 2)",
    ]
    assert not any("expected" in line for line in said)
    quiet = _log([MAKE_LINES[0]] * 40, [float(t) for t in range(40)], 2)
    assert quiet == [
        f"{KVER}: make running, no phase yet, 30s in",
        f"{KVER}: make FAILED before its first phase after 39s (exit status 2)",
    ]


@given(st.lists(st.sampled_from(MAKE_LINES), max_size=60))
def test_no_order_of_lines_makes_a_phase_start_twice(lines: list[str]) -> None:
    said = _log(lines, [float(i) for i in range(len(lines))] or [0.0], 0)
    starts = [line.split(": ", 1)[1].split(" started")[0] for line in said if " started," in line]
    assert len(starts) == len(set(starts))
    assert starts == sorted(starts, key=PHASES.index)


@given(st.text(max_size=200))
def test_progress_any_line(line: str) -> None:
    assert classify(line) in (*PHASES, None)
    state = Progress(KVER)
    state.feed(line)
    assert state.line(1.0).startswith(KVER)


def test_make_output_is_followed_while_it_runs(tmp_path: Path) -> None:
    """The real sh stands in for make: whole lines while it runs, a heartbeat in a silent stretch, the log kept."""
    host = LiveHost(str(tmp_path))
    log = "/var/log/fwman/build-test.log"
    host.write_bytes(log, b"  CC [M]  old.o\n  CC [M]  old2.o\n# make exited 0 after 5s\n")  # the last build
    script = "echo ' CONFTEST: INIT_WORK'; sleep 3.5; echo '  CC [M]  a.o'; echo 'x.c:1:1: error: boom' >&2; exit 2"
    said: list[str] = []
    expected: list[dict[str, int]] = []
    sink = PhaseLog(said.append, interval=1.0)

    def follow(state: Progress, elapsed: float, started: str | None) -> None:
        expected.append(state.expected)
        sink(state, elapsed, started)

    argv = ["sh", "-c", script]
    result, output, phase = _run_make(host, argv, str(tmp_path), log, "$ make\n", "test", clock.monotonic(), follow)
    assert result.rc == 2 and phase == "kernel-open"
    assert output == " CONFTEST: INIT_WORK\n  CC [M]  a.o\nx.c:1:1: error: boom\n"
    assert expected[0] == {"kernel-independent objects": 0, "conftest": 0, "kernel-open": 2, "linking": 0}
    shape = [re.sub(r"\d+(m\d\d)?s", "Ns", line) for line in said]
    assert shape[0] == "test: conftest started, Ns in"
    assert "test: still in conftest: 1 tests so far, Ns in" in shape  # the 3.5 s without a line
    assert shape[-3:] == [
        "test: conftest done: 1 tests in Ns",
        "test: kernel-open started, Ns in",
        "test: make FAILED in the kernel-open phase after Ns (exit status 2)",
    ]
    text = (tmp_path / log.lstrip("/")).read_text()
    # the 3.5 s sleep is a floor on what the log records; a loaded machine only adds to it (no upper bound here)
    ended = re.search(r"\n# make exited 2 after (?:(\d+)m)?(\d+)s\n$", text)
    assert text.startswith("$ make\n CONFTEST") and ended is not None
    assert int(ended[1] or 0) * 60 + int(ended[2]) >= 3
    assert expected_from_log(text) == {}  # the next build expects nothing from this failed one
