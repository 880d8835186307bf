"""Pure parsers for ``nvidia-smi topo -m`` and ``nvidia-smi topo -p2p r|w|n|a|p`` matrices.

Both print a header row of device names, one row per device, then a legend. Header lines carry ANSI underline
escapes; they are stripped. Cells of ``-m``: X, SYS, NODE, PHB, PXB, PIX, NV#; of ``-p2p``: X, OK, CNS, GNS,
TNS, NS, U.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.errors import ParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU|NIC|MIG|CX|NVSW)[0-9]+$")
LINK_CELLS = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV[0-9]+)$")
P2P_CELLS = re.compile(r"^(X|OK|CNS|GNS|TNS|NS|U)$")


@dataclass(frozen=True)
class TopoMatrix:
    """A device-by-device matrix plus any per-device extra columns (CPU Affinity, NUMA Affinity, ...)."""

    devices: list[str]
    cells: dict[str, dict[str, str]]  # row device -> column device -> cell
    extra: dict[str, dict[str, str]] = field(default_factory=dict)  # device -> column name -> value

    def cell(self, a: str, b: str) -> str:
        """Return the cell for devices ``a`` (row) and ``b`` (column). Raises KeyError for unknown devices."""
        return self.cells[a][b]

    @property
    def gpus(self) -> list[str]:
        """Return the GPU device names (GPU0, GPU1, ...)."""
        return [d for d in self.devices if d.startswith("GPU")]


def strip_ansi(text: str) -> str:
    """Return ``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


def _parse(text: str, what: str, cell_re: re.Pattern[str]) -> TopoMatrix:
    lines = [strip_ansi(line).rstrip() for line in text.splitlines()]
    header_idx = next((i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)), None)
    if header_idx is None:
        raise ParseError(what, "header", "no header row naming GPU0")
    header = [h.strip() for h in lines[header_idx].split("\t")]
    if header and header[0] == "":
        header = header[1:]
    header = [h for h in header if h != ""]
    devices = [h for h in header if _DEVICE.match(h)]
    if not devices or header[: len(devices)] != devices:
        raise ParseError(what, "header", "device names must come first in the header", header_idx + 1)
    extra_cols = header[len(devices) :]
    cells: dict[str, dict[str, str]] = {}
    extra: dict[str, dict[str, str]] = {}
    for lineno in range(header_idx + 1, len(lines)):
        line = lines[lineno]
        if not line.strip():
            break  # the legend follows a blank line
        fields = [f.strip() for f in line.split("\t")]
        fields = [f for f in fields if f != ""] if len(fields) > 1 else line.split()
        if not fields:
            continue
        name = fields[0]
        if not _DEVICE.match(name):
            raise ParseError(what, f"row {lineno + 1}", f"unexpected row name {name[:20]!r}", lineno + 1)
        values = fields[1:]
        if len(values) < len(devices):
            raise ParseError(what, f"row {name}", f"{len(values)} cells for {len(devices)} devices", lineno + 1)
        row = dict(zip(devices, values[: len(devices)], strict=True))
        for col, value in row.items():
            if not cell_re.match(value):
                raise ParseError(what, f"cell {name}/{col}", f"unknown value {value[:12]!r}", lineno + 1)
        cells[name] = row
        extra[name] = dict(zip(extra_cols, values[len(devices) :], strict=False))
    gpus_rows = [d for d in devices if d in cells]
    if not gpus_rows:
        raise ParseError(what, "rows", "no device rows after the header")
    return TopoMatrix(devices=[d for d in devices if d in cells], cells=cells, extra=extra)


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Return the parsed ``nvidia-smi topo -m`` output. Raises ParseError on anything else."""
    return _parse(text, "nvidia-smi topo -m", LINK_CELLS)


def parse_p2p_matrix(text: str) -> TopoMatrix:
    """Return the parsed ``nvidia-smi topo -p2p X`` output. Raises ParseError on anything else."""
    return _parse(text, "nvidia-smi topo -p2p", P2P_CELLS)
