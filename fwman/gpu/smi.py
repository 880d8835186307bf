"""Pure parser for ``nvidia-smi -q -x`` XML.

Field names vary between driver branches (``power_readings`` became ``gpu_power_readings``; some fields read
``N/A`` or ``[N/A]``), so every field is optional and read defensively.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from fwman.core.errors import ParseError

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB)\s*$")
_WATTS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*W\s*$")
#: what nvidia-smi prints (bare or in brackets) for a value it does not have
_NO_VALUE = ("N/A", "Unknown Error", "Not Supported", "Requested functionality has been deprecated")
_BUS = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


@dataclass(frozen=True)
class SmiGpu:
    """One ``<gpu>`` element, reduced to what fwman uses. Sizes in bytes, power in watts."""

    bus_id: str  # normalised to sysfs form "0000:41:00.0"
    #: nvidia-smi's index of the GPU (``nvidia-smi -i N``): the ``<gpu>`` elements come in that order
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    vbios_version: str | None = None
    board_id: str | None = None
    device_id: str | None = None  # "2204"
    vendor_id: str | None = None  # "10de"
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    vram_bytes: int | None = None
    bar1_bytes: int | None = None
    pcie_gen_max: int | None = None
    link_width_current: int | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    #: ``<display_active>``: Enabled (a display is initialised on the GPU) True, Disabled False, else None
    display_active: bool | None = None
    #: ``<persistence_mode>``: Enabled True, Disabled False, else None (what ``nvidia-smi -pm`` sets)
    persistence_mode: bool | None = None


@dataclass(frozen=True)
class SmiLog:
    """The whole ``<nvidia_smi_log>``."""

    gpus: list[SmiGpu]
    driver_version: str | None = None
    cuda_version: str | None = None


def normalise_bus_id(text: str) -> str:
    """Return a PCI bus id in sysfs form (``0000:41:00.0``) from nvidia-smi's ``00000000:41:00.0``.

    Raises ParseError when it is not a bus id.
    """
    m = _BUS.match(text.strip())
    if not m:
        raise ParseError("bus id", "bus id", f"expected DDDD:BB:DD.F, got {text.strip()[:40]!r}")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}"


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or value.strip("[]") in _NO_VALUE:
        return None
    return value


def _size(value: str | None) -> int | None:
    m = _SIZE.match(value or "")
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _watts(value: str | None) -> float | None:
    m = _WATTS.match(value or "")
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    m = re.match(r"^\s*([0-9]+)x?\s*$", value or "")
    return int(m.group(1)) if m else None


def _split_pci_id(value: str | None) -> tuple[str | None, str | None]:
    """Split nvidia-smi's 32-bit PCI IDs: ``0x39873842`` = device 0x3987 (high 16) and vendor 0x3842 (low)."""
    if value is None or not re.fullmatch(r"0x[0-9a-fA-F]{8}", value):
        return None, None
    n = int(value, 16)
    return f"{n & 0xFFFF:04x}", f"{n >> 16:04x}"


def parse_smi_xml(text: str) -> SmiLog:
    """Return the parsed ``nvidia-smi -q -x`` document. Raises ParseError for non-XML or a foreign document."""
    if "<!ENTITY" in text:
        # nvidia-smi never declares entities; refusing them avoids entity-expansion tricks.
        raise ParseError("nvidia-smi XML", "document", "entity declarations are not accepted")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        line, col = e.position
        raise ParseError("nvidia-smi XML", "document", f"not well-formed (line {line}, column {col})") from e
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi XML", "root element", f"expected <nvidia_smi_log>, got <{root.tag[:40]}>")
    gpus: list[SmiGpu] = []
    for index, gpu in enumerate(root.findall("gpu")):
        raw_id = gpu.get("id") or _text(gpu, "pci/pci_bus_id")
        if raw_id is None:
            raise ParseError("nvidia-smi XML", f"gpu[{index}] id", "missing bus id")
        pci = gpu.find("pci")
        vendor, device = _split_pci_id(_text(pci, "pci_device_id"))
        svid, sdid = _split_pci_id(_text(pci, "pci_sub_system_id"))
        power = gpu.find("gpu_power_readings")
        if power is None:
            power = gpu.find("power_readings")
        vbios = _text(gpu, "vbios_version")
        gpus.append(
            SmiGpu(
                bus_id=normalise_bus_id(raw_id),
                index=index,
                name=_text(gpu, "product_name"),
                uuid=_text(gpu, "uuid"),
                vbios_version=vbios.upper() if vbios else None,
                board_id=_text(gpu, "board_id"),
                vendor_id=vendor,
                device_id=device,
                subsystem_vendor_id=svid,
                subsystem_device_id=sdid,
                vram_bytes=_size(_text(gpu, "fb_memory_usage/total")),
                bar1_bytes=_size(_text(gpu, "bar1_memory_usage/total")),
                pcie_gen_max=_int(_text(pci, "pci_gpu_link_info/pcie_gen/max_link_gen")),
                link_width_current=_int(_text(pci, "pci_gpu_link_info/link_widths/current_link_width")),
                power_limit_w=_watts(_text(power, "current_power_limit") or _text(power, "power_limit")),
                default_power_limit_w=_watts(_text(power, "default_power_limit")),
                display_active={"Enabled": True, "Disabled": False}.get(_text(gpu, "display_active") or ""),
                persistence_mode={"Enabled": True, "Disabled": False}.get(_text(gpu, "persistence_mode") or ""),
            )
        )
    return SmiLog(driver_version=_text(root, "driver_version"), cuda_version=_text(root, "cuda_version"), gpus=gpus)
