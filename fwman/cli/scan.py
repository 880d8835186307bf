"""``fwman scan``: one row per NVIDIA GPU."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish


@click.command()
@leaf_options
def scan(app: AppContext, as_json: bool) -> None:
    """List every NVIDIA GPU: PCI IDs, firmware, BAR1, Resizable BAR, links, power, driver.

    sysfs is the source of truth for PCI facts; nvidia-smi adds name, VBIOS, VRAM and power limits. Without
    nvidia-smi (driver unloaded, as during a flash) the scan still works and says what it could not read.

    \b
    Examples:
      fwman scan
      fwman scan --json | jq '.gpus[] | {bus_id, vbios_version, bar1_bytes}'
      fwman scan --snapshot fixtures/hosts/rig-4x3090

    Exit 5 when the host has no NVIDIA GPU.
    """
    from fwman.app.scan import run_scan

    finish(app, "scan", run_scan(app.host), as_json)
