"""``fwman p2p``: peer-to-peer copies between every pair of GPUs, bandwidth matrix, every byte compared."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options, timeout_option
from fwman.cli.render import finish


@click.command()
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
@leaf_options
def p2p(
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
      fwman p2p
      fwman p2p --size 256 --repeats 10
      fwman p2p --json > p2p.json
      fwman p2p --nccl
      fwman p2p --nccl --prefix 'pct exec 101 --' --nccl-env NCCL_P2P_LEVEL=SYS

    \b
    Exit status: 0 every byte (every value) verified; 4 a copy corrupted data, hung (BLOCK), a CUDA call
    failed, or the all-reduce was wrong or hung; 5 no libcuda, no GPU or no NCCL runner.
    """
    from fwman.app.p2p import LIBCUDA_VARIABLE, P2PRequest, p2p_test

    request = P2PRequest(size_mb, repeats, warmup, timeout, nccl, runner, prefix, nccl_env, nccl_sizes,
                         not no_control, soak_for, not no_record)  # fmt: skip
    library = app.env.variables.get(LIBCUDA_VARIABLE) or None
    result = p2p_test(app.host, request, replay=app.is_replay, opener=app.env.cuda_driver, library=library,
                      tell=lambda t: app.echo(t, err=True))  # fmt: skip
    finish(app, "p2p-nccl" if nccl else "p2p-test", result, as_json)
