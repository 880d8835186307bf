"""Metrics for node_exporter's textfile collector: what fwman knows about a host, as Prometheus gauges.

:func:`collect` reads the host (cards, patched modules per kernel, next boot, driver audit) into
:class:`Sample` rows; :func:`render` turns them into the Prometheus text exposition format (``# HELP``,
``# TYPE``, one line per series, label values escaped); the CLI writes the text atomically (temp file in the
same directory, then a rename: the collector reads only ``*.prom`` and never sees a half-written file).

Names follow the Prometheus naming conventions (prometheus.io/docs/practices/naming): an ``fwman_`` prefix, base
units in the name (``_bytes``, ``_transfers_per_second``, ``_timestamp_seconds``), ``_info`` series with value 1
for text that is not a number (VBIOS version, driver version), and booleans as 0/1 gauges. A source fwman could
not read (no GPU in a container, no kernels) is not an error: its series are left out and
``fwman_metrics_source_up{source=...}`` is 0, so an alert can tell "not readable" from "bad".
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fwman.core import paths, unitfile
from fwman.core.clock import now_utc
from fwman.core.config import load_config
from fwman.core.errors import FwmanError
from fwman.core.resources import read_data
from fwman.core.termtext import visible
from fwman.driver.boot.loaders import default_boot_kernel
from fwman.driver.boot.safety import kernel_safety
from fwman.driver.build.manifest import failed_path, manifest_path, read_marker
from fwman.driver.forks.config import configured_forks
from fwman.driver.hooks.files import python_for_hooks, templates_dir
from fwman.driver.kernel_hold import read_record
from fwman.driver.kernels import installed_kernels
from fwman.driver.preflight import BROKEN, SAFE, UNCHECKED, read_state
from fwman.gpu.inventory import require_cards
from fwman.host.actions import RemoveFile, Symlink, WriteFile
from fwman.host.base import Host
from fwman.p2p.fingerprint import read_fingerprint
from fwman.p2p.history import changes, read_history
from fwman.reports.audit.report import audit_host

PREFIX = "fwman_"


@dataclass(frozen=True)
class Family:
    """One metric: its name, help text and type (every fwman metric is a gauge)."""

    name: str
    help: str
    type: str = "gauge"


@dataclass
class Sample:
    """One series of a family: labels and a value."""

    family: Family
    value: float
    labels: dict[str, str] = field(default_factory=dict)


GPU_INFO = Family("fwman_gpu_info", "NVIDIA GPU identity and VBIOS version (value 1).")
GPU_BAR1 = Family("fwman_gpu_bar1_bytes", "Size of the GPU's BAR1 aperture.")
GPU_VRAM = Family("fwman_gpu_vram_bytes", "Video memory of the GPU.")
GPU_BAR1_COVERS = Family("fwman_gpu_bar1_covers_vram", "1 when BAR1 is at least as large as VRAM (needed for P2P).")
GPU_LINK_WIDTH = Family("fwman_gpu_pcie_link_width", "Current PCIe link width of the GPU (lanes).")
GPU_LINK_MAX_WIDTH = Family("fwman_gpu_pcie_link_max_width", "Maximum PCIe link width of the GPU (lanes).")
GPU_LINK_SPEED = Family(
    "fwman_gpu_pcie_link_transfers_per_second", "Current PCIe link speed of the GPU (transfers per second per lane)."
)
GPU_LINK_MAX_SPEED = Family(
    "fwman_gpu_pcie_link_max_transfers_per_second",
    "Maximum PCIe link speed of the GPU (transfers per second per lane).",
)
KERNEL_INSTALLED = Family(
    "fwman_kernel_modules_installed", "1 when fwman installed patched NVIDIA modules for the kernel (a manifest)."
)
KERNEL_SAFE = Family(
    "fwman_kernel_safe_to_boot",
    "1 when the kernel's patched modules are in effect and verified (depmod, SHA-256, vermagic): modules ok.",
)
KERNEL_FAILED = Family("fwman_kernel_modules_build_failed", "1 when the last build for the kernel failed.")
NEXT_BOOT_SAFE = Family("fwman_next_boot_safe", "1 when the kernel that boots next has working patched modules.")
DRIVER_INFO = Family("fwman_driver_info", "Reference NVIDIA driver version of the host (value 1).")
DRIVER_MATCHED = Family(
    "fwman_driver_components_matched", "1 when kernel module, user space and containers are on the same driver."
)
DRIVER_COMPONENTS = Family("fwman_driver_components", "Driver components compared by `fwman audit`, by result.")
P2P_VERIFIED = Family(
    "fwman_p2p_verified", "1 when the last P2P verification passed and the configuration has not changed since."
)
P2P_LAST_OK = Family("fwman_p2p_last_check_ok", "1 when the last P2P verification (fwman p2p) passed.")
P2P_SLOWEST = Family(
    "fwman_p2p_slowest_pair_bytes_per_second", "Bandwidth of the slowest GPU pair of the last P2P verification."
)
P2P_LAST_TIME = Family("fwman_p2p_last_check_timestamp_seconds", "When the last P2P verification ran (Unix time).")
PREFLIGHT_LAST_TIME = Family(
    "fwman_preflight_last_run_timestamp_seconds", "When `fwman modules preflight` last ran (Unix time)."
)
PREFLIGHT_BUILDS = Family(
    "fwman_preflight_kernel_builds",
    "1 when the patched modules build for a kernel apt would install next (last pre-flight), 0 when they do not.",
)
PREFLIGHT_HELD = Family(
    "fwman_preflight_kernel_held", "1 for a kernel fwman holds back (its apt pin) because the modules do not build."
)
PREFLIGHT_KERNELS = Family("fwman_preflight_kernels", "Kernels of the last pre-flight, by result.")
LAST_CHECK = Family("fwman_last_check_timestamp_seconds", "When fwman last wrote these metrics (Unix time).")
SOURCE_UP = Family("fwman_metrics_source_up", "1 when fwman could read the source of a group of metrics.")


# -- rendering (pure) ---------------------------------------------------------------------------------------
def escape_label(value: str) -> str:
    """Return ``value`` escaped for a label value of the text format: backslash, double quote and newline as the
    format escapes them; every other character it cannot hold written out (``\\r``, ``\\x1b``, ``\\xff``).

    The format has no escape for a carriage return or another control character, and a raw ``\\r`` makes
    ``promtool check metrics`` (and node_exporter's textfile collector) refuse the whole file: they are shown as
    :func:`fwman.core.termtext.visible` shows them, which also writes a byte that was not UTF-8 (a directory name
    read with surrogateescape) as ``\\xff``, since the text format is UTF-8.
    """
    return visible(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Return ``text`` escaped for a ``# HELP`` line (backslash and newline; other controls written out)."""
    return visible(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Return a sample value as the text format writes it (integers without a fraction, NaN and infinities)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def render(samples: Iterable[Sample]) -> str:
    """Return the text exposition of ``samples``: each family once, with HELP and TYPE, series grouped under it.

    Families come out in the order of their first sample; a series whose labels repeat an earlier one of the
    same family is dropped (the format forbids duplicates).
    """
    order: list[Family] = []
    grouped: dict[str, list[Sample]] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for s in samples:
        key = (s.family.name, tuple(sorted(s.labels.items())))
        if key in seen:
            continue
        seen.add(key)
        if s.family.name not in grouped:
            order.append(s.family)
            grouped[s.family.name] = []
        grouped[s.family.name].append(s)
    lines: list[str] = []
    for fam in order:
        lines.append(f"# HELP {fam.name} {escape_help(fam.help)}")
        lines.append(f"# TYPE {fam.name} {fam.type}")
        for s in grouped[fam.name]:
            labels = ",".join(f'{k}="{escape_label(v)}"' for k, v in sorted(s.labels.items()))
            series = f"{fam.name}{{{labels}}}" if labels else fam.name
            lines.append(f"{series} {format_value(s.value)}")
    return "\n".join(lines) + "\n" if lines else ""


# -- collecting -----------------------------------------------------------------------------------------------
def _bool(value: bool | None) -> float:
    return 1.0 if value else 0.0


def card_samples(host: Host) -> list[Sample]:
    """Return the per-card series. Raises FwmanError when the cards cannot be read (no NVIDIA GPU)."""
    out: list[Sample] = []
    for card in require_cards(host):
        bus = {"bus_id": card.bus_id}
        out.append(
            Sample(
                GPU_INFO,
                1,
                {
                    **bus,
                    "name": card.name or "",
                    "pci_id": f"{card.vendor_id}:{card.device_id}",
                    "subsystem": f"{card.subsystem_vendor_id}:{card.subsystem_device_id}",
                    "vbios_version": card.vbios_version or "",
                },
            )
        )
        covers, link = card.bar1_covers_vram, card.link
        values = [
            (GPU_BAR1, card.bar1_bytes),
            (GPU_VRAM, card.vram_bytes),
            (GPU_BAR1_COVERS, None if covers is None else _bool(covers)),
            (GPU_LINK_WIDTH, link.current_width),
            (GPU_LINK_MAX_WIDTH, link.max_width),
            # sysfs says "16.0 GT/s": giga-transfers per second, written here in the base unit
            (GPU_LINK_SPEED, None if link.current_speed_gts is None else link.current_speed_gts * 1e9),
            (GPU_LINK_MAX_SPEED, None if link.max_speed_gts is None else link.max_speed_gts * 1e9),
        ]
        out += [Sample(family, value, bus) for family, value in values if value is not None]
    return out


def kernel_samples(host: Host) -> list[Sample]:
    """Return the per-kernel and next-boot series (the same verdicts as ``fwman modules status``)."""
    out: list[Sample] = []
    for kver in installed_kernels(host):
        k = {"kernel": kver}
        out.append(Sample(KERNEL_INSTALLED, _bool(host.exists(manifest_path(kver))), k))
        out.append(Sample(KERNEL_SAFE, _bool(kernel_safety(host, kver).safe), k))
        out.append(Sample(KERNEL_FAILED, _bool(read_marker(host, failed_path(kver)) is not None), k))
    default = default_boot_kernel(host)
    if default.kver is not None:
        safe = kernel_safety(host, default.kver).safe
        out.append(Sample(NEXT_BOOT_SAFE, _bool(safe), {"kernel": default.kver}))
    return out


def driver_samples(host: Host) -> list[Sample]:
    """Return the driver-consistency series from ``fwman audit`` (offline: a timer must not reach the network)."""
    report = audit_host(host, forks=configured_forks(load_config(host)), offline=True)
    out = [Sample(DRIVER_MATCHED, _bool(report.ok))]
    if report.reference:
        out.append(Sample(DRIVER_INFO, 1, {"version": report.reference}))
    for status, count in report.counts().items():
        if status != "info":
            out.append(Sample(DRIVER_COMPONENTS, count, {"result": status}))
    return out


def p2p_samples(host: Host) -> list[Sample]:
    """Return the P2P verification series from fwman's P2P history ([] when no verification was recorded).

    "Verified" means the last record passed and the configuration it was taken on (kernel, loaded module,
    fwman's build, user space, cards, VBIOS, BAR1) is the one now. The IOMMU mode is taken from the record, not
    derived again (that is the doctor's IOMMU step), so a change of the IOMMU mode alone is not seen here.
    """
    history = read_history(host)
    if not history:
        return []
    last = history[-1]
    kind = {"kind": last.kind}
    now = read_fingerprint(host, require_cards(host), last.fingerprint.iommu)
    out = [
        Sample(P2P_VERIFIED, _bool(last.ok and not changes(last.fingerprint, now)), kind),
        Sample(P2P_LAST_OK, _bool(last.ok), kind),
    ]
    if last.slowest_gbps is not None and last.slowest_pair:
        # the copy test's GB/s are 10^9 bytes per second; an NCCL record has a bus bandwidth, not a pair
        labels = {**kind, "pair": last.slowest_pair}
        out.append(Sample(P2P_SLOWEST, last.slowest_gbps * 1e9, labels))
    with contextlib.suppress(ValueError):  # a record whose time is not ISO 8601: the series is left out
        out.append(Sample(P2P_LAST_TIME, datetime.fromisoformat(last.time).timestamp(), kind))
    return out


def preflight_samples(host: Host) -> list[Sample]:
    """Return the last pre-flight's series (``fwman modules preflight``); [] when none ran and nothing is held.

    Raises ParseError (its source then reads 0) when fwman's pre-flight record or hold record is damaged.
    """
    state = read_state(host)
    held = read_record(host).kernels
    out: list[Sample] = []
    counts = {SAFE: 0, BROKEN: 0, UNCHECKED: 0}
    for verdict in state.last():
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
        if verdict.status in (SAFE, BROKEN):
            out.append(Sample(PREFLIGHT_BUILDS, _bool(verdict.status == SAFE), {"kernel": verdict.kernel}))
    out += [Sample(PREFLIGHT_HELD, 1, {"kernel": kver}) for kver in sorted(held)]
    if state.last_at is None:
        return out
    out += [Sample(PREFLIGHT_KERNELS, n, {"result": status}) for status, n in counts.items()]
    with contextlib.suppress(ValueError):  # a record whose time is not ISO 8601: the series is left out
        out.append(Sample(PREFLIGHT_LAST_TIME, datetime.fromisoformat(state.last_at).timestamp()))
    return out


def collect(host: Host) -> tuple[list[Sample], dict[str, str]]:
    """Return (every sample fwman can read on ``host``, {source: why it could not be read}).

    Never raises for a source that cannot be read: its series are left out, its ``source_up`` is 0 and the
    reason is returned. The P2P series appear only when fwman's P2P history holds a record.
    """
    sources: list[tuple[str, Callable[[Host], list[Sample]]]] = [
        ("gpus", card_samples),
        ("kernels", kernel_samples),
        ("driver", driver_samples),
        ("p2p", p2p_samples),
        ("preflight", preflight_samples),
    ]
    samples: list[Sample] = []
    problems: dict[str, str] = {}
    up: list[Sample] = []
    for name, reader in sources:
        try:
            samples += reader(host)
            up.append(Sample(SOURCE_UP, 1, {"source": name}))
        except FwmanError as e:
            problems[name] = e.message
            up.append(Sample(SOURCE_UP, 0, {"source": name}))
    samples += up
    samples.append(Sample(LAST_CHECK, round(now_utc().timestamp(), 3)))
    return samples, problems


# -- the systemd timer that refreshes the file ---------------------------------------------------------------
def timer_actions(python: str | None = None) -> list[Any]:
    """Return the actions that install and enable ``fwman-metrics.service`` and ``.timer`` (idempotent).

    The unit runs ``PYTHON -m fwman metrics write`` with this interpreter (as the kernel hook does). Raises
    MissingError when the unit templates are not installed with fwman.
    """
    directory = templates_dir()
    python = unitfile.exec_word(python or python_for_hooks(), "interpreter")  # the unit's ExecStart= word
    service = read_data(directory / paths.METRICS_UNIT_NAME).replace(b"@PYTHON@", python.encode())
    timer = read_data(directory / paths.METRICS_TIMER_NAME)
    return [
        WriteFile(paths.METRICS_UNIT, service, 0o644),
        WriteFile(paths.METRICS_TIMER, timer, 0o644),
        Symlink(paths.METRICS_TIMER_WANTS, paths.METRICS_TIMER),
    ]


def timer_remove_actions() -> list[Any]:
    """Return the actions that remove what :func:`timer_actions` wrote."""
    return [RemoveFile(paths.METRICS_TIMER_WANTS), RemoveFile(paths.METRICS_TIMER), RemoveFile(paths.METRICS_UNIT)]
