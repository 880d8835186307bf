"""``fwman scan`` as a use case: the host in, a :class:`ScanResult` (the cards and its JSON form) out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.app.text import Out, Result, say, table
from fwman.core.jsonout import encode
from fwman.core.units import human_bytes
from fwman.gpu.card import Card
from fwman.gpu.inventory import require_inventory
from fwman.host.base import Host


@dataclass(frozen=True)
class ScanResult(Result):
    """Every NVIDIA GPU of one host, and why nvidia-smi could not be used (None when it could)."""

    host: str
    cards: list[Card]
    smi_problem: str | None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman scan --json`` (schema fwman.scan/2)."""
        return {"host": self.host, "nvidia_smi": self.smi_problem or "ok", "gpus": encode(self.cards)}

    def text(self, verbose: int = 0) -> Out:
        """Return one row per GPU, the driver, the board ids, and what could not be read."""
        cards = self.cards
        headers = ["BUS", "ID", "SUBSYSTEM", "NAME", "VBIOS", "VRAM", "BAR1", "REBAR OFFERED", "LINK (now/max)",
                   "POWER", "NUMA/IOMMU"]  # fmt: skip
        rows = [
            [c.bus_id.removeprefix("0000:"), f"{c.vendor_id}:{c.device_id}", c.subsystem,
             (c.name or "?").removeprefix("NVIDIA ").removeprefix("GeForce "), _opt(c.vbios_version),
             human_bytes(c.vram_bytes), _bar1(c), _rebar(c), _link(c),
             f"{_opt(c.power_limit_w, '{:.0f}')}/{_opt(c.default_power_limit_w, '{:.0f}')} W",
             f"{_opt(c.numa_node)}/{_opt(c.iommu_group)}"]
            for c in cards
        ]  # fmt: skip
        out: Out = [table(headers, rows)]
        flavours = {(c.driver_version, c.driver_flavour) for c in cards}
        out += [say(f"driver: {_opt(v)} ({f or 'unknown flavour'})") for v, f in sorted(flavours, key=str)]
        if any(c.board_id for c in cards):
            ids = ", ".join(f"{c.bus_id.removeprefix('0000:')}={c.board_id}" for c in cards)
            out.append(say(f"board ids (nvidia-smi): {ids}"))
        if self.smi_problem:
            out.append(say(f"note: {self.smi_problem}: name, VRAM, power limits unknown", "yellow"))
        out += [say(f"warning: {c.bus_id} link trained below its maximum ({_link(c)})", "yellow")
                for c in cards if c.link.downtrained]  # fmt: skip
        if any("extended config space" in u for c in cards for u in c.unreadable):
            out.append(say("note: run as root to read the Resizable BAR sizes the cards offer (extended config space)"))
        return out


def _opt(value: object, fmt: str = "{}") -> str:
    return "?" if value is None else fmt.format(value)


def _gen(speed: float | None) -> str:
    return {2.5: "1", 5.0: "2", 8.0: "3", 16.0: "4", 32.0: "5", 64.0: "6"}.get(speed or 0.0, "?")


def _link(card: Card) -> str:
    ln = card.link
    now = f"Gen{_gen(ln.current_speed_gts)} x{_opt(ln.current_width)}"
    text = f"{now}/Gen{_gen(ln.max_speed_gts)} x{_opt(ln.max_width)}"
    return text + (" DOWNTRAINED" if ln.downtrained else "")


def _bar1(card: Card) -> str:
    covers = card.bar1_covers_vram
    return f"{human_bytes(card.bar1_bytes)} ({'covers VRAM' if covers else 'small' if covers is False else '?'})"


def _rebar(card: Card) -> str:
    if card.rebar_sizes_bytes:
        return f"up to {human_bytes(card.max_rebar_bytes)}"
    if any(u.startswith("extended config space") for u in card.unreadable):
        return "? (needs root)"
    return "none"


def run_scan(host: Host) -> ScanResult:
    """Return the GPUs of ``host``. Raises MissingError when there is none (exit 5), ParseError for bad sysfs IDs."""
    inventory = require_inventory(host)
    return ScanResult(host.description, inventory.cards, inventory.smi_problem)
