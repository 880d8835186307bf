"""``fwman dkms status``: the NVIDIA modules registered with DKMS, and whether fwman blocks DKMS.

Typed arguments in (a Host), a result model out; no click.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.app.text import Out, Result, say, table
from fwman.driver import dkms
from fwman.host.base import Host


@dataclass
class DkmsStatus(Result):
    """The registered NVIDIA DKMS modules, fwman's block record, and whether the dkms tool is there."""

    entries: list[dkms.DkmsEntry]
    block: dkms.BlockRecord | None
    dkms_installed: bool

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.dkms-status/1`` (without the schema key)."""
        record = self.block
        return {
            "modules": [
                {"module": e.module, "version": e.version, "kernel": e.kernel, "arch": e.arch, "state": e.state}
                for e in self.entries
            ],
            "blocked": record is not None,
            "apt_pin": record.apt_pin if record else None,
            "removed": record.removed if record else [],
            "dkms_installed": self.dkms_installed,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the registered modules and whether fwman blocks DKMS."""
        entries, record = self.entries, self.block
        if not self.dkms_installed:
            out: Out = [say("dkms is not installed")]
        elif entries:
            rows = [[e.module, e.version, e.kernel or "-", e.state] for e in entries]
            out = [table(["MODULE", "VERSION", "KERNEL", "STATE"], rows)]
        else:
            out = [say("no NVIDIA module is registered with DKMS")]
        if record is not None:
            removed = ", ".join(f"{r['module']}/{r['version']}" for r in record.removed) or "nothing registered then"
            out.append(say(f"blocked by fwman since {record.at}: removed {removed}; apt pin {record.apt_pin}"))
        elif entries:
            out.append(say("DKMS will rebuild these over fwman's modules: run `fwman dkms block`", "yellow"))
        return out


def dkms_status(host: Host) -> DkmsStatus:
    """Return the DKMS status of ``host``. Raises FwmanError when ``dkms status`` fails."""
    entries = [e for e in dkms.status(host) if dkms.is_nvidia(e)]
    return DkmsStatus(entries, dkms.read_block(host), host.which("dkms") is not None)
