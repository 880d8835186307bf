"""``fwman dkms status``: the NVIDIA modules registered with DKMS, and whether fwman blocks DKMS. Typed arguments in (a
Host), a result model out; no click."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.app.text import Out, Result, say, table
from fwman.core.jsonout import encode
from fwman.driver import dkms
from fwman.driver.build.manifest import built_kernels
from fwman.host.base import Host


@dataclass
class DkmsStatus(Result):
    """The registered NVIDIA DKMS modules, fwman's block record, and whether the dkms tool is there."""

    entries: list[dkms.DkmsEntry]
    block: dkms.BlockRecord | None
    dkms_installed: bool
    #: each registered (module, version): the owner's P2P fork or NVIDIA's stock module (dkms.classify)
    sources: dict[tuple[str, str], dkms.DkmsSource] = field(default_factory=dict)
    #: the kernels fwman has built for (a manifest)
    fwman_kernels: list[str] = field(default_factory=list)

    def kind(self, e: dkms.DkmsEntry) -> str:
        """Return ``fork`` or ``stock`` for an entry (stock when it was not classified)."""
        src = self.sources.get((e.module, e.version))
        return src.kind if src else dkms.STOCK

    def builders(self) -> list[str]:
        """Return one line per kernel that DKMS builds the fork for: who builds it, and whose copy loads."""
        return dkms.builders(self.entries, self.sources, self.fwman_kernels)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.dkms-status/1`` (without the schema key)."""
        record = self.block
        return {
            "modules": [{**encode(e), **encode(self._source(e))} for e in self.entries],
            "builders": self.builders(),
            "blocked": record is not None,
            "apt_pin": record.apt_pin if record else None,
            "removed": record.removed if record else [],
            "dkms_installed": self.dkms_installed,
        }

    def _source(self, e: dkms.DkmsEntry) -> dkms.DkmsSource:
        """Return what ``e``'s tree is (NVIDIA's stock module when it was not classified)."""
        return self.sources.get((e.module, e.version)) or dkms.DkmsSource(e.module, e.version, dkms.STOCK, ())

    def text(self, verbose: int = 0) -> Out:
        """Return the registered modules and whether fwman blocks DKMS."""
        entries, record = self.entries, self.block
        if not self.dkms_installed:
            out: Out = [say("dkms is not installed")]
        elif entries:
            rows = [[e.module, e.version, e.kernel or "-", e.state, self.kind(e)] for e in entries]
            out = [table(["MODULE", "VERSION", "KERNEL", "STATE", "TREE"], rows)]
            for src in self.sources.values():
                if src.kind == dkms.FORK:
                    out.append(say(f"{src.module}/{src.version} is the P2P fork: {'; '.join(src.evidence)}; "
                                   "`fwman dkms block` leaves it registered"))  # fmt: skip
            out += [say(line) for line in self.builders()]
        else:
            out = [say("no NVIDIA module is registered with DKMS")]
        if record is not None:
            removed = ", ".join(f"{r['module']}/{r['version']}" for r in record.removed) or "nothing registered then"
            out.append(say(f"blocked by fwman since {record.at}: removed {removed}; apt pin {record.apt_pin}"))
        elif any(self.kind(e) == dkms.STOCK for e in entries):
            out.append(say("DKMS will rebuild NVIDIA's stock modules over fwman's: run `fwman dkms block`", "yellow"))
        return out


def dkms_status(host: Host) -> DkmsStatus:
    """Return the DKMS status of ``host``. Raises FwmanError when ``dkms status`` fails."""
    entries = [e for e in dkms.status(host) if dkms.is_nvidia(e)]
    built = built_kernels(host)
    return DkmsStatus(
        entries, dkms.read_block(host), host.which("dkms") is not None, dkms.sources(host, entries), built
    )
