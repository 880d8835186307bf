"""``fwman p2p`` as a use case: run a tier, then record its result against the configuration it ran on (the
fingerprint read with the doctor's own reader, so ``fwman doctor`` compares like with like)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fwman.app.text import Out, Result, say, table
from fwman.core import paths
from fwman.core.clock import now_utc
from fwman.core.errors import FwmanError, MissingError, ParseError, UsageError, VerificationError
from fwman.gpu.inventory import scan_cards
from fwman.host.base import Host
from fwman.p2p.copytest import LATENCY_BYTES, LATENCY_REPEATS, MIB, run_isolated_copy_test
from fwman.p2p.cuda import open_driver
from fwman.p2p.history import Fingerprint, P2PRecord, append_record
from fwman.p2p.nccl import RunnerMissing, run_nccl_comparison
from fwman.p2p.record import record_from_copy, record_from_nccl
from fwman.p2p.soak import parse_duration, run_soak
from fwman.platform.proxmox import lxc_config_path
from fwman.reports.doctor.facts import gather

if TYPE_CHECKING:
    from fwman.p2p.copytest import CopyReport
    from fwman.p2p.device import DeviceLayer as DeviceLayer  # named by the CLI's Environment (cuda_driver)
    from fwman.p2p.nccl import NcclComparison
    from fwman.p2p.soak import SoakReport


HISTORY = paths.P2P_HISTORY_FILE


def server_environment(host: Host, prefix: list[str]) -> tuple[dict[str, str], str | None]:
    """Return the ``NCCL_*`` variables the model server gets in the container ``prefix`` enters, and where they
    are set; ``({}, None)`` when the prefix is not ``pct exec <id>`` or that container sets none. Never raises.
    (``pct exec`` does not pass the container's ``lxc.environment``, so the NCCL tier passes them itself.)"""
    if len(prefix) < 3 or prefix[:2] != ["pct", "exec"] or not prefix[2].isdigit():
        return {}, None
    where = lxc_config_path(prefix[2])
    try:
        sources = gather(host).workloads.get().sources
    except FwmanError:
        return {}, None
    for source in sources:
        if source.kind == "lxc" and source.where == where:
            env = {k: v for k, v in source.env.items() if k.startswith("NCCL_")}
            return env, (where if env else None)
    return {}, None


# -- what a run tells: the copy test (and its soak), the NCCL tier ------------------------------------------------
@dataclass
class CopyResult(Result):
    """The copy test's report, and the soak's when it was repeated under load."""

    report: CopyReport
    soak: SoakReport | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.p2p-test/1`` (without the schema key)."""
        doc = self.report.to_json()
        return doc if self.soak is None else {**doc, "soak": self.soak.to_json()}

    def text(self, verbose: int = 0) -> Out:
        """Return the GPUs, the bandwidth and latency matrices, every bad pair, the verdict, then the soak's."""
        report = self.report
        n, warm = len(report.gpus), report.pairs[0].warmup if report.pairs else 0
        cuda = f", CUDA driver API {report.driver_version}" if report.driver_version else ""
        deadline = f", {report.timeout:g} s deadline per pair" if report.timeout else ""
        out: Out = [say(
            f"fwman p2p: {n} GPU{'s' if n != 1 else ''}, {report.size_bytes // MIB} MiB per copy, "
            f"{warm} warm-up and {report.repeats} timed cop{'ies' if report.repeats != 1 else 'y'} per pair"
            f"{deadline}{cuda}"
        )]  # fmt: skip
        out += [say(f"  GPU{g.index}  {g.bus_id}  {g.name}") for g in report.gpus]
        names = [f"GPU{g.index}" for g in report.gpus]
        out += [say(), say("GB/s (row: from, column: to; * = no direct peer access, staged through host memory)"),
                table(["", *names], [[names[i], *row] for i, row in enumerate(report.matrix())])]  # fmt: skip
        if any(p.latency_us is not None for p in report.pairs):
            latency = [[names[i], *row] for i, row in enumerate(report.latency_matrix())]
            title = f"latency, microseconds (one synchronous {LATENCY_BYTES}-byte copy, mean of {LATENCY_REPEATS})"
            out += [say(), say(title), table(["", *names], latency)]
        out.append(say())
        peers = [p for p in report.pairs if p.src != p.dst]
        if peers:
            direct = sum(1 for p in peers if p.direct)
            out.append(say(f"peer access: direct for {direct} of {len(peers)} GPU pairs (cuDeviceCanAccessPeer)"))
        else:
            out.append(say("peer access: one GPU, no pair of GPUs to copy between (the on-device copy was tested)"))
        out += [say(f"CORRUPTED {p.label}: {p.corrupted_bytes} of {p.size_bytes} bytes wrong, first at offset "
                    f"0x{p.first_bad_offset or 0:x}", "red") for p in report.corrupted]  # fmt: skip
        out += [say(f"BLOCK {p.label}: {p.error}", "red") for p in report.blocked]
        out += [say(f"FAILED {p.label}: {p.error}", "red") for p in report.failed]
        if report.hung:
            out.append(say(f"BLOCK {report.hung}", "red"))
        out.append(say(f"verdict: {report.verdict()}", "good" if report.ok else "bad"))
        return out if self.soak is None else out + _soak_text(self.soak)

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) unless every copy ran and verified and the soak found nothing new."""
        report, found = self.report, self.soak
        if report.ok and found is not None and not found.ok:
            return VerificationError(
                found.verdict(),
                hint="errors that appear only under sustained P2P load: run `fwman doctor` (IOMMU mode, bridge "
                "windows, driver settings); an IOMMU fault under P2P usually means iommu=pt is missing",
            )
        if report.ok:
            return None
        hung = bool(report.hung or report.blocked)
        return VerificationError(
            report.verdict(),
            hint="a GPU pair whose copies hang will hang a model server the same way: run `fwman doctor` (BAR1, "
            "bridge windows, IOMMU); a longer --timeout tells a slow step from a hung one"
            if hung
            else "a P2P setup that corrupts data must not be used: run `fwman doctor`; check IOMMU (iommu=pt) and "
            "the driver build",
        )


def _soak_text(found: SoakReport) -> Out:
    """Return what the soak watched, its findings, what it could not read, and its verdict."""
    watched = ", ".join(d if d == g else f"{d} (above {g})" for d, g in found.devices) or "no device"
    out: Out = [say(), say(f"soak: {found.rounds} round(s) in {found.seconds:.0f} s of {found.duration:.0f} s; "
                           f"watched {watched}")]  # fmt: skip
    for f in found.findings:
        gpu = f"GPU {f.gpu}: " if f.gpu else "no GPU of this test: "
        out.append(say(f"NEW {gpu}{f.what}" + (f" ({f.count} lines)" if f.count > 1 else ""), "red"))
        if f.evidence:
            out.append(say(f"    {f.evidence}"))
    out += [say(f"not read: {u}", "yellow") for u in found.unread]
    return [*out, say(f"soak verdict: {found.verdict()}", "good" if found.ok else "bad")]


@dataclass
class NcclResult(Result):
    """The NCCL tier's runs: P2P allowed, and the NCCL_P2P_DISABLE=1 control."""

    comparison: NcclComparison

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.p2p-nccl/1`` (without the schema key)."""
        return self.comparison.to_json()

    def text(self, verbose: int = 0) -> Out:
        """Return the runner, NCCL's version and variables, bandwidth, transports, per-size times and verdict."""
        comparison = self.comparison
        report = comparison.p2p
        where = f" inside `{shlex.join(report.prefix)}`" if report.prefix else ""
        out: Out = [say(f"fwman p2p --nccl: {report.runner}{where}")]
        if report.nccl_version:
            out.append(say(f"  NCCL {report.nccl_version}"))
        if report.world is not None:
            out.append(say(f"  ranks: {report.world}"))
        out += [say(f"  {k}={v}") for k, v in sorted(report.environment.items())]
        if report.busbw_gbps is not None:
            out.append(say(f"  bus bandwidth {report.busbw_gbps:.1f} GB/s (algorithm bandwidth "
                           f"{report.algbw_gbps or 0:.1f})"))  # fmt: skip
        transports = report.log.transports()
        if transports:
            out.append(say("  connections by transport (NCCL_DEBUG=INFO):"))
            out += [say(f"    {t:<24} {n}") for t, n in transports.items()]
        out += [say(f"  NCCL WARN {w}", "yellow") for w in report.log.warnings[:5]]
        out += self._sizes()
        if comparison.control is not None:
            out.append(say(f"control (NCCL_P2P_DISABLE=1): {comparison.control.verdict()}"))
        out.append(say(f"advice: {comparison.advice()}"))
        return [*out, say(f"verdict: {report.verdict()}", "good" if comparison.ok else "bad")]

    def _sizes(self) -> Out:
        """Return one row per message size: the P2P run's and the control's time of one all-reduce, the check."""
        comparison = self.comparison
        control = {r.size_bytes: r for r in (comparison.control.sizes if comparison.control else [])}
        rows = []
        for r in comparison.p2p.sizes:
            c = control.get(r.size_bytes)
            rows.append([
                f"{r.size_bytes}", "-" if r.seconds is None else f"{r.seconds * 1e6:.1f}",
                "-" if c is None or c.seconds is None else f"{c.seconds * 1e6:.1f}",
                "-" if r.busbw_gbps is None else f"{r.busbw_gbps:.1f}",
                "exact" if r.wrong == 0 and (c is None or c.wrong == 0) else "WRONG",
            ])  # fmt: skip
        if not rows:
            return []
        return [say("  all-reduce per size (microseconds per all-reduce; P2P allowed vs NCCL_P2P_DISABLE=1):"),
                table(["bytes", "P2P us", "control us", "busbw GB/s", "values"], rows)]  # fmt: skip

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) unless both runs verified and neither hung."""
        comparison = self.comparison
        if comparison.ok:
            return None
        report = comparison.p2p
        failed = report if not report.ok else comparison.control
        blocked = (failed or report).hung is not None
        return VerificationError(
            (failed or report).verdict() + ("" if failed is report else " (in the NCCL_P2P_DISABLE=1 control run)"),
            hint="an NCCL that hangs will hang the model server the same way: run `fwman doctor`; try the run "
            "again with --nccl-env NCCL_P2P_DISABLE=1 to see whether P2P is the cause"
            if blocked
            else "an all-reduce that returns wrong values must not serve a model: run `fwman doctor`",
        )


# -- the command: options in, one tier run, its result (text and JSON) out --------------------------------------
#: the environment variable that names another CUDA driver library (default: libcuda.so.1 from the loader path)
LIBCUDA_VARIABLE = "FWMAN_LIBCUDA"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class P2PRequest:
    """What ``fwman p2p`` was asked (its options, as typed)."""

    size_mb: int = 64
    repeats: int = 5
    warmup: int = 3
    timeout: float = 60.0
    nccl: bool = False
    runner: str = "auto"
    prefix: str = ""
    nccl_env: tuple[str, ...] = ()
    nccl_sizes: str = "4,16M,256M"
    control: bool = True
    soak: str | None = None
    record: bool = True


def soak_seconds(text: str | None, nccl: bool) -> float | None:
    """Return the seconds of ``--soak`` (None without it). Raises UsageError for a bad duration or --nccl."""
    if text is None:
        return None
    if nccl:
        raise UsageError("--soak repeats the copy test; it does not apply to --nccl", hint="drop --nccl or --soak")
    try:
        return parse_duration(text)
    except ParseError as e:
        raise UsageError(e.message, hint="e.g. --soak 60s, --soak 10m, --soak 1h") from e


def message_sizes(text: str) -> list[int]:
    """Return the byte sizes of ``--nccl-sizes`` (``4,16M,256M``). Raises UsageError naming a bad item."""
    out = []
    for item in text.split(","):
        item = item.strip().upper()
        number, unit = (item[:-1], item[-1]) if item[-1:] in _UNITS and item[-1:] else (item, "")
        if not number.isdigit() or int(number) == 0:
            raise UsageError(f"--nccl-sizes wants sizes such as 4,16M,256M, got {item!r}")
        out.append(int(number) * _UNITS[unit])
    return out


def _bus_ids(host: Host) -> list[str]:
    """Return the bus ids of the host's NVIDIA GPUs from sysfs ([] when they cannot be listed)."""
    try:
        return [str(getattr(c, "bus_id", "")) for c in scan_cards(host, use_smi=False)]
    except FwmanError:
        return []


def _record(host: Host, build: Callable[[Fingerprint, str], P2PRecord], tell: Callable[[str], None]) -> None:
    """Append the record ``build(fingerprint, time)`` returns to the P2P history; report so, or why not (the
    fingerprint could not be read, the history not written)."""
    try:
        append_record(host, build(gather(host).fingerprint.get(), now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")))
    except (FwmanError, OSError) as e:
        tell(f"fwman: result not recorded in {HISTORY}: {getattr(e, 'message', e)}")
        return
    tell(f"recorded in {HISTORY} (`fwman doctor` reads it back)")


def p2p_test(
    host: Host,
    request: P2PRequest,
    *,
    replay: bool = False,
    opener: Callable[[str | None], DeviceLayer] | None = None,
    library: str | None = None,
    tell: Callable[[str], None] = lambda _: None,
) -> CopyResult | NcclResult:
    """Run the tier ``request`` asks for (the copy test, ``soak`` repeated under load, or ``nccl``) on the GPUs
    ``opener(library)`` opens (None: libcuda), record it unless asked not to, return it; ``tell`` gets the lines
    said as it goes. Raises UsageError on a ``replay`` or for a bad option, MissingError when no NCCL runner is
    there; a failed copy is in the result (:meth:`CopyResult.failure`)."""
    if replay:
        raise UsageError(
            "fwman p2p copies between this machine's GPUs: --snapshot does not apply",
            hint="run it on the machine itself, without --snapshot",
        )
    seconds = soak_seconds(request.soak, request.nccl)
    if request.nccl:
        return _nccl_tier(host, request, tell)
    open_gpus = opener or open_driver

    def one_round() -> CopyReport:
        # the pairs run one child at a time; the number of GPUs is known only once the first child listed them
        size = request.size_mb * MIB
        return run_isolated_copy_test(
            lambda: open_gpus(library), size, request.repeats, warmup=request.warmup, timeout=request.timeout
        )

    last: list[CopyReport] = []

    def run_round() -> tuple[bool, str, list[str]]:
        last[:] = [one_round()]
        return bool(last[0].ok), str(last[0].verdict()), [g.bus_id for g in last[0].gpus]

    if seconds is None:
        result = CopyResult(one_round())
    else:  # the last round's report is the failing one, if any
        found = run_soak(host, run_round, seconds, tell, [b for b in _bus_ids(host) if b])
        result = CopyResult(last[0], found)
    if request.record:
        copy, found_soak = result.report, result.soak
        _record(host, lambda fp, now: record_from_copy(copy, fp, now, found_soak), tell)
    return result


def _nccl_tier(host: Host, request: P2PRequest, tell: Callable[[str], None]) -> NcclResult:
    """Run the NCCL tier of ``request`` (and its control run) and record a result that says something."""
    env: dict[str, str] = {}
    for item in request.nccl_env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("NCCL_"):
            raise UsageError(f"--nccl-env wants NCCL_NAME=VALUE, got {item!r}")
        env[name] = value
    try:
        argv_prefix = shlex.split(request.prefix)
    except ValueError as e:
        raise UsageError(f"--prefix is not a command line: {e}") from e
    if not env:
        env, where = server_environment(host, argv_prefix)
        if where:
            tell(f"NCCL variables of the model server from {where}: " + " ".join(f"{k}={v}" for k, v in env.items()))
    try:
        comparison = run_nccl_comparison(
            host, control=request.control, prefix=argv_prefix, runner=request.runner, env=env,
            gpus=len(_bus_ids(host)), timeout=request.timeout, sizes=message_sizes(request.nccl_sizes),
        )  # fmt: skip
    except RunnerMissing as e:
        raise MissingError(e.message, hint=e.hint) from e
    tested = comparison.p2p
    if request.record and (tested.wrong is not None or tested.hung):
        _record(host, lambda fp, now: record_from_nccl(tested, fp, now, comparison), tell)
    return NcclResult(comparison)
