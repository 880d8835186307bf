"""What keeps nvflash from the cards: the driver gate, pure over what was read (who holds ``/dev/nvidia*``,
which nvidia modules are loaded). Used before a flash (:mod:`fwman.firmware.ops.flash_gates`) and a backup."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.findings import Finding, Topic


@dataclass(frozen=True)
class DeviceHolder:
    """A process with ``/dev/nvidia*`` open (from ``/proc/<pid>/fd``)."""

    pid: int
    comm: str  # its command name, "?" when unreadable
    device: str


def driver_gate(holders: Sequence[DeviceHolder], modules: Sequence[str]) -> list[Finding]:
    """Return the driver findings: block while a process holds ``/dev/nvidia*`` or an nvidia module is loaded
    (``holders``, ``modules`` in unload order), each with the command that clears it."""
    findings: list[Finding] = []
    if holders:
        stop = [
            "systemctl stop nvidia-persistenced"
            if h.comm.startswith("nvidia-persiste")
            else f"kill {h.pid}  # {h.comm}"
            for h in holders
        ]
        held = ", ".join(f"{h.comm} (pid {h.pid})" for h in holders)
        busy = Topic("flash.device-busy", {str(h.pid): h.device for h in holders})
        findings.append(
            busy.block(f"{len(holders)} process(es) hold /dev/nvidia*: {held}", "; ".join(dict.fromkeys(stop)))
        )
    if modules:
        loaded = Topic("flash.driver-loaded", {"file": paths.PROC_MODULES})
        findings.append(
            loaded.block("NVIDIA kernel modules are loaded: " + ", ".join(modules), "rmmod " + " ".join(modules))
        )
    return findings or [Topic("flash.driver").ok("no nvidia module loaded")]
