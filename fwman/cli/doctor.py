"""``fwman doctor``: what still blocks GPU peer-to-peer on this host, in the order of the chain."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


@click.command()
@click.option(
    "--env-file",
    "env_files",
    multiple=True,
    metavar="FILE",
    help="An environment file your GPU workload uses (docker/compose .env, KEY=VALUE lines). Repeatable.",
)
@click.option(
    "--unit",
    "unit_files",
    multiple=True,
    metavar="FILE",
    help="A systemd unit (or drop-in) that runs your GPU workload: Environment=, EnvironmentFile=, ExecStart=.",
)
@leaf_options
def doctor(app: AppContext, env_files: tuple[str, ...], unit_files: tuple[str, ...], as_json: bool) -> None:
    """Walk the chain that blocks GPU peer-to-peer and say what to fix first.

    In order: firmware offers a large BAR1 (else the catalog's upgrade); BAR1 covers VRAM (else the
    firmware-setup settings); the driver is the P2P fork at the user space's version; `nvidia-smi topo -p2p r`
    reads OK rather than CNS; the IOMMU is not translating (and, before `iommu=pt`, what isolation VMs lose);
    NCCL_P2P_LEVEL where GPUs meet at the CPU; vLLM's custom all-reduce; PCIe links; power limits. Each finding
    comes with its evidence (-v) and its fix. The last line is the verdict: ready, or the first blocker.

    NCCL and vLLM settings are read from the Proxmox container configs in /etc/pve/lxc, /etc/nccl.conf, and the
    files you name with --env-file and --unit.

    \b
    Examples:
      fwman doctor
      fwman doctor --env-file /srv/vllm/.env --unit /etc/systemd/system/vllm.service
      fwman doctor --snapshot fixtures/hosts/rig-4x3090 -v
      fwman doctor --json | jq .verdict

    \b
    Exit status: 0 ready (nothing blocks P2P; warnings may remain), 4 a blocker exists (the verdict names the
    first), 5 no NVIDIA GPU.
    """
    from fwman.app.doctor import DoctorRequest, doctor

    finish(app, "doctor", doctor(app.host, DoctorRequest(env_files, unit_files)), as_json)
