"""What an upgrade plan is: its cards, images, steps and findings (the ``fwman.upgrade-plan`` JSON)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fwman.core.findings import Finding, blocking
from fwman.firmware.catalog.schema import ImageStatus

#: BAR1 of a card without Resizable BAR (and of one whose firmware setup leaves it off)
LEGACY_BAR1 = 256 * 1024 * 1024

Action = Literal["flash", "keep", "unknown-board", "check"]


class ImageOption(BaseModel):
    """One catalog image as the plan saw it: chosen, or skipped and why."""

    model_config = ConfigDict(frozen=True)

    version: str
    status: ImageStatus
    chosen: bool
    why: str
    rebar: bool | None = None
    power_limit_w: float | None = None


class CardPlan(BaseModel):
    """What happens to one card."""

    model_config = ConfigDict(frozen=True)

    bus_id: str
    name: str | None
    pci_key: str  # 10de:2204:3842:3987
    subsystem: str
    board: str | None  # catalog board name; None when the catalog does not know the card
    dual_firmware_switch: bool | None = None
    current_version: str | None = Field(serialization_alias="vbios_version")  # JSON: docs/json.md
    current_status: str  # catalog status of the running firmware, or "not in catalog" / "unknown"
    bar1_bytes: int | None = None
    max_rebar_bytes: int | None = None
    vram_bytes: int | None = None
    driver_version: str | None = None
    action: Action
    target_version: str | None = None
    reason: str
    options: list[ImageOption] = Field(default_factory=list)
    selected: bool = True  # False: --card left it out

    @property
    def setup_switch_only(self) -> bool:
        """Return True when the firmware offers a BAR1 over 256 MiB but the card runs 256 MiB or less.

        The Resizable BAR switch in the firmware setup is all that is missing (no flash needed for ReBAR).
        """
        return bool(
            self.max_rebar_bytes and self.max_rebar_bytes > LEGACY_BAR1 and (self.bar1_bytes or 0) <= LEGACY_BAR1
        )


class ImageSupply(BaseModel):
    """An image the plan flashes: where it comes from and whether it can be checked."""

    model_config = ConfigDict(frozen=True)

    ref: str  # 3842:3987/94.02.42.80.27
    board_key: str = Field(serialization_alias="pci_key")
    version: str
    status: ImageStatus
    cards: list[str] = Field(serialization_alias="bus_ids")
    cache_path: str
    cached: bool | None  # None: unknown (a snapshot that did not record the cache)
    urls: list[str]
    hash_known: bool
    hash_origin: str  # "catalog", "local override (<source>)", or "" when none
    needs_md5: bool


class PlanStep(BaseModel):
    """One step of the plan, in order. ``by``: ``fwman`` (``upgrade --apply`` does it) or ``you``."""

    model_config = ConfigDict(frozen=True)

    number: int
    id: str
    title: str
    by: Literal["fwman", "you"]
    details: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    cards: list[str] = Field(default_factory=list, serialization_alias="bus_ids")


class UpgradePlan(BaseModel):
    """The whole plan for one host."""

    model_config = ConfigDict(frozen=True)

    host: str
    catalog: dict[str, object]
    cards: list[CardPlan] = Field(serialization_alias="gpus")
    images: list[ImageSupply]
    steps: list[PlanStep]
    findings: list[Finding]

    @property
    def flash_cards(self) -> list[CardPlan]:
        """Return the cards that get a new image."""
        return [c for c in self.cards if c.action == "flash" and c.selected]

    @property
    def blocks(self) -> list[Finding]:
        """Return the findings that stop ``--apply``."""
        return blocking(self.findings)

    @property
    def ready(self) -> bool:
        """Return True when there is something to flash and nothing blocks it."""
        return bool(self.flash_cards) and not self.blocks
