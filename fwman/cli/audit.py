"""``fwman audit``: one table saying which driver version every component is on, and whether they match."""

from __future__ import annotations

import os
from typing import Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app


@click.command()
@click.option(
    "--container-root",
    "container_roots",
    multiple=True,
    metavar="DIR",
    help="Also audit this root filesystem (a mounted image or container rootfs); repeatable. Read only.",
)
@click.option("--offline", is_flag=True, help="Do not list fork branches live: use the cache (its age is shown).")
@click.option("--fork", "fork_specs", multiple=True, metavar="NAME=URL", help="Also look in this fork (repeatable).")
@json_option
@common_options
@pass_app
def audit(
    app: AppContext, container_roots: tuple[str, ...], offline: bool, fork_specs: tuple[str, ...], as_json: bool
) -> None:
    """Say which driver version the kernel module, the host user space and each container are on.

    The kernel module, the user-space libraries (libcuda, libnvidia-ml, ...), nvidia-smi and the GSP firmware
    must carry exactly the same version, on the host and inside every container that uses the GPU. audit reads:

    \b
      - the loaded module (/proc/driver/nvidia/version, /sys/module/nvidia/version): version, open/proprietary
      - for every kernel in /lib/modules, the nvidia*.ko files depmod resolves (search order and
        /etc/depmod.d overrides honoured; .ko.xz/.ko.zst read too): version, vermagic, srcversion, signer,
        and patched/stock from fwman's install manifest ("unknown" without one)
      - the host libraries by file name, nvidia-smi --version, /lib/firmware/nvidia/<ver>; CUDA
        forward-compatibility libraries (/usr/local/cuda-*/compat) are shown as compat, not as the driver
      - Proxmox containers (/etc/pve/lxc/*.conf, rootfs /var/lib/lxc/<id>/rootfs while running) and every
        --container-root DIR, by reading files only
    and whether a P2P fork has a branch for the kernel module's version (fork lists younger than 6 hours come
    from the cache that `fwman driver branches` refreshes; older ones are listed live).

    \b
    Examples:
      fwman audit
      fwman audit --container-root /mnt/image-rootfs --json
      fwman audit --offline                  no network: fork branches from the cache
      fwman --snapshot fixtures/hosts/rig-4x3090 audit

    Exit status: 0 when every component matches, 4 when something does not match or could not be read.
    """
    from fwman.core.config import load_config
    from fwman.core.errors import UsageError, VerificationError
    from fwman.driver.forks import api_base, configured_forks
    from fwman.reports.audit.report import audit_host, p2p_line

    host = app.host
    roots = []
    for given in container_roots:
        # a relative DIR means the current directory on this machine (host paths are absolute)
        path = given if given.startswith("/") else os.path.abspath(given)
        if not host.is_dir(path):
            raise UsageError(f"--container-root {given}: not a directory", hint="give a mounted root filesystem")
        roots.append(path)
    config = load_config(host)
    forks = configured_forks(config, fork_specs)
    # a replay must not reach the network: the forks are looked up in the recorded cache only
    report = audit_host(
        host,
        container_roots=roots,
        forks=forks,
        offline=offline or app.is_replay,
        api=api_base(config, app.env.variables),
    )
    if as_json:
        payload: dict[str, Any] = report.model_dump(mode="json")
        payload["ok"] = report.ok
        payload["counts"] = report.counts()
        app.emit_json("audit", payload)
    else:
        ref = report.reference or "unknown"
        app.echo(f"Reference version: {ref} ({report.reference_source})")
        colour = {"match": "green", "mismatch": "red", "unknown": "yellow", "info": None}
        app.table(
            ["COMPONENT", "VERSION", "STATUS", "WHERE"],
            [
                [
                    r.component,
                    r.version or "-",
                    app.style(r.status, fg=colour[r.status]) if colour[r.status] else r.status,
                    r.where,
                ]
                for r in report.rows
            ],
        )
        details = [r for r in report.rows if (r.detail and r.status != "info") or r.fix]
        if details:
            app.echo()
        for r in details:
            app.echo(f"{r.component}: {r.detail}" if r.detail else f"{r.component}:")
            if r.fix:
                app.echo(f"  fix: {r.fix}")
        app.echo()
        app.echo(p2p_line(report.p2p))
        if report.unreadable and app.verbose:
            app.echo("not readable: " + "; ".join(report.unreadable), err=True)
        counts = report.counts()
        app.echo(
            f"{counts['match']} match, {counts['mismatch']} mismatch, {counts['unknown']} unknown"
            + ("" if report.ok else " -> NOT consistent")
        )
    if not report.ok:
        counts = report.counts()
        raise VerificationError(
            f"audit: {counts['mismatch']} mismatch(es), {counts['unknown']} unknown",
            hint="the lines after the table say what to fix; --json has every detail",
        )
