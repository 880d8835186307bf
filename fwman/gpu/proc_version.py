"""``/proc/driver/nvidia/version``: the loaded NVIDIA kernel module's version and flavour (one parser).

The file's first line is ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build
...`` for the open module and ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.16  ...`` for the
proprietary one. ``fwman scan`` (through the inventory) and ``fwman audit`` both read it through
:func:`parse_proc_version`; each reader keeps its own policy for a file that is absent or unreadable.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.driver_version import DriverVersion

_NVRM = "NVRM version:"


@dataclass(frozen=True)
class ProcVersion:
    """What the ``NVRM version:`` line says."""

    version: str | None  # exactly as written ("580.95.05"), None when the line carries none
    flavour: str | None  # "open" | "proprietary" | None when the line names neither
    line: str | None  # the NVRM line as written (stripped of the line break), None when there is none


def parse_proc_version(text: str) -> ProcVersion:
    """Return the version, flavour and line of the ``NVRM version:`` line of ``/proc/driver/nvidia/version``.

    Returns a ProcVersion of Nones for text without that line. Never raises.
    """
    for line in text.splitlines():
        if line.startswith(_NVRM):
            flavour = "open" if "Open Kernel Module" in line else "proprietary" if "Kernel Module" in line else None
            # a version not glued to a word or a dot: ``x86_64`` is not one
            found = DriverVersion.search(line[len(_NVRM) :])
            return ProcVersion(found.text if found else None, flavour, line)
    return ProcVersion(None, None, None)
