"""``fwman scan``: one row per NVIDIA GPU."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.units import human_bytes
from fwman.gpu.card import Card


def _opt(value: object, fmt: str = "{}") -> str:
    return "?" if value is None else fmt.format(value)


def _link(card: Card) -> str:
    ln = card.link
    text = (
        f"Gen{_gen(ln.current_speed_gts)} x{_opt(ln.current_width)}/Gen{_gen(ln.max_speed_gts)} x{_opt(ln.max_width)}"
    )
    return text + (" DOWNTRAINED" if ln.downtrained else "")


def _gen(speed: float | None) -> str:
    return {2.5: "1", 5.0: "2", 8.0: "3", 16.0: "4", 32.0: "5", 64.0: "6"}.get(speed or 0.0, "?")


def _bar1(card: Card) -> str:
    size = human_bytes(card.bar1_bytes)
    covers = card.bar1_covers_vram
    return f"{size} ({'covers VRAM' if covers else 'small' if covers is False else '?'})"


def _rebar(card: Card) -> str:
    if card.rebar_sizes_bytes:
        return f"up to {human_bytes(card.max_rebar_bytes)}"
    if any(u.startswith("extended config space") for u in card.unreadable):
        return "? (needs root)"
    return "none"


@click.command()
@json_option
@common_options
@pass_app
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

    result = run_scan(app.host)
    cards, smi_problem = result.cards, result.smi_problem
    if as_json:
        app.emit_json("scan", result.to_json())
        return
    rows = []
    for c in cards:
        rows.append(
            [
                c.bus_id.removeprefix("0000:"),
                f"{c.vendor_id}:{c.device_id}",
                c.subsystem,
                (c.name or "?").removeprefix("NVIDIA ").removeprefix("GeForce "),
                _opt(c.vbios_version),
                human_bytes(c.vram_bytes),
                _bar1(c),
                _rebar(c),
                _link(c),
                f"{_opt(c.power_limit_w, '{:.0f}')}/{_opt(c.default_power_limit_w, '{:.0f}')} W",
                f"{_opt(c.numa_node)}/{_opt(c.iommu_group)}",
            ]
        )
    app.table(
        [
            "BUS",
            "ID",
            "SUBSYSTEM",
            "NAME",
            "VBIOS",
            "VRAM",
            "BAR1",
            "REBAR OFFERED",
            "LINK (now/max)",
            "POWER",
            "NUMA/IOMMU",
        ],
        rows,
    )
    flavours = {(c.driver_version, c.driver_flavour) for c in cards}
    for version, flavour in sorted(flavours, key=str):
        app.echo(f"driver: {_opt(version)} ({flavour or 'unknown flavour'})")
    boards = {c.board_id for c in cards if c.board_id}
    if boards:
        app.echo(
            "board ids (nvidia-smi): " + ", ".join(f"{c.bus_id.removeprefix('0000:')}={c.board_id}" for c in cards)
        )
    if smi_problem:
        app.echo(app.style(f"note: {smi_problem}: name, VRAM, power limits unknown", fg="yellow"))
    for c in cards:
        if c.link.downtrained:
            app.echo(app.style(f"warning: {c.bus_id} link trained below its maximum ({_link(c)})", fg="yellow"))
    if any("extended config space" in u for c in cards for u in c.unreadable):
        app.echo("note: run as root to read the Resizable BAR sizes the cards offer (extended config space)")
