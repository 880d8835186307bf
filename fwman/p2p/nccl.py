"""The NCCL tier of ``fwman p2p test``: an all-reduce across the GPUs, checked exactly, and which transport NCCL chose.

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
from fwman.core.jsontext import parse_json
from fwman.host.base import Host
from fwman.p2p.nccl_log import MEANING, NET, P2P, SHM, NcclLog, PerfReport, parse_all_reduce_perf, parse_nccl_log

RUNNER_TORCH = "torch.distributed"
RUNNER_NCCL_TESTS = "nccl-tests all_reduce_perf"
RESULT_TAG = "FWMAN_NCCL_RESULT "
NO_TORCH_RC = 3  # the torch script's exit status when torch (or its NCCL backend, or a GPU) is missing
#: the variables every run gets: INFO is what prints the transport lines
DEBUG_ENV = {"NCCL_DEBUG": "INFO"}

#: Run with ``python3 -c SCRIPT [elements]``: the parent starts one worker process per GPU (``SCRIPT worker rank
#: world port elements``), each all-reduces a float32 tensor of small integers and compares the sum exactly.
TORCH_SCRIPT = r"""
import json, os, socket, subprocess, sys, time
try:
    import torch
    import torch.distributed as dist
except Exception as e:
    print("FWMAN_NO_TORCH " + repr(e)); sys.exit(3)
RESULT = "FWMAN_NCCL_RESULT "
def worker(rank, world, port, n):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    base = (torch.arange(n, device="cuda", dtype=torch.int64) % 1021).to(torch.float32)
    x = base * (rank + 1)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    expected = base * (world * (world + 1) // 2)
    wrong = torch.tensor([int((x != expected).sum().item())], device="cuda", dtype=torch.int64)
    t = base.clone()
    dist.all_reduce(t)
    torch.cuda.synchronize()
    reps = 5
    start = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / reps
    dist.all_reduce(wrong)
    torch.cuda.synchronize()
    if rank == 0:
        algbw = n * 4 / seconds / 1e9
        print(RESULT + json.dumps({
            "world": world, "elements": n, "wrong": int(wrong.item()), "seconds": seconds,
            "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world,
            "torch": torch.__version__, "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "devices": [torch.cuda.get_device_name(i) for i in range(world)],
        }), flush=True)
    dist.destroy_process_group()
if len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])); sys.exit(0)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 16 * 1024 * 1024
if not torch.cuda.is_available() or not dist.is_nccl_available():
    print("FWMAN_NO_TORCH no CUDA device or no NCCL backend in this torch"); sys.exit(3)
world = torch.cuda.device_count()
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, "worker", str(r), str(world),
         str(port), str(n)]) for r in range(world)]
codes = [p.wait() for p in procs]
if any(codes):
    print("FWMAN_NCCL_FAILED worker exit codes %s" % codes); sys.exit(1)
"""


def torch_script() -> str:
    """Return the torch runner's program text (it passes itself to its workers as ``SCRIPT``)."""
    return "SCRIPT = " + repr(TORCH_SCRIPT) + "\n" + TORCH_SCRIPT


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

    @property
    def ok(self) -> bool:
        """Return True when the all-reduce ran and its result was checked and exact."""
        return self.error is None and self.wrong == 0

    @property
    def transport(self) -> str | None:
        """Return the transport classes NCCL used (``P2P``, ``P2P+SHM``), None when it connected no peer."""
        return self.log.summary()

    def verdict(self) -> str:
        """Return one line: did the all-reduce verify, and which transport NCCL chose (and what that means)."""
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
        """Return the JSON payload of ``fwman p2p test --nccl --json``."""
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
            "ok": self.ok,
            "verdict": self.verdict(),
        }


def torch_argv(prefix: Sequence[str], env: Mapping[str, str], python: str = "python3", elements: int = 0) -> list[str]:
    """Return the command line of the torch runner: ``prefix env K=V... python -c SCRIPT [elements]``.

    The variables go through ``env`` inside the prefix, so they reach a container (`pct exec` and `docker exec`
    do not pass the caller's environment in).
    """
    argv = [*prefix, "env", *(f"{k}={v}" for k, v in env.items()), python, "-c", torch_script()]
    return argv + ([str(elements)] if elements else [])


def nccl_tests_argv(
    prefix: Sequence[str], env: Mapping[str, str], gpus: int, binary: str = "all_reduce_perf"
) -> list[str]:
    """Return the command line of the nccl-tests runner (1 MiB to 64 MiB, one process driving ``gpus`` GPUs)."""
    return [
        *prefix,
        "env",
        *(f"{k}={v}" for k, v in env.items()),
        binary,
        "-b",
        "1M",
        "-e",
        "64M",
        "-f",
        "4",
        "-g",
        str(max(gpus, 1)),
        "-c",
        "1",
    ]


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


def report_from_torch(prefix: Sequence[str], argv: Sequence[str], rc: int, output: str) -> NcclReport:
    """Return the report of one torch-runner run from its exit status and combined output (pure)."""
    report = NcclReport(RUNNER_TORCH, tuple(prefix), tuple(argv), rc, log=parse_nccl_log(output), output=output)
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
    timeout: float = 600.0,
) -> NcclReport:
    """Run the NCCL tier on ``host`` (inside ``prefix``) and return its report.

    ``runner`` is ``torch``, ``nccl-tests`` or ``auto`` (torch when importable there, else all_reduce_perf).
    ``env`` adds variables (NCCL_P2P_LEVEL=SYS, say) to NCCL_DEBUG=INFO. Raises RunnerMissing when no runner
    is available, FwmanError when the command times out.
    """
    variables = {**DEBUG_ENV, **(env or {})}
    why: list[str] = []
    if runner in ("auto", "torch"):
        argv = torch_argv(prefix, variables, python)
        result = host.run(argv, timeout=timeout)
        output = result.stdout + ("\n" + result.stderr if result.stderr else "")
        no_torch = result.missing or (result.rc == NO_TORCH_RC and "FWMAN_NO_TORCH" in output)
        if not no_torch:
            return report_from_torch(prefix, argv, result.rc, output)
        why.append(f"torch: {_first(output, 'FWMAN_NO_TORCH') or 'python3 not found'}")
        if runner == "torch":
            raise RunnerMissing(f"the torch NCCL runner cannot run here ({why[-1]})", hint=_HINT)
    argv = nccl_tests_argv(prefix, variables, gpus)
    result = host.run(argv, timeout=timeout)
    if result.missing or result.rc == 127:
        why.append("all_reduce_perf not found")
        raise RunnerMissing("no NCCL runner here: " + "; ".join(why), hint=_HINT)
    output = result.stdout + ("\n" + result.stderr if result.stderr else "")
    return report_from_nccl_tests(prefix, argv, result.rc, output, gpus, variables)


_HINT = (
    "run it where the model server's NCCL is (`--prefix 'pct exec 101 --'` or `--prefix 'docker exec NAME'`): "
    "PyTorch there, or nccl-tests' all_reduce_perf on PATH"
)


def _first(text: str, tag: str) -> str | None:
    return next((ln.strip() for ln in text.splitlines() if tag in ln), None)
