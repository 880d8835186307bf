"""The Card inventory: every NVIDIA GPU on a Host, sysfs first, nvidia-smi and /proc/driver/nvidia for the rest.

sysfs is the source of truth for PCI facts (IDs, BARs, links, NUMA, IOMMU group). nvidia-smi adds name, VBIOS
version, board ID, VRAM and power limits; without it (driver unloaded, as during a flash) the inventory still
works from sysfs and /proc and records in ``Card.unreadable`` what it could not read.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError
from fwman.gpu.card import Card, LinkState
from fwman.gpu.config_space import ConfigSpace, parse_config_space
from fwman.gpu.proc_version import parse_proc_version
from fwman.gpu.smi import SmiGpu, SmiLog, parse_smi_xml
from fwman.gpu.sysfs import parse_class, parse_hex_id, parse_int, parse_link_speed, parse_resource
from fwman.host.base import Host

T = TypeVar("T")
NVIDIA_VENDOR = "10de"
#: display controllers: VGA (0x0300xx) and 3D (0x0302xx); the GPU's audio/USB functions are not cards
GPU_CLASS_PREFIXES = ("0x0300", "0x0302")
SMI_QUERY = ("nvidia-smi", "-q", "-x")


def nvidia_functions(host: Host) -> list[str]:
    """Return the bus ids of every NVIDIA PCI function (GPUs and their audio/USB functions), sorted."""
    try:
        entries = host.listdir(paths.PCI_DEVICES_DIR)
    except MissingError:
        return []
    result = []
    for bus in entries:
        try:
            if parse_hex_id(host.read_text(f"{paths.PCI_DEVICES_DIR}/{bus}/vendor"), "vendor") == NVIDIA_VENDOR:
                result.append(bus)
        except (MissingError, ParseError):
            continue
    return result


def read_driver_version(host: Host) -> tuple[str | None, str | None]:
    """Return (version, flavour) of the loaded nvidia module from /proc/driver/nvidia/version; Nones if unloaded.

    flavour is ``open`` for "Open Kernel Module", ``proprietary`` for "NVIDIA UNIX x86_64 Kernel Module".
    Raises NotRecordedError on a snapshot that did not record the file.
    """
    try:
        text = host.read_text(paths.PROC_DRIVER_VERSION)
    except MissingError:
        return None, None
    parsed = parse_proc_version(text)
    return parsed.version, parsed.flavour


def read_smi(host: Host) -> tuple[SmiLog | None, str | None]:
    """Return (parsed ``nvidia-smi -q -x``, None) or (None, why it is unavailable)."""
    if host.which("nvidia-smi") is None:
        return None, "nvidia-smi not installed"
    result = host.run(list(SMI_QUERY), timeout=60)
    if result.missing:
        return None, "nvidia-smi not installed"
    if result.rc != 0:
        why = (result.stderr or result.stdout).strip().splitlines()
        return None, f"nvidia-smi failed (exit {result.rc}): {why[0] if why else 'no output'}"
    try:
        return parse_smi_xml(result.stdout), None
    except ParseError as e:
        return None, f"nvidia-smi output unreadable: {e.message}"


def _proc_information(host: Host, bus: str) -> dict[str, str]:
    """Return the ``Key: Value`` lines of /proc/driver/nvidia/gpus/<bus>/information (empty if absent)."""
    try:
        text = host.read_text(f"/proc/driver/nvidia/gpus/{bus}/information")
    except MissingError:
        return {}
    return {key.strip(): value.strip() for key, sep, value in (ln.partition(":") for ln in text.splitlines()) if sep}


def _link_basename(host: Host, path: str) -> str | None:
    try:
        return posixpath.basename(host.readlink(path).rstrip("/"))
    except MissingError:
        return None


def _read_card(host: Host, bus: str, smi: SmiGpu | None, driver: tuple[str | None, str | None]) -> Card | None:
    """Return the Card at ``bus``, or None when the function is not a display controller."""
    base = f"{paths.PCI_DEVICES_DIR}/{bus}"
    unreadable: list[str] = []

    def attr(name: str) -> str | None:
        try:
            return host.read_text(f"{base}/{name}")
        except MissingError:
            unreadable.append(name)
            return None

    pci_class_text = attr("class")
    pci_class = parse_class(pci_class_text) if pci_class_text else None
    if pci_class is not None and not pci_class.startswith(GPU_CLASS_PREFIXES):
        return None
    ids = {}
    for name in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
        text = attr(name)
        ids[name] = parse_hex_id(text, name) if text else "0000"

    config: ConfigSpace | None = None
    try:
        config = parse_config_space(host.read_bytes(f"{base}/config"))
    except MissingError:
        unreadable.append("config")
    except ParseError as e:
        unreadable.append(f"config ({e.detail})")
    if config is not None and not config.extended_visible:
        unreadable.append("extended config space (run as root to see Resizable BAR sizes)")

    bar1 = None
    resource = attr("resource")
    if resource is not None:
        bars = parse_resource(resource)
        bar1 = bars[1].size if len(bars) > 1 and bars[1].size else None

    rebar = config.rebar_for(1) if config else None
    link = LinkState(
        current_speed_gts=_opt(lambda: parse_link_speed(attr("current_link_speed") or "")),
        max_speed_gts=_opt(lambda: parse_link_speed(attr("max_link_speed") or "")),
        current_width=_opt(lambda: _width(attr("current_link_width"))),
        max_width=_opt(lambda: _width(attr("max_link_width"))),
    )
    if link.current_speed_gts is None and config is not None:
        link = LinkState(config.link_speed_gts, config.link_max_speed_gts, config.link_width, config.link_max_width)
    numa_text = attr("numa_node")
    numa = parse_int(numa_text, "numa_node") if numa_text else None
    group = _link_basename(host, f"{base}/iommu_group")
    info = _proc_information(host, bus)
    proc_vbios = info.get("Video BIOS")
    vbios = smi.vbios_version if smi and smi.vbios_version else (proc_vbios.upper() if proc_vbios else None)
    if smi is None:
        unreadable.append("nvidia-smi (name, board ID, VRAM, power limits)")
    return Card(
        bus_id=bus,
        vendor_id=ids["vendor"],
        device_id=ids["device"],
        subsystem_vendor_id=ids["subsystem_vendor"],
        subsystem_device_id=ids["subsystem_device"],
        pci_class=pci_class,
        name=(smi.name if smi else None) or info.get("Model"),
        smi_index=smi.index if smi else None,
        vbios_version=vbios,
        board_id=None,  # nvidia-smi's <board_id> is not the VBIOS board ID: see Card.board_id
        driver_board_id=smi.board_id if smi else None,
        vram_bytes=smi.vram_bytes if smi else None,
        bar1_bytes=bar1 if bar1 is not None else (smi.bar1_bytes if smi else None),
        rebar_sizes_bytes=list(rebar.supported_bytes) if rebar else [],
        rebar_current_bytes=rebar.current_bytes if rebar else None,
        link=link,
        power_limit_w=smi.power_limit_w if smi else None,
        default_power_limit_w=smi.default_power_limit_w if smi else None,
        persistence_mode=smi.persistence_mode if smi else None,
        driver=_link_basename(host, f"{base}/driver"),
        driver_version=driver[0],
        driver_flavour=driver[1],
        numa_node=None if numa is None or numa < 0 else numa,
        iommu_group=int(group) if group and group.isdigit() else None,
        uuid=(smi.uuid if smi else None) or info.get("GPU UUID"),
        unreadable=unreadable,
    )


def _width(text: str | None) -> int | None:
    if text is None or not text.strip() or text.strip() == "0":
        return None
    return parse_int(text, "link width")


def _opt(fn: Callable[[], T | None]) -> T | None:
    try:
        return fn()
    except ParseError:
        return None


@dataclass(frozen=True)
class Inventory:
    """The cards on a host and, when nvidia-smi could not be used, why."""

    cards: list[Card]
    smi_problem: str | None = None
    #: the GPUs that drive a display: bus id -> what says so (nvidia-smi's display_active, sysfs boot_vga)
    displays: dict[str, str] = field(default_factory=dict)


def scan_inventory(host: Host, *, use_smi: bool = True) -> Inventory:
    """Return every NVIDIA GPU on ``host`` ordered by bus id (no cards when there is none), and the nvidia-smi state.

    Raises ParseError only for sysfs files that are present but malformed in the essential fields (IDs, class).
    """
    functions = nvidia_functions(host)
    if not functions:
        return Inventory(cards=[])
    smi_log, why = read_smi(host) if use_smi else (None, "nvidia-smi not used")
    driver = read_driver_version(host)
    if driver[0] is None and smi_log is not None:
        driver = (smi_log.driver_version, None)
    by_bus = {g.bus_id: g for g in smi_log.gpus} if smi_log else {}
    cards = []
    displays: dict[str, str] = {}
    for bus in functions:
        card = _read_card(host, bus, by_bus.get(bus), driver)
        if card is not None:
            cards.append(card)
            said = _display(host, bus, by_bus.get(bus))
            if said:
                displays[bus] = said
    return Inventory(cards=cards, smi_problem=why, displays=displays)


def _display(host: Host, bus: str, smi: SmiGpu | None) -> str | None:
    """Return what says the GPU at ``bus`` drives a display (None: nothing does): nvidia-smi's
    ``display_active`` Enabled, or sysfs ``boot_vga`` 1 (the firmware put its console there)."""
    reasons = []
    if smi is not None and smi.display_active:
        reasons.append("nvidia-smi: display_active Enabled")
    try:
        if host.read_text(f"{paths.PCI_DEVICES_DIR}/{bus}/boot_vga").strip() == "1":
            reasons.append("sysfs boot_vga 1 (the firmware's console GPU)")
    except (MissingError, NotRecordedError):
        pass
    return "; ".join(reasons) or None


def scan_cards(host: Host, *, use_smi: bool = True) -> list[Card]:
    """Return every NVIDIA GPU on ``host`` ordered by bus id (empty when there is none). See scan_inventory."""
    return scan_inventory(host, use_smi=use_smi).cards


def normalise_bus(text: str) -> str:
    """Return a user's bus id (``41:00.0``, ``0000:41:00.0``, ``00000000:41:00.0``) in sysfs form.

    Raises UsageError when it is not a bus id.
    """
    from fwman.core.names import bus_id  # `scan --json` loads this module and never needs core.names

    return bus_id(text)


def find_card(cards: list[Card], bus: str, note: Callable[[str], None] | None = None) -> Card:
    """Return the card at ``bus``: a bus id (``41:00.0``) or nvidia-smi's index (``2``, as ``nvidia-smi -i 2``).

    An index is told to ``note`` with the card it names (``--card 2 is nvidia-smi's GPU 2: 0000:61:00.0 ...``).
    nvidia-smi's order is its own (NVIDIA does not promise it across boots), so an index is resolved only from
    what nvidia-smi says now, never guessed from the bus order. Raises UsageError naming the cards there are
    when none matches, and when an index is given but nvidia-smi could not be read (the driver unloaded).
    """
    text = bus.strip()
    if text.isdigit() and len(text) <= 3:
        return _by_index(cards, int(text), note)
    wanted = normalise_bus(bus)
    for card in cards:
        if card.bus_id == wanted:
            return card
    known = ", ".join(c.bus_id for c in cards) or "none"
    raise UsageError(f"no NVIDIA GPU at {wanted}", hint=f"GPUs on this host: {known}")


def _by_index(cards: list[Card], index: int, note: Callable[[str], None] | None) -> Card:
    """Return the card nvidia-smi calls GPU ``index``; see :func:`find_card`."""
    listed = ", ".join(f"{c.bus_id} ({c.subsystem})" for c in cards) or "none"
    indexed = [c for c in cards if c.smi_index is not None]
    if not indexed:
        raise UsageError(
            f"--card {index}: nvidia-smi's GPU index, but nvidia-smi cannot be read now (is the driver unloaded?)",
            hint=f"name the card by its bus id (GPUs on this host: {listed}); with the driver loaded, "
            "`nvidia-smi --query-gpu=index,pci.bus_id --format=csv` shows each index's bus id",
        )
    card = next((c for c in indexed if c.smi_index == index), None)
    if card is None:
        known = ", ".join(f"{c.smi_index}: {c.bus_id}" for c in sorted(indexed, key=lambda c: c.smi_index or 0))
        raise UsageError(f"--card {index}: nvidia-smi has no GPU {index}", hint=f"nvidia-smi's GPUs: {known}")
    if note is not None:
        name = card.name or "NVIDIA GPU"
        note(f"--card {index} is nvidia-smi's GPU {index}: {card.bus_id} ({name}, {card.subsystem})")
    return card


def require_inventory(host: Host) -> Inventory:
    """Return the inventory of ``host``. Raises MissingError with a clear message when there is no NVIDIA GPU."""
    inventory = scan_inventory(host)
    if not inventory.cards:
        raise MissingError(
            f"no NVIDIA GPU found on {host.description} ({paths.PCI_DEVICES_DIR} lists none with vendor 0x10de)",
            hint="is this the right machine? On a VM, is the GPU passed through?",
        )
    return inventory


def require_cards(host: Host) -> list[Card]:
    """Return the cards on ``host``. Raises MissingError when there is no NVIDIA GPU."""
    return require_inventory(host).cards
