"""The one --json encoder: dataclasses field by field with their metadata, pydantic, enums, containers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel

from fwman.app.text import Result
from fwman.core.jsonout import OMIT, encode, fields_of, meta
from fwman.gpu.card import Card, LinkState


class Colour(Enum):
    RED = "red"


class Model(BaseModel):
    colour: Colour
    n: int = 1


@dataclass
class Inner:
    a: int
    b: tuple[str, ...] = ("x",)


@dataclass
class Custom:
    a: int

    def to_json(self) -> dict[str, Any]:
        return {"custom": self.a}


@dataclass
class Outcome(Result):
    zeta: str
    hidden: str = field(default="h", metadata=OMIT)
    inner: Inner = field(default_factory=lambda: Inner(1))
    renamed: int = field(default=2, metadata=meta(key="alias", then=("double",)))
    mapped: list[int] | None = field(default=None, metadata=meta(via=len))
    colour: Colour = Colour.RED
    model: Model = field(default_factory=lambda: Model(colour=Colour.RED))
    custom: Custom = field(default_factory=lambda: Custom(3))
    table: dict[str, Inner] = field(default_factory=lambda: {"k": Inner(4, ())})

    @property
    def double(self) -> int:
        return self.renamed * 2


def test_a_dataclass_result_is_its_fields_in_order_as_their_metadata_says() -> None:
    doc = Outcome("z", mapped=[5, 6]).to_json()
    assert list(doc) == ["zeta", "inner", "alias", "double", "mapped", "colour", "model", "custom", "table"]
    assert doc == {
        "zeta": "z",
        "inner": {"a": 1, "b": ["x"]},
        "alias": 2,
        "double": 4,
        "mapped": 2,
        "colour": "red",
        "model": {"colour": "red", "n": 1},
        "custom": {"custom": 3},
        "table": {"k": {"a": 4, "b": []}},
    }
    assert Outcome("z").to_json()["mapped"] is None  # via is not called on None


def test_a_result_that_is_no_dataclass_must_say_its_json_itself() -> None:
    with pytest.raises(TypeError):
        Result().to_json()
    assert encode(None) is None and encode(("a", 1)) == ["a", 1]


def test_a_card_is_the_scan_document_of_docs_json() -> None:
    """The keys ``fwman.scan/2`` documents for a GPU, in its order: identity, sizes with what they imply, the
    link with ``downtrained``; never the fields scan does not publish (UUID, class, persistence, smi index)."""
    card = Card("0000:41:00.0", "10de", "2204", "3842", "3987", bar1_bytes=1 << 28, vram_bytes=1 << 34,
                rebar_sizes_bytes=[1 << 28, 1 << 35], link=LinkState(16.0, 16.0, 8, 16), uuid="GPU-x",
                pci_class="0x030000", smi_index=0)  # fmt: skip
    doc = encode(card)
    assert list(doc) == [
        "bus_id", "vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id", "name", "vbios_version",
        "board_id", "driver_board_id", "vram_bytes", "bar1_bytes", "bar1_covers_vram", "rebar_sizes_bytes",
        "max_rebar_bytes", "link", "power_limit_w", "default_power_limit_w", "driver", "driver_version",
        "driver_flavour", "numa_node", "iommu_group", "unreadable",
    ]  # fmt: skip
    assert doc["bar1_covers_vram"] is False and doc["max_rebar_bytes"] == 1 << 35
    assert doc["link"] == {"current_speed_gts": 16.0, "max_speed_gts": 16.0, "current_width": 8, "max_width": 16,
                           "downtrained": True}  # fmt: skip
    assert "GPU-x" not in json.dumps(doc)
    assert fields_of(card) == doc
