"""Pure parsers for ``nvidia-smi topo -m`` and ``nvidia-smi topo -p2p r|w|n|a|p`` matrices.

Both print a header row of device names, one row per device, then a legend. Header lines carry ANSI underline
escapes; they are stripped. Cells of ``-m``: X, SYS, NODE, PHB, PXB, PIX, NV#; of ``-p2p``: X, OK, CNS, GNS,
TNS, NS, DR, U. Rows and columns of devices that are not GPUs (NIC0.., mlx5_0, whatever a driver generation names
them) are kept but never validated: only GPU-to-GPU cells feed the checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.errors import ParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU[0-9]+$")
#: a device column or row name: GPU0, NIC0, mlx5_0, CX0, NVSW0 (whatever a driver generation prints)
_DEVICE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-.:]*$")
LINK_CELLS = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV[0-9]+)$")
#: DR "Disabled by regkey" is in newer drivers' legend (a real 2x3090 output: noonghunna/club-3090#1229)
P2P_CELLS = re.compile(r"^(X|OK|CNS|GNS|TNS|NS|DR|U)$")
_EXTRAS = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")


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
        return [d for d in self.devices if _GPU.match(d)]


def strip_ansi(text: str) -> str:
    """Return ``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


def _parse(text: str, what: str, cell_re: re.Pattern[str]) -> TopoMatrix:
    lines = [strip_ansi(line).rstrip() for line in text.splitlines()]
    header_idx = next((i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)), None)
    if header_idx is None:
        raise ParseError(what, "header", "no header row naming GPU0")
    text_header = lines[header_idx]
    # the per-device extras have spaces in their names; a space-padded copy (no tabs) still names them
    at = m.start() if (m := _EXTRAS.search(text_header)) else len(text_header)
    devices, tail = text_header[:at].split(), text_header[at:]
    extra_cols = [h.strip() for h in tail.split("\t") if h.strip()] if "\t" in tail else _EXTRAS.findall(tail)
    bad = next((d for d in devices if not _DEVICE.match(d)), None)
    if bad is not None:
        raise ParseError(what, "header", f"unexpected column name {bad[:20]!r}", header_idx + 1)
    if "GPU0" not in devices:
        raise ParseError(what, "header", "device names must come first in the header", header_idx + 1)
    if len(set(devices)) != len(devices):
        raise ParseError(what, "header", "a device name appears twice", header_idx + 1)
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
        if name not in devices:
            raise ParseError(what, f"row {lineno + 1}", f"unexpected row name {name[:20]!r}", lineno + 1)
        values = fields[1:]
        if len(values) < len(devices):
            raise ParseError(what, f"row {name}", f"{len(values)} cells for {len(devices)} devices", lineno + 1)
        row = dict(zip(devices, values[: len(devices)], strict=True))
        if _GPU.match(name):
            # only GPU-to-GPU cells feed the checks; a NIC's cells may use words of another driver generation
            for col, value in row.items():
                if _GPU.match(col) and not cell_re.match(value):
                    raise ParseError(what, f"cell {name}/{col}", f"unknown value {value[:12]!r}", lineno + 1)
        cells[name] = row
        extra[name] = dict(zip(extra_cols, values[len(devices) :], strict=False))
    if not any(_GPU.match(d) for d in cells):
        raise ParseError(what, "rows", "no GPU rows after the header")
    return TopoMatrix(devices=[d for d in devices if d in cells], cells=cells, extra=extra)


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Return the parsed ``nvidia-smi topo -m`` output. Raises ParseError on anything else."""
    return _parse(text, "nvidia-smi topo -m", LINK_CELLS)


def parse_p2p_matrix(text: str) -> TopoMatrix:
    """Return the parsed ``nvidia-smi topo -p2p X`` output. Raises ParseError on anything else."""
    return _parse(text, "nvidia-smi topo -p2p", P2P_CELLS)
