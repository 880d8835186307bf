"""The Card model: one NVIDIA GPU as fwman sees it (sysfs first, nvidia-smi for the rest).

Frozen dataclasses rather than pydantic models: ``fwman scan`` must start fast (bench/startup.py), and loading
pydantic's BaseModel machinery alone costs more than the whole budget. These are built by fwman's own parsers,
not from untrusted input, so there is nothing to validate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fwman.core.jsonout import OMIT, meta


@dataclass(frozen=True)
class LinkState:
    """PCIe link: current and maximum speed (GT/s) and width; downtrained when current < max."""

    current_speed_gts: float | None = None
    max_speed_gts: float | None = None
    current_width: int | None = None
    max_width: int | None = field(default=None, metadata=meta(then=("downtrained",)))

    @property
    def narrow(self) -> bool | None:
        """Return True when the link trained narrower than the card's maximum width, None when either is unknown."""
        if self.current_width is None or self.max_width is None:
            return None
        return self.current_width < self.max_width

    @property
    def slow(self) -> bool | None:
        """Return True when the link runs below the card's maximum speed (GPUs slow an idle link), None when
        either is unknown."""
        if self.current_speed_gts is None or self.max_speed_gts is None:
            return None
        return self.current_speed_gts < self.max_speed_gts

    @property
    def downtrained(self) -> bool | None:
        """Return True when speed or width is below the maximum (:attr:`narrow` or :attr:`slow`), None when
        neither is known."""
        known = [v for v in (self.slow, self.narrow) if v is not None]
        return any(known) if known else None


@dataclass(frozen=True)
class Card:
    """One NVIDIA GPU. IDs are lower-case 4-digit hex strings (``"10de"``, ``"2204"``). Its JSON form
    (``fwman scan --json``, fwman.core.jsonout) is its fields but those marked ``OMIT``, with the derived
    ``bar1_covers_vram`` and ``max_rebar_bytes`` after the fields they come from."""

    bus_id: str  # sysfs form, e.g. "0000:41:00.0"
    vendor_id: str
    device_id: str
    subsystem_vendor_id: str
    subsystem_device_id: str
    pci_class: str | None = field(default=None, metadata=OMIT)  # "0x030000"
    name: str | None = None
    vbios_version: str | None = None  # upper-case, as nvidia-smi and nvflash print it: "94.02.26.48.15"
    # The VBIOS board ID that nvflash checks ("0x0240"): known only from nvflash (or the catalog), never from
    # nvidia-smi, whose <board_id> is the driver's id derived from the PCI location (0x4100 for bus 0x41).
    board_id: str | None = None
    driver_board_id: str | None = None  # nvidia-smi's <board_id>, for display only
    vram_bytes: int | None = None
    bar1_bytes: int | None = field(default=None, metadata=meta(then=("bar1_covers_vram",)))
    # sizes the card offers for BAR1
    rebar_sizes_bytes: list[int] = field(default_factory=list, metadata=meta(then=("max_rebar_bytes",)))
    rebar_current_bytes: int | None = field(default=None, metadata=OMIT)
    link: LinkState = field(default_factory=LinkState)
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    #: nvidia-smi's persistence mode (True: Enabled); None when nvidia-smi did not say
    persistence_mode: bool | None = field(default=None, metadata=OMIT)
    driver: str | None = None  # bound kernel driver name ("nvidia", "vfio-pci", None)
    driver_version: str | None = None
    driver_flavour: str | None = None  # "open" | "proprietary"
    numa_node: int | None = None
    iommu_group: int | None = None
    uuid: str | None = field(default=None, metadata=OMIT)
    #: nvidia-smi's index (``nvidia-smi -i N``); None when nvidia-smi could not be read (the driver unloaded)
    smi_index: int | None = field(default=None, metadata=OMIT)
    unreadable: list[str] = field(default_factory=list)  # what could not be read, for the user

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Card:
        """Return a copy with the fields in ``update`` changed (same call as on the pydantic models)."""
        return dataclasses.replace(self, **(update or {}))

    def model_dump(self) -> dict[str, Any]:
        """Return the card as a plain dict (nested LinkState included)."""
        return dataclasses.asdict(self)

    @property
    def subsystem(self) -> str:
        """Return ``vvvv:dddd`` subsystem ID, the catalog key."""
        return f"{self.subsystem_vendor_id}:{self.subsystem_device_id}"

    @property
    def bar1_covers_vram(self) -> bool | None:
        """Return True when BAR1 is at least the VRAM size, None when either is unknown."""
        if self.bar1_bytes is None or self.vram_bytes is None:
            return None
        return self.bar1_bytes >= self.vram_bytes

    @property
    def max_rebar_bytes(self) -> int | None:
        """Return the largest BAR1 size the card offers, None when unknown."""
        return max(self.rebar_sizes_bytes) if self.rebar_sizes_bytes else None
