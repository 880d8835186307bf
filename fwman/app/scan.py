"""``fwman scan`` as a use case: the host in, a :class:`ScanResult` (the cards and its JSON form) out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.gpu.card import Card
from fwman.gpu.inventory import require_inventory
from fwman.host.base import Host


@dataclass(frozen=True)
class ScanResult:
    """Every NVIDIA GPU of one host, and why nvidia-smi could not be used (None when it could)."""

    host: str
    cards: list[Card]
    smi_problem: str | None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman scan --json`` (schema fwman.scan/1)."""
        return {"host": self.host, "nvidia_smi": self.smi_problem or "ok", "gpus": [card_json(c) for c in self.cards]}


def run_scan(host: Host) -> ScanResult:
    """Return the GPUs of ``host``. Raises MissingError when there is none (exit 5), ParseError for bad sysfs IDs."""
    inventory = require_inventory(host)
    return ScanResult(host.description, inventory.cards, inventory.smi_problem)


def card_json(card: Card) -> dict[str, Any]:
    """Return the stable JSON form of a card (schema fwman.scan/1)."""
    return {
        "bus_id": card.bus_id,
        "vendor_id": card.vendor_id,
        "device_id": card.device_id,
        "subsystem_vendor_id": card.subsystem_vendor_id,
        "subsystem_device_id": card.subsystem_device_id,
        "name": card.name,
        "vbios_version": card.vbios_version,
        "board_id": card.board_id,
        "driver_board_id": card.driver_board_id,
        "vram_bytes": card.vram_bytes,
        "bar1_bytes": card.bar1_bytes,
        "bar1_covers_vram": card.bar1_covers_vram,
        "rebar_sizes_bytes": card.rebar_sizes_bytes,
        "rebar_max_bytes": card.max_rebar_bytes,
        "link": {
            "current_speed_gts": card.link.current_speed_gts,
            "max_speed_gts": card.link.max_speed_gts,
            "current_width": card.link.current_width,
            "max_width": card.link.max_width,
            "downtrained": card.link.downtrained,
        },
        "power_limit_w": card.power_limit_w,
        "default_power_limit_w": card.default_power_limit_w,
        "driver": card.driver,
        "driver_version": card.driver_version,
        "driver_flavour": card.driver_flavour,
        "numa_node": card.numa_node,
        "iommu_group": card.iommu_group,
        "unreadable": card.unreadable,
    }
