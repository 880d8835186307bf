"""The NCCL tier of ``fwman p2p``: an all-reduce across the GPUs, checked exactly, and which transport NCCL chose.

The copy test proves the GPUs *can* reach each other; a model server talks through NCCL, which may still decline
P2P for a pair (by topology and ``NCCL_P2P_LEVEL``) and stage the data through host memory. This tier runs an
NCCL all-reduce the way the server would, where the server's NCCL lives (a command prefix such as
``pct exec 101 --`` or ``docker exec NAME`` runs it inside the container), with ``NCCL_DEBUG=INFO``, and reads
from NCCL's own lines the transport of every connection.

Two runners: ``torch.distributed`` (one process per GPU, as vLLM runs; PyTorch is in every vLLM container) and
nccl-tests' ``all_reduce_perf`` (one process, ``-g`` GPUs; its own ``#wrong`` check). The torch runner's
values are small integers in float32, so the sum is exact and compared element by element, never within a
tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwman.core.errors import FwmanError, ParseError
from fwman.core.jsonout import encode
from fwman.core.jsontext import parse_json
from fwman.host.base import Host
from fwman.p2p.nccl_log import MEANING, NET, P2P, SHM, NcclLog, PerfReport, parse_all_reduce_perf, parse_nccl_log

RUNNER_TORCH = "torch.distributed"
RUNNER_NCCL_TESTS = "nccl-tests all_reduce_perf"
RESULT_TAG = "FWMAN_NCCL_RESULT "
HUNG_TAG = "FWMAN_NCCL_HUNG "
#: the message sizes of the torch runner: 4 B (latency, where P2P's setup costs most), 16 MiB (club-3090's
#: p2p_collective_check.py size) and 256 MiB (bandwidth)
DEFAULT_SIZES = (4, 16 * 1024 * 1024, 256 * 1024 * 1024)
#: the control run's variable: NCCL without P2P (shared memory between the GPUs' processes instead)
CONTROL_ENV = {"NCCL_P2P_DISABLE": "1"}
#: how much longer than the runner's own deadline fwman waits for the runner before it kills the runner itself
OUTER_MARGIN = 30.0
NO_TORCH_RC = 3  # the torch script's exit status when torch (or its NCCL backend, or a GPU) is missing
#: the variables every run gets: INFO is what prints the transport lines
DEBUG_ENV = {"NCCL_DEBUG": "INFO"}

#: Run with ``python3 -c SCRIPT SIZES TIMEOUT``: the parent starts one worker process per GPU (``SCRIPT worker rank
#: world port SIZES``); for each size in bytes (comma-separated) each worker all-reduces a float32 tensor of small
#: integers, compares the sum exactly, warms up and times the all-reduce. Workers announce each step
#: (``FWMAN_NCCL_STEP rank step``); their output passes through the parent (so none holds the caller's pipe), and
#: a rank that has not returned within TIMEOUT seconds is killed and named (``FWMAN_NCCL_HUNG {...}``, exit 124).
TORCH_SCRIPT = r"""
import json, os, socket, subprocess, sys, threading, time
try:
    import torch
    import torch.distributed as dist
except Exception as e:
    print("FWMAN_NO_TORCH " + repr(e)); sys.exit(3)
RESULT = "FWMAN_NCCL_RESULT "
def worker(rank, world, port, sizes):
    def step(name):
        print("FWMAN_NCCL_STEP %d %s" % (rank, name), flush=True)
    torch.cuda.set_device(rank)
    step("init_process_group")
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    results = []
    for nbytes in sizes:
        n = max(nbytes // 4, 1)
        base = (torch.arange(n, device="cuda", dtype=torch.int64) % 1021).to(torch.float32)
        x = base * (rank + 1)
        step("all_reduce %d B (checked)" % nbytes)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        expected = base * (world * (world + 1) // 2)
        wrong = torch.tensor([int((x != expected).sum().item())], device="cuda", dtype=torch.int64)
        t = base.clone()
        step("all_reduce %d B (warm-up)" % nbytes)
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        reps = 5 if nbytes >= (1 << 24) else 50
        step("all_reduce %d B (timed)" % nbytes)
        start = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / reps
        dist.all_reduce(wrong)
        torch.cuda.synchronize()
        algbw = n * 4 / seconds / 1e9
        results.append({"bytes": n * 4, "elements": n, "wrong": int(wrong.item()), "seconds": seconds,
                        "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world})
    if rank == 0:
        last = results[-1]
        print(RESULT + json.dumps({
            "world": world, "elements": last["elements"], "wrong": sum(r["wrong"] for r in results),
            "seconds": last["seconds"], "algbw_gbps": last["algbw_gbps"], "busbw_gbps": last["busbw_gbps"],
            "sizes": results,
            "torch": torch.__version__, "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "devices": [torch.cuda.get_device_name(i) for i in range(world)],
        }), flush=True)
    step("destroy_process_group")
    dist.destroy_process_group()
if len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), [int(v) for v in sys.argv[5].split(",")])
    sys.exit(0)
sizes = sys.argv[1] if len(sys.argv) > 1 else "4,16777216"
deadline = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 300.0)
if not torch.cuda.is_available() or not dist.is_nccl_available():
    print("FWMAN_NO_TORCH no CUDA device or no NCCL backend in this torch"); sys.exit(3)
world = torch.cuda.device_count()
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
last = {}
def relay(rank, stream):
    for line in stream:
        if line.startswith("FWMAN_NCCL_STEP "):
            last[rank] = line.split(" ", 2)[2].strip()
        sys.stdout.write(line); sys.stdout.flush()
procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, "worker", str(r), str(world), str(port), sizes],
         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
         for r in range(world)]
readers = [threading.Thread(target=relay, args=(r, p.stdout), daemon=True) for r, p in enumerate(procs)]
for t in readers:
    t.start()
hung = []
for r, p in enumerate(procs):
    try:
        p.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        hung.append(r)
for r in hung:
    procs[r].kill()
for p in procs:
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
for t in readers:
    t.join(timeout=2)
if hung:
    print("FWMAN_NCCL_HUNG " + json.dumps({"ranks": hung, "steps": {str(r): last.get(r) for r in hung},
          "timeout": float(sys.argv[2]) if len(sys.argv) > 2 else 300.0}), flush=True)
    sys.exit(124)
codes = [p.returncode for p in procs]
if any(codes):
    print("FWMAN_NCCL_FAILED worker exit codes %s" % codes); sys.exit(1)
"""


def torch_script() -> str:
    """Return the torch runner's program text (it passes itself to its workers as ``SCRIPT``)."""
    return "SCRIPT = " + repr(TORCH_SCRIPT) + "\n" + TORCH_SCRIPT


@dataclass(frozen=True)
class SizeResult:
    """One message size of the torch runner: values that differ, mean seconds of one all-reduce, bandwidths."""

    size_bytes: int
    wrong: int | None
    seconds: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None


@dataclass
class NcclReport:
    """One run of the NCCL tier."""

    runner: str
    prefix: tuple[str, ...]
    argv: tuple[str, ...]
    rc: int
    world: int | None = None
    wrong: int | None = None  # elements (torch) or #wrong total (nccl-tests) that differ; None when not checked
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    nccl_version: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    log: NcclLog = field(default_factory=NcclLog)
    perf: PerfReport | None = None
    error: str | None = None
    output: str = ""
    sizes: list[SizeResult] = field(default_factory=list)
    hung: str | None = None  # what never returned (the ranks and their steps), BLOCK

    @property
    def ok(self) -> bool:
        """Return True when the all-reduce ran and its result was checked and exact."""
        return self.error is None and self.hung is None and self.wrong == 0

    @property
    def transport(self) -> str | None:
        """Return the transport classes NCCL used (``P2P``, ``P2P+SHM``), None when it connected no peer."""
        return self.log.summary()

    def verdict(self) -> str:
        """Return one line: did the all-reduce verify, and which transport NCCL chose (and what that means)."""
        if self.hung:
            return f"BLOCK: {self.hung}"
        if self.error:
            return f"FAILED: {self.error}"
        if self.wrong is None:
            return "not verified: the all-reduce result was not checked"
        if self.wrong:
            return f"WRONG RESULTS: {self.wrong} values of the all-reduce differ from the exact sum"
        ranks = f"{self.world} rank{'s' if self.world != 1 else ''}" if self.world else "the ranks"
        exact = f"all-reduce exact on {ranks}"
        classes = self.log.classes()
        if not classes:
            if self.world == 1:
                return f"{exact}; one GPU: NCCL connects no peer, so there is no transport to judge"
            return f"{exact}; NCCL printed no transport lines (was NCCL_DEBUG=INFO passed through?)"
        total = sum(classes.values())
        shown = ", ".join(f"{t} x{n}" for t, n in self.log.transports().items())
        if set(classes) == {P2P}:
            return f"{exact}; NCCL used P2P on every connection ({shown})"
        worst = SHM if SHM in classes else NET if NET in classes else next(iter(classes))
        return (
            f"{exact}; NCCL used {worst} on {classes.get(worst, 0)} of {total} connections ({shown}): {MEANING[worst]}"
        )

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload of ``fwman p2p --nccl --json``."""
        return {
            "runner": self.runner,
            "prefix": list(self.prefix),
            "argv": list(self.argv),
            "rc": self.rc,
            "world": self.world,
            "wrong": self.wrong,
            "algbw_gbps": None if self.algbw_gbps is None else round(self.algbw_gbps, 3),
            "busbw_gbps": None if self.busbw_gbps is None else round(self.busbw_gbps, 3),
            "nccl_version": self.nccl_version,
            "environment": self.environment,
            "transport": self.transport,
            "transports": self.log.transports(),
            "connections": [
                {"channel": c.channel, "src": c.src, "dst": c.dst, "transport": c.transport, "class": c.kind}
                for c in self.log.channels
            ],
            "nccl_warnings": self.log.warnings,
            "sizes": encode(self.sizes),
            "hung": self.hung,
            "ok": self.ok,
            "verdict": self.verdict(),
        }


def torch_argv(
    prefix: Sequence[str],
    env: Mapping[str, str],
    python: str = "python3",
    sizes: Sequence[int] = DEFAULT_SIZES,
    timeout: float = 300.0,
) -> list[str]:
    """Return the command line of the torch runner: ``prefix env K=V... python -c SCRIPT SIZES TIMEOUT``.

    The variables go through ``env`` inside the prefix, so they reach a container (`pct exec` and `docker exec`
    do not pass the caller's environment in).
    """
    argv = [*prefix, "env", *(f"{k}={v}" for k, v in env.items()), python, "-c", torch_script()]
    return [*argv, ",".join(str(n) for n in sizes), f"{timeout:g}"]


def nccl_tests_argv(
    prefix: Sequence[str], env: Mapping[str, str], gpus: int, binary: str = "all_reduce_perf"
) -> list[str]:
    """Return the command line of the nccl-tests runner (1 MiB to 64 MiB, one process driving ``gpus`` GPUs)."""
    sizes = ["-b", "1M", "-e", "64M", "-f", "4"]
    return [*prefix, "env", *(f"{k}={v}" for k, v in env.items()), binary, *sizes, "-g", str(max(gpus, 1)), "-c", "1"]


def parse_torch_output(text: str) -> dict[str, Any] | None:
    """Return the torch runner's result object (the ``FWMAN_NCCL_RESULT`` line), None when it printed none.

    Raises ParseError when the line is there but is not a JSON object.
    """
    for line in text.splitlines():
        if line.startswith(RESULT_TAG):
            doc = parse_json(line[len(RESULT_TAG) :], "torch NCCL runner", "result line")
            if not isinstance(doc, dict):
                raise ParseError("torch NCCL runner", "result line", "not a JSON object")
            return doc
    return None


def _num(doc: Mapping[str, Any], key: str) -> float | None:
    v = doc.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _hung(output: str) -> str | None:
    """Return what the ``FWMAN_NCCL_HUNG`` line says never returned (ranks and steps), None without one."""
    for line in output.splitlines():
        if line.startswith(HUNG_TAG):
            try:
                doc = parse_json(line[len(HUNG_TAG) :], "torch NCCL runner", "hung line")
            except ParseError:
                return "NCCL ranks never returned (the runner's line is unreadable)"
            if not isinstance(doc, dict):
                return "NCCL ranks never returned"
            raw = doc.get("steps")
            steps: dict[str, Any] = raw if isinstance(raw, dict) else {}
            ranks = ", ".join(f"rank {r} in {steps.get(str(r)) or 'starting'}" for r in doc.get("ranks") or [])
            return f"NCCL {ranks or 'ranks'} never returned within {doc.get('timeout')} s (killed)"
    return None


def _sizes(doc: Mapping[str, Any]) -> list[SizeResult]:
    rows = doc.get("sizes")
    return [
        SizeResult(
            int(row["bytes"]),
            w if isinstance(w := row.get("wrong"), int) and not isinstance(w, bool) else None,
            *(_num(row, key) for key in ("seconds", "algbw_gbps", "busbw_gbps")),
        )
        for row in (rows if isinstance(rows, list) else [])
        if isinstance(row, dict) and isinstance(row.get("bytes"), int)
    ]


def report_from_torch(prefix: Sequence[str], argv: Sequence[str], rc: int, output: str) -> NcclReport:
    """Return the report of one torch-runner run from its exit status and combined output (pure)."""
    report = NcclReport(RUNNER_TORCH, tuple(prefix), tuple(argv), rc, log=parse_nccl_log(output), output=output)
    report.hung = _hung(output)
    if report.hung:
        return report
    try:
        doc = parse_torch_output(output)
    except ParseError as e:
        report.error = e.message
        return report
    if doc is None:
        lines = [ln for ln in output.splitlines() if ln.strip()]
        tail = next((ln for ln in reversed(lines) if "FWMAN_" in ln or "Error" in ln), lines[-1] if lines else "")
        report.error = f"the torch runner exited {rc} without a result: {tail.strip()[:200] or 'no output'}"
        return report
    world, wrong = doc.get("world"), doc.get("wrong")
    report.world = world if isinstance(world, int) else None
    report.wrong = wrong if isinstance(wrong, int) else None
    report.sizes = _sizes(doc)
    report.algbw_gbps, report.busbw_gbps = _num(doc, "algbw_gbps"), _num(doc, "busbw_gbps")
    nccl = doc.get("nccl")
    report.nccl_version = report.log.version or (nccl if isinstance(nccl, str) else None)
    env = doc.get("env")
    report.environment = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    if rc != 0:
        report.error = f"the torch runner exited {rc}"
    return report


def report_from_nccl_tests(
    prefix: Sequence[str], argv: Sequence[str], rc: int, output: str, gpus: int, env: Mapping[str, str]
) -> NcclReport:
    """Return the report of one ``all_reduce_perf`` run from its exit status and combined output (pure)."""
    report = NcclReport(RUNNER_NCCL_TESTS, tuple(prefix), tuple(argv), rc, log=parse_nccl_log(output), output=output)
    report.nccl_version = report.log.version
    report.environment = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    try:
        perf = parse_all_reduce_perf(output)
    except ParseError as e:
        report.error = f"all_reduce_perf exited {rc}: {e.message}"
        return report
    report.perf = perf
    report.world = len(perf.devices) or gpus
    report.wrong = perf.wrong
    if perf.out_of_bounds:
        report.wrong = (report.wrong or 0) + perf.out_of_bounds
    report.busbw_gbps = perf.peak_busbw
    report.algbw_gbps = max((max(r.oop_algbw, r.ip_algbw) for r in perf.rows), default=None)
    if rc != 0:
        report.error = f"all_reduce_perf exited {rc}"
    return report


class RunnerMissing(FwmanError):
    """Neither runner is available where the test was to run."""


def run_nccl_test(
    host: Host,
    *,
    prefix: Sequence[str] = (),
    runner: str = "auto",
    env: Mapping[str, str] | None = None,
    gpus: int = 0,
    python: str = "python3",
    timeout: float = 300.0,
    sizes: Sequence[int] = DEFAULT_SIZES,
    margin: float = OUTER_MARGIN,
) -> NcclReport:
    """Run the NCCL tier on ``host`` (inside ``prefix``) and return its report.

    ``runner`` is ``torch``, ``nccl-tests`` or ``auto`` (torch when importable there, else all_reduce_perf).
    ``env`` adds variables (NCCL_P2P_LEVEL=SYS, say) to NCCL_DEBUG=INFO. The torch runner kills a rank that has
    not returned within ``timeout`` seconds and names it; fwman gives the runner ``margin`` seconds more
    (:data:`OUTER_MARGIN`) before it kills the runner itself. Either way the report is BLOCK (``hung``), never a
    hung fwman. Raises RunnerMissing when no runner is available.
    """
    variables = {**DEBUG_ENV, **(env or {})}
    why: list[str] = []
    if runner in ("auto", "torch"):
        argv = torch_argv(prefix, variables, python, sizes, timeout)
        try:
            result = host.run(argv, timeout=timeout + margin)
        except FwmanError:  # the host's timeout: fwman killed the runner
            return _outer_hang(RUNNER_TORCH, prefix, argv, variables, timeout + margin)
        output = result.stdout + ("\n" + result.stderr if result.stderr else "")
        no_torch = result.missing or (result.rc == NO_TORCH_RC and "FWMAN_NO_TORCH" in output)
        if not no_torch:
            return report_from_torch(prefix, argv, result.rc, output)
        said = next((ln.strip() for ln in output.splitlines() if "FWMAN_NO_TORCH" in ln), None)
        why.append(f"torch: {said or 'python3 not found'}")
        if runner == "torch":
            raise RunnerMissing(f"the torch NCCL runner cannot run here ({why[-1]})", hint=_HINT)
    argv = nccl_tests_argv(prefix, variables, gpus)
    try:
        result = host.run(argv, timeout=timeout + margin)
    except FwmanError:  # the host's timeout: fwman killed the runner
        return _outer_hang(RUNNER_NCCL_TESTS, prefix, argv, variables, timeout + margin)
    if result.missing or result.rc == 127:
        why.append("all_reduce_perf not found")
        raise RunnerMissing("no NCCL runner here: " + "; ".join(why), hint=_HINT)
    output = result.stdout + ("\n" + result.stderr if result.stderr else "")
    return report_from_nccl_tests(prefix, argv, result.rc, output, gpus, variables)


def _outer_hang(
    runner: str, prefix: Sequence[str], argv: Sequence[str], env: Mapping[str, str], timeout: float
) -> NcclReport:
    """Return the BLOCK report of a runner fwman had to kill itself (its own deadline did not fire)."""
    hung = f"the NCCL runner ({runner}) did not return within {timeout:g} s (killed)"
    return NcclReport(runner, tuple(prefix), tuple(argv), 124, environment=dict(env), hung=hung)


@dataclass
class NcclComparison:
    """The NCCL tier run twice: as configured (P2P allowed) and the control with ``NCCL_P2P_DISABLE=1``."""

    p2p: NcclReport
    control: NcclReport | None

    @property
    def ok(self) -> bool:
        """Return True when both runs were exact and neither hung (the control's failure fails the test too:
        an NCCL that is wrong without P2P has a problem P2P did not cause, and it still must not serve)."""
        return self.p2p.ok and (self.control is None or self.control.ok)

    def faster(self) -> list[tuple[int, float, float]]:
        """Return (size in bytes, P2P seconds, control seconds) for every size both runs timed."""
        if self.control is None:
            return []
        control = {r.size_bytes: r.seconds for r in self.control.sizes}
        return [
            (r.size_bytes, r.seconds, c)
            for r in self.p2p.sizes
            if r.seconds is not None and (c := control.get(r.size_bytes)) is not None
        ]

    def p2p_faster(self) -> bool | None:
        """Return True when P2P was used, exact and faster than the control at every size; False when it was
        slower at some size; None when there is nothing to compare (no control, one rank, a failed run)."""
        if not self.ok or self.control is None or (self.p2p.world or 0) < 2 or P2P not in self.p2p.log.classes():
            return None
        rows = self.faster()
        if not rows:
            return None
        return all(a < b for _, a, b in rows)

    def advice(self) -> str:
        """Return the advice the measurement supports: a P2P level only where P2P is correct and faster."""
        if self.p2p.hung or (self.control is not None and self.control.hung):
            return "no P2P advice: a run hung (BLOCK); do not serve a model over this NCCL until it returns"
        if not self.p2p.ok:
            return "do not use P2P: the all-reduce with P2P allowed did not verify"
        if self.control is None:
            return "no P2P advice: the control run (NCCL_P2P_DISABLE=1) was skipped, nothing to compare with"
        if not self.control.ok:
            return "no P2P advice: the control run (NCCL_P2P_DISABLE=1) did not verify"
        if (self.p2p.world or 0) < 2:
            return "no P2P advice: one rank, NCCL connects no peer (P2P and the control time the same path)"
        if P2P not in self.p2p.log.classes():
            return "no P2P advice: NCCL did not use P2P on any connection in the P2P run (see its transports)"
        rows = self.faster()
        slower = [(n, a, b) for n, a, b in rows if a >= b]
        if not rows:
            return "no P2P advice: the runs timed no common message size"
        if slower:
            where = ", ".join(f"{_bytes(n)} ({a * 1e6:.1f} us vs {b * 1e6:.1f} us)" for n, a, b in slower)
            return (
                f"keep P2P off for NCCL (NCCL_P2P_DISABLE=1): slower than shared memory at {where} "
                "(NVIDIA/nccl#896: 'it is faster to use shared memory')"
            )
        return (
            "P2P is exact and faster at every size: allow it (NCCL_P2P_LEVEL as `fwman doctor` computes from the "
            "topology, SYS where the GPUs meet only at the CPU)"
        )

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload of ``fwman p2p --nccl --json`` (the P2P run's keys, plus the control)."""
        return {
            **self.p2p.to_json(),
            "control": None if self.control is None else self.control.to_json(),
            "speedup": [{"size_bytes": n, "p2p_seconds": a, "control_seconds": b} for n, a, b in self.faster()],
            "advice": self.advice(),
            "ok": self.ok,
        }


def _bytes(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n} B"


def run_nccl_comparison(
    host: Host, *, control: bool = True, env: Mapping[str, str] | None = None, **kwargs: Any
) -> NcclComparison:
    """Run the NCCL tier as configured, then (``control``) again with ``NCCL_P2P_DISABLE=1``; return both.

    Takes :func:`run_nccl_test`'s arguments; the control run uses the runner the first run used. Raises
    RunnerMissing as it does.
    """
    first = run_nccl_test(host, env=env, **kwargs)
    if not control:
        return NcclComparison(first, None)
    runner = "torch" if first.runner == RUNNER_TORCH else "nccl-tests"
    second = run_nccl_test(host, env={**(env or {}), **CONTROL_ENV}, **{**kwargs, "runner": runner})
    return NcclComparison(first, second)


_HINT = (
    "run it where the model server's NCCL is (`--prefix 'pct exec 101 --'` or `--prefix 'docker exec NAME'`): "
    "PyTorch there, or nccl-tests' all_reduce_perf on PATH"
)
