"""``fwman p2p test``: peer-to-peer copies between every pair of GPUs, bandwidth matrix, every byte compared."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.errors import UsageError, VerificationError

if TYPE_CHECKING:
    from fwman.p2p.copytest import CopyReport

#: the environment variable that names another CUDA driver library (default: libcuda.so.1 from the loader path)
LIBCUDA_VARIABLE = "FWMAN_LIBCUDA"


@click.group()
def p2p() -> None:
    """GPU peer-to-peer on this machine's GPUs.

    \b
    Examples:
      fwman p2p test                 64 MiB between every pair of GPUs
      fwman p2p test --size 256      bigger copies: closer to the link's real bandwidth
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
    help="Timed copies per pair (after one untimed warm-up copy).",
)
@json_option
@common_options
@pass_app
def test(app: AppContext, size_mb: int, repeats: int, as_json: bool) -> None:
    """Copy a buffer between every ordered pair of GPUs (and each GPU with itself), compare every byte.

    Uses the CUDA driver API (libcuda.so.1, through ctypes): peer access is enabled where
    cuDeviceCanAccessPeer allows it, then cuMemcpyPeer copies a pseudo-random pattern (cuMemcpyDtoD on one GPU);
    the target buffer is read back and compared byte by byte. The matrix shows GB/s (10^9 bytes/s, rows: from,
    columns: to); `*` marks a pair without direct peer access (the driver staged the copy through host
    memory); BAD a pair that corrupted data; ERR a pair where a CUDA call failed.

    Read-only with respect to the GPUs' settings: it allocates, copies and frees memory, nothing else. It needs
    this machine's GPUs: --snapshot and --root do not apply. FWMAN_LIBCUDA names another libcuda.so.1.

    \b
    Examples:
      fwman p2p test
      fwman p2p test --size 256 --repeats 10
      fwman p2p test --json > p2p.json

    \b
    Exit status: 0 every byte verified; 4 a copy corrupted data or a CUDA call failed; 5 no libcuda or no GPU.
    """
    from fwman.p2p.copytest import MIB, run_copy_test
    from fwman.p2p.cuda import open_driver

    if app.snapshot or app.root:
        raise UsageError(
            "fwman p2p test copies between this machine's GPUs: --snapshot and --root do not apply",
            hint="run it on the machine itself, without --snapshot/--root",
        )
    layer = open_driver(app.env.variables.get(LIBCUDA_VARIABLE) or None)
    try:
        gpus = layer.gpus()
        with app.progress("P2P copies", len(gpus) ** 2) as advance:
            report = run_copy_test(layer, size_mb * MIB, repeats, progress=advance)
    finally:
        layer.close()

    show(app, report, as_json)


def show(app: AppContext, report: CopyReport, as_json: bool) -> None:
    """Print ``report`` (text or JSON). Raises VerificationError (exit 4) unless every copy ran and verified."""
    if as_json:
        app.emit_json("p2p-test", report.to_json())
    else:
        _render(app, report)
    if not report.ok:
        raise VerificationError(
            report.verdict(),
            hint="a P2P setup that corrupts data must not be used: run `fwman doctor`; check IOMMU (iommu=pt) and "
            "the driver build",
        )


def _render(app: AppContext, report: CopyReport) -> None:
    from fwman.p2p.copytest import MIB

    n = len(report.gpus)
    cuda = f", CUDA driver API {report.driver_version}" if report.driver_version else ""
    app.echo(
        f"fwman p2p test: {n} GPU{'s' if n != 1 else ''}, {report.size_bytes // MIB} MiB per copy, "
        f"{report.repeats} timed cop{'ies' if report.repeats != 1 else 'y'} per pair{cuda}"
    )
    for g in report.gpus:
        app.echo(f"  GPU{g.index}  {g.bus_id}  {g.name}")
    app.echo()
    app.echo("GB/s (row: from, column: to; * = no direct peer access, staged through host memory)")
    names = [f"GPU{g.index}" for g in report.gpus]
    app.table(["", *names], [[names[i], *row] for i, row in enumerate(report.matrix())])
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
    for p in report.failed:
        app.echo(app.style(f"FAILED {p.label}: {p.error}", fg="red"))
    app.echo(app.style(f"verdict: {report.verdict()}", bold=True, fg="green" if report.ok else "red"))
