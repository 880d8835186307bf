"""The Card model: one NVIDIA GPU as fwman sees it (sysfs first, nvidia-smi for the rest)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LinkState(BaseModel):
    """PCIe link: current and maximum speed (GT/s) and width; downtrained when current < max."""

    model_config = ConfigDict(frozen=True)

    current_speed_gts: float | None = None
    max_speed_gts: float | None = None
    current_width: int | None = None
    max_width: int | None = None

    @property
    def downtrained(self) -> bool | None:
        """Return True when speed or width is below the maximum, None when unknown."""
        pairs = [(self.current_speed_gts, self.max_speed_gts), (self.current_width, self.max_width)]
        known = [(c, m) for c, m in pairs if c is not None and m is not None]
        if not known:
            return None
        return any(c < m for c, m in known)


class Card(BaseModel):
    """One NVIDIA GPU. IDs are lower-case 4-digit hex strings (``"10de"``, ``"2204"``)."""

    model_config = ConfigDict(frozen=True)

    bus_id: str  # sysfs form, e.g. "0000:41:00.0"
    vendor_id: str
    device_id: str
    subsystem_vendor_id: str
    subsystem_device_id: str
    pci_class: str | None = None  # "0x030000"
    name: str | None = None
    vbios_version: str | None = None  # upper-case, as nvidia-smi and nvflash print it: "94.02.26.48.15"
    board_id: str | None = None  # "0x0240" where nvidia-smi or nvflash tells it
    vram_bytes: int | None = None
    bar1_bytes: int | None = None
    rebar_sizes_bytes: list[int] = Field(default_factory=list)  # sizes the card offers for BAR1
    rebar_current_bytes: int | None = None
    link: LinkState = Field(default_factory=LinkState)
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    driver: str | None = None  # bound kernel driver name ("nvidia", "vfio-pci", None)
    driver_version: str | None = None
    driver_flavour: str | None = None  # "open" | "proprietary"
    numa_node: int | None = None
    iommu_group: int | None = None
    uuid: str | None = None
    unreadable: list[str] = Field(default_factory=list)  # what could not be read, for the user

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
