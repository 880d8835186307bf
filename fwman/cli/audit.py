"""``fwman audit``: one table saying which driver version every component is on, and whether they match."""

from __future__ import annotations

import click

from fwman.cli.context import FORK_FORMS, AppContext, leaf_options
from fwman.cli.render import finish


@click.command()
@click.option(
    "--container-root",
    "container_roots",
    multiple=True,
    metavar="DIR",
    help="Also audit this root filesystem (a mounted image or container rootfs); repeatable. Read only.",
)
@click.option("--offline", is_flag=True, help="Do not list fork branches live: use the cache (its age is shown).")
@click.option(
    "--fork", "fork_specs", multiple=True, metavar="FORK", help=f"Also look in this fork (repeatable): {FORK_FORMS}."
)
@leaf_options
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
      - Docker and Podman containers, running or stopped (`ps -a` and `inspect`; their layers on disk, never
        started): how each gets the GPU (nvidia runtime, --gpus, CDI device, /dev/nvidia*), the libraries it
        sees, CUDA compat libraries, its NCCL and P2P environment; one row each, with the fix
      - CDI specs (/etc/cdi, /var/run/cdi): each library and device path against the driver; a stale spec's
        fix is `nvidia-ctk cdi generate --output=<spec>`
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
    from fwman.app.audit import AuditRequest, audit

    request = AuditRequest(container_roots, fork_specs, offline)
    finish(app, "audit", audit(app.host, request, app.env.variables, replay=app.is_replay), as_json)
