"""``fwman p2p test``: peer-to-peer copies between every pair of GPUs, bandwidth matrix, every byte compared."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app, timeout_option
from fwman.core.errors import FwmanError, UsageError, VerificationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from fwman.p2p.copytest import CopyReport
    from fwman.p2p.history import Fingerprint, P2PRecord
    from fwman.p2p.nccl import NcclComparison
    from fwman.p2p.soak import SoakReport

#: the environment variable that names another CUDA driver library (default: libcuda.so.1 from the loader path)
LIBCUDA_VARIABLE = "FWMAN_LIBCUDA"


@click.group()
def p2p() -> None:
    """GPU peer-to-peer on this machine's GPUs.

    \b
    Examples:
      fwman p2p test                 64 MiB between every pair of GPUs
      fwman p2p test --size 256      bigger copies: closer to the link's real bandwidth
      fwman p2p test --nccl --prefix 'pct exec 101 --'   does NCCL (in container 101) use P2P?
      fwman p2p test --json
    """


@p2p.command("test")
@click.option(
    "--size",
    "size_mb",
    type=click.IntRange(1, 65536),
    default=64,
    show_default=True,
    metavar="MB",
    help="Bytes per copy, in MiB (2^20 bytes). Each GPU holds two buffers of this size at a time.",
)
@click.option(
    "--repeats",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Timed copies per pair (after the untimed warm-up copies).",
)
@click.option(
    "--warmup",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="Untimed copies per pair before the clock starts: a cold pair measures several times slower.",
)
@timeout_option(
    60,
    "Hard deadline of each step's child process (one GPU pair's copies; one NCCL run): a step that passes it is "
    "killed and reported as BLOCK, naming the pair (or the NCCL rank) and the step that hung",
)
@click.option(
    "--nccl",
    is_flag=True,
    help="Run the NCCL tier instead of the copy test: an NCCL all-reduce across the GPUs (torch.distributed, "
    "or nccl-tests' all_reduce_perf), checked exactly, with NCCL_DEBUG=INFO read for the transport NCCL chose.",
)
@click.option(
    "--runner",
    type=click.Choice(["auto", "torch", "nccl-tests"]),
    default="auto",
    show_default=True,
    help="With --nccl: torch.distributed (one process per GPU, as vLLM runs) or all_reduce_perf; auto tries "
    "torch first.",
)
@click.option(
    "--prefix",
    metavar="CMD",
    default="",
    help="With --nccl: run inside this command, where the model server's NCCL lives "
    "(`pct exec 101 --`, `docker exec NAME`).",
)
@click.option(
    "--nccl-env",
    "nccl_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="With --nccl: an NCCL variable for the run, as the model server will have it (repeatable), "
    "e.g. NCCL_P2P_LEVEL=SYS. Default with `--prefix 'pct exec ID --'`: the NCCL_* lxc.environment lines of "
    "/etc/pve/lxc/ID.conf.",
)
@click.option(
    "--nccl-sizes",
    "nccl_sizes",
    default="4,16M,256M",
    show_default=True,
    metavar="SIZES",
    help="With --nccl (torch runner): the all-reduce message sizes, comma-separated bytes with an optional "
    "K, M or G (2^10, 2^20, 2^30). 4 bytes shows the latency, the large one the bandwidth.",
)
@click.option(
    "--no-control",
    is_flag=True,
    help="With --nccl: skip the control run with NCCL_P2P_DISABLE=1 (then no P2P advice can be derived).",
)
@click.option(
    "--soak",
    "soak_for",
    metavar="DURATION",
    default=None,
    help="Repeat the copy test under load for DURATION (60s, 10m, 1h; 1 s to a day), one progress line per "
    "round on stderr, and compare the kernel log (NVRM Xid, AMD-Vi IO_PAGE_FAULT, DMAR faults) and each GPU's "
    "and its upstream port's PCIe AER counters before and after: anything new fails the test.",
)
@click.option("--no-record", is_flag=True, help="Do not append the result to the P2P history.")
@json_option
@common_options
@pass_app
def test(
    app: AppContext,
    size_mb: int,
    repeats: int,
    warmup: int,
    timeout: float,
    nccl: bool,
    runner: str,
    prefix: str,
    nccl_env: tuple[str, ...],
    nccl_sizes: str,
    no_control: bool,
    soak_for: str | None,
    no_record: bool,
    as_json: bool,
) -> None:
    """Copy a buffer between every ordered pair of GPUs (and each GPU with itself), compare every byte.

    Uses the CUDA driver API (libcuda.so.1, through ctypes): peer access is enabled where
    cuDeviceCanAccessPeer allows it, then cuMemcpyPeer copies a pseudo-random pattern (cuMemcpyDtoD on one GPU);
    the target buffer is read back and compared byte by byte, after --warmup untimed copies. Then the latency:
    100 synchronous 4-byte copies, checked too. Every pair runs in its own child process under --timeout: a
    pair that hangs is killed and reported as BLOCK with the step it hung in, and the other pairs still run.
    The matrix shows GB/s (10^9 bytes/s, rows: from, columns: to); `*` marks a pair without direct peer access
    (the driver staged the copy through host memory); BAD a pair that corrupted data; HUNG a pair killed at
    its deadline; ERR a pair where a CUDA call failed.

    With --nccl, the second tier: an NCCL all-reduce across the GPUs, where the model server's NCCL lives
    (--prefix), every value of the sum compared exactly, and NCCL_DEBUG=INFO read for the transport of each
    connection (P2P/CUMEM, P2P/IPC: direct; SHM: staged through host memory; NET: the network stack).

    Each run is appended to /var/lib/fwman/p2p-history.jsonl with a fingerprint of the configuration it
    tested (kernel, loaded module version and srcversion, fwman's build manifest, user-space version, each
    card's VBIOS and BAR1, IOMMU mode, GPU set): `fwman doctor` says whether P2P was verified on the
    configuration it finds. --no-record skips that.

    Read-only with respect to the GPUs' settings: it allocates, copies and frees memory, nothing else. It needs
    this machine's GPUs: --snapshot does not apply (--root DIR: the fingerprint is read and the record written
    under DIR). FWMAN_LIBCUDA names another libcuda.so.1.

    \b
    Examples:
      fwman p2p test
      fwman p2p test --size 256 --repeats 10
      fwman p2p test --json > p2p.json
      fwman p2p test --nccl
      fwman p2p test --nccl --prefix 'pct exec 101 --' --nccl-env NCCL_P2P_LEVEL=SYS

    \b
    Exit status: 0 every byte (every value) verified; 4 a copy corrupted data, hung (BLOCK), a CUDA call
    failed, or the all-reduce was wrong or hung; 5 no libcuda, no GPU or no NCCL runner.
    """
    if app.snapshot:
        raise UsageError(
            "fwman p2p test copies between this machine's GPUs: --snapshot does not apply",
            hint="run it on the machine itself, without --snapshot",
        )
    soak_seconds = _soak_seconds(soak_for, nccl)
    if nccl:
        _nccl_tier(app, runner, prefix, nccl_env, no_record, as_json, timeout, not no_control, _sizes(nccl_sizes))
        return
    from fwman.p2p.copytest import MIB, run_isolated_copy_test
    from fwman.p2p.cuda import open_driver

    opener = app.env.cuda_driver or open_driver
    library = app.env.variables.get(LIBCUDA_VARIABLE) or None

    # the pairs run one child at a time; the number of GPUs is known only once the first child has listed them
    def one_round() -> CopyReport:
        return run_isolated_copy_test(lambda: opener(library), size_mb * MIB, repeats, warmup=warmup, timeout=timeout)

    soak = None
    if soak_seconds is None:
        report = one_round()
    else:
        report, soak = _soak(app, one_round, soak_seconds)

    if not no_record:
        from fwman.p2p.record import record_from_copy

        _record(app, lambda fp, now: record_from_copy(report, fp, now, soak))
    show(app, report, as_json, soak)


def _soak_seconds(text: str | None, nccl: bool) -> float | None:
    """Return the seconds of ``--soak`` (None without it). Raises UsageError for a bad duration or --nccl."""
    if text is None:
        return None
    if nccl:
        raise UsageError("--soak repeats the copy test; it does not apply to --nccl", hint="drop --nccl or --soak")
    from fwman.core.errors import ParseError
    from fwman.p2p.soak import parse_duration

    try:
        return parse_duration(text)
    except ParseError as e:
        raise UsageError(e.message, hint="e.g. --soak 60s, --soak 10m, --soak 1h") from e


def _soak(app: AppContext, one_round: Callable[[], CopyReport], seconds: float) -> tuple[CopyReport, SoakReport]:
    """Run the copy test over and over for ``seconds`` (``fwman.app.p2p.soak``); return the last round's report
    (the failing one, if any) and the soak's."""
    from fwman.app.p2p import soak

    last: list[CopyReport] = []

    def run_round() -> tuple[bool, str, list[str]]:
        report = one_round()
        last[:] = [report]
        return bool(report.ok), str(report.verdict()), [g.bus_id for g in report.gpus]

    try:
        bus_ids = [str(getattr(c, "bus_id", "")) for c in _cards(app)]
    except FwmanError:
        bus_ids = []
    result = soak(app.host, run_round, seconds, lambda line: app.echo(line, err=True), [b for b in bus_ids if b])
    return last[0], result


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _sizes(text: str) -> list[int]:
    """Return the byte sizes of ``--nccl-sizes`` (``4,16M,256M``). Raises UsageError naming a bad item."""
    out = []
    for item in text.split(","):
        item = item.strip().upper()
        number, unit = (item[:-1], item[-1]) if item[-1:] in _UNITS and item[-1:] else (item, "")
        if not number.isdigit() or int(number) == 0:
            raise UsageError(f"--nccl-sizes wants sizes such as 4,16M,256M, got {item!r}")
        out.append(int(number) * _UNITS[unit])
    return out


def _now() -> str:
    from fwman.core.clock import now_utc

    return now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(app: AppContext, build: Callable[[Fingerprint, str], P2PRecord]) -> None:
    """Append the record ``build(fingerprint, time)`` returns to the P2P history; say so (or why not) on stderr."""
    from fwman.app.p2p import HISTORY, record_result

    try:
        record_result(app.host, build, _now())
    except (FwmanError, OSError) as e:
        app.echo(f"fwman: result not recorded in {HISTORY}: {getattr(e, 'message', e)}", err=True)
        return
    app.echo(f"recorded in {HISTORY} (`fwman doctor` reads it back)", err=True)


def _nccl_tier(
    app: AppContext,
    runner: str,
    prefix: str,
    nccl_env: tuple[str, ...],
    no_record: bool,
    as_json: bool,
    timeout: float,
    control: bool,
    sizes: list[int],
) -> None:
    from fwman.p2p.nccl import RunnerMissing, run_nccl_comparison

    env: dict[str, str] = {}
    for item in nccl_env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("NCCL_"):
            raise UsageError(f"--nccl-env wants NCCL_NAME=VALUE, got {item!r}")
        env[name] = value
    try:
        argv_prefix = shlex.split(prefix)
    except ValueError as e:
        raise UsageError(f"--prefix is not a command line: {e}") from e
    if not env:
        from fwman.app.p2p import server_environment

        env, where = server_environment(app.host, argv_prefix)
        if where:
            app.echo(f"NCCL variables of the model server from {where}: "
                     + " ".join(f"{k}={v}" for k, v in env.items()), err=True)  # fmt: skip
    try:
        gpus = len(_cards(app))
    except FwmanError:
        gpus = 0
    try:
        comparison = run_nccl_comparison(
            app.host,
            control=control,
            prefix=argv_prefix,
            runner=runner,
            env=env,
            gpus=gpus,
            timeout=timeout,
            sizes=sizes,
        )
    except RunnerMissing as e:
        from fwman.core.errors import MissingError

        raise MissingError(e.message, hint=e.hint) from e
    report = comparison.p2p
    if not no_record and (report.wrong is not None or report.hung):
        from fwman.p2p.record import record_from_nccl

        _record(app, lambda fp, now: record_from_nccl(report, fp, now, comparison))
    show_nccl(app, comparison, as_json)


def _cards(app: AppContext) -> list[object]:
    from fwman.gpu.inventory import scan_cards

    return list(scan_cards(app.host, use_smi=False))


def show_nccl(app: AppContext, comparison: NcclComparison, as_json: bool) -> None:
    """Print the NCCL tier's runs (P2P allowed, and the control). Raises VerificationError (exit 4) unless both
    verified and neither hung."""
    report = comparison.p2p
    if as_json:
        app.emit_json("p2p-nccl", comparison.to_json())
    else:
        where = f" inside `{shlex.join(report.prefix)}`" if report.prefix else ""
        app.echo(f"fwman p2p test --nccl: {report.runner}{where}")
        if report.nccl_version:
            app.echo(f"  NCCL {report.nccl_version}")
        if report.world is not None:
            app.echo(f"  ranks: {report.world}")
        for k, v in sorted(report.environment.items()):
            app.echo(f"  {k}={v}")
        if report.busbw_gbps is not None:
            app.echo(f"  bus bandwidth {report.busbw_gbps:.1f} GB/s (algorithm bandwidth {report.algbw_gbps or 0:.1f})")
        transports = report.log.transports()
        if transports:
            app.echo("  connections by transport (NCCL_DEBUG=INFO):")
            for t, n in transports.items():
                app.echo(f"    {t:<24} {n}")
        for w in report.log.warnings[:5]:
            app.echo(app.style(f"  NCCL WARN {w}", fg="yellow"))
        _sizes_table(app, comparison)
        if comparison.control is not None:
            app.echo(f"control (NCCL_P2P_DISABLE=1): {comparison.control.verdict()}")
        app.echo(f"advice: {comparison.advice()}")
        app.echo(app.style(f"verdict: {report.verdict()}", bold=True, fg="green" if comparison.ok else "red"))
    if not comparison.ok:
        failed = report if not report.ok else comparison.control
        blocked = (failed or report).hung is not None
        raise VerificationError(
            (failed or report).verdict() + ("" if failed is report else " (in the NCCL_P2P_DISABLE=1 control run)"),
            hint="an NCCL that hangs will hang the model server the same way: run `fwman doctor`; try the run "
            "again with --nccl-env NCCL_P2P_DISABLE=1 to see whether P2P is the cause"
            if blocked
            else "an all-reduce that returns wrong values must not serve a model: run `fwman doctor`",
        )


def _sizes_table(app: AppContext, comparison: NcclComparison) -> None:
    """Print one row per message size: the P2P run's and the control's time of one all-reduce, and the check."""
    rows = []
    control = {r.size_bytes: r for r in (comparison.control.sizes if comparison.control else [])}
    for r in comparison.p2p.sizes:
        c = control.get(r.size_bytes)
        rows.append(
            [
                f"{r.size_bytes}",
                "-" if r.seconds is None else f"{r.seconds * 1e6:.1f}",
                "-" if c is None or c.seconds is None else f"{c.seconds * 1e6:.1f}",
                "-" if r.busbw_gbps is None else f"{r.busbw_gbps:.1f}",
                "exact" if r.wrong == 0 and (c is None or c.wrong == 0) else "WRONG",
            ]
        )
    if rows:
        app.echo("  all-reduce per size (microseconds per all-reduce; P2P allowed vs NCCL_P2P_DISABLE=1):")
        app.table(["bytes", "P2P us", "control us", "busbw GB/s", "values"], rows)


def show(app: AppContext, report: CopyReport, as_json: bool, soak: SoakReport | None = None) -> None:
    """Print ``report`` (text or JSON) and the soak's findings. Raises VerificationError (exit 4) unless every
    copy ran and verified and the soak (if any) found nothing new."""
    if as_json:
        doc = report.to_json()
        if soak is not None:
            doc["soak"] = soak.to_json()
        app.emit_json("p2p-test", doc)
    else:
        _render(app, report)
        if soak is not None:
            _render_soak(app, soak)
    if report.ok and soak is not None and not soak.ok:
        raise VerificationError(
            soak.verdict(),
            hint="errors that appear only under sustained P2P load: run `fwman doctor` (IOMMU mode, bridge "
            "windows, driver settings); an IOMMU fault under P2P usually means iommu=pt is missing",
        )
    if not report.ok:
        hung = bool(report.hung or report.blocked)
        raise VerificationError(
            report.verdict(),
            hint="a GPU pair whose copies hang will hang a model server the same way: run `fwman doctor` (BAR1, "
            "bridge windows, IOMMU); a longer --timeout tells a slow step from a hung one"
            if hung
            else "a P2P setup that corrupts data must not be used: run `fwman doctor`; check IOMMU (iommu=pt) and "
            "the driver build",
        )


def _render_soak(app: AppContext, soak: SoakReport) -> None:
    """Print what the soak watched, its findings, what it could not read, and its verdict."""
    app.echo()
    watched = ", ".join(d if d == g else f"{d} (above {g})" for d, g in soak.devices) or "no device"
    app.echo(f"soak: {soak.rounds} round(s) in {soak.seconds:.0f} s of {soak.duration:.0f} s; watched {watched}")
    for f in soak.findings:
        gpu = f"GPU {f.gpu}: " if f.gpu else "no GPU of this test: "
        times = f" ({f.count} lines)" if f.count > 1 else ""
        app.echo(app.style(f"NEW {gpu}{f.what}{times}", fg="red"))
        if f.evidence:
            app.echo(f"    {f.evidence}")
    for u in soak.unread:
        app.echo(app.style(f"not read: {u}", fg="yellow"))
    app.echo(app.style(f"soak verdict: {soak.verdict()}", bold=True, fg="green" if soak.ok else "red"))


def _render(app: AppContext, report: CopyReport) -> None:
    from fwman.p2p.copytest import MIB

    n = len(report.gpus)
    cuda = f", CUDA driver API {report.driver_version}" if report.driver_version else ""
    warm = report.pairs[0].warmup if report.pairs else 0
    deadline = f", {report.timeout:g} s deadline per pair" if report.timeout else ""
    app.echo(
        f"fwman p2p test: {n} GPU{'s' if n != 1 else ''}, {report.size_bytes // MIB} MiB per copy, "
        f"{warm} warm-up and {report.repeats} timed cop{'ies' if report.repeats != 1 else 'y'} per pair"
        f"{deadline}{cuda}"
    )
    for g in report.gpus:
        app.echo(f"  GPU{g.index}  {g.bus_id}  {g.name}")
    app.echo()
    app.echo("GB/s (row: from, column: to; * = no direct peer access, staged through host memory)")
    names = [f"GPU{g.index}" for g in report.gpus]
    app.table(["", *names], [[names[i], *row] for i, row in enumerate(report.matrix())])
    if any(p.latency_us is not None for p in report.pairs):
        from fwman.p2p.copytest import LATENCY_BYTES, LATENCY_REPEATS

        app.echo()
        app.echo(f"latency, microseconds (one synchronous {LATENCY_BYTES}-byte copy, mean of {LATENCY_REPEATS})")
        app.table(["", *names], [[names[i], *row] for i, row in enumerate(report.latency_matrix())])
    app.echo()
    peers = [p for p in report.pairs if p.src != p.dst]
    if peers:
        direct = sum(1 for p in peers if p.direct)
        app.echo(f"peer access: direct for {direct} of {len(peers)} GPU pairs (cuDeviceCanAccessPeer)")
    else:
        app.echo("peer access: one GPU, no pair of GPUs to copy between (the on-device copy was tested)")
    for p in report.corrupted:
        app.echo(
            app.style(
                f"CORRUPTED {p.label}: {p.corrupted_bytes} of {p.size_bytes} bytes wrong, first at offset "
                f"0x{p.first_bad_offset or 0:x}",
                fg="red",
            )
        )
    for p in report.blocked:
        app.echo(app.style(f"BLOCK {p.label}: {p.error}", fg="red"))
    for p in report.failed:
        app.echo(app.style(f"FAILED {p.label}: {p.error}", fg="red"))
    if report.hung:
        app.echo(app.style(f"BLOCK {report.hung}", fg="red"))
    app.echo(app.style(f"verdict: {report.verdict()}", bold=True, fg="green" if report.ok else "red"))
