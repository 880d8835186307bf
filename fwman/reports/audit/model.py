"""What ``fwman audit`` found: the components it read and the verdict rows (schema fwman.audit/1 dumps these).

Plain dataclasses, not pydantic models: they are built by fwman's own readers (every untrusted input is parsed
to a model or a ParseError before it gets here), so there is nothing to validate, and importing pydantic cost
more than the rest of ``fwman audit``'s own work (bench/containers.py). :meth:`AuditReport.model_dump` gives
the JSON document the pydantic models gave (field order included).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fwman.core.driver_version import DriverVersion
from fwman.core.errors import ParseError
from fwman.platform.containers import CdiSpecAudit, ContainerAudit

if TYPE_CHECKING:
    from fwman.core.findings import Finding

Status = Literal["match", "mismatch", "unknown", "info"]


@dataclass(kw_only=True)
class Row:
    """One line of the verdict table."""

    component: str
    version: str | None = None
    where: str
    status: Status
    fix: str | None = None
    detail: str | None = None


@dataclass(kw_only=True)
class LoadedModule:
    """The NVIDIA kernel module the running kernel has loaded."""

    version: str | None
    flavour: str | None  # "open" | "proprietary" | None when unknown
    proc_version: str | None  # first line of /proc/driver/nvidia/version
    sys_version: str | None  # /sys/module/nvidia/version


@dataclass(kw_only=True)
class KernelModule:
    """One nvidia* module file depmod resolves for one installed kernel."""

    kernel: str
    name: str
    path: str
    version: str | None = None
    vermagic: str | None = None
    kernel_release: str | None = None
    srcversion: str | None = None
    signed: bool | None = None
    signer: str | None = None
    origin: str = "unknown"  # "patched" (fwman manifest hash matches), "not-fwman" (manifest differs), "unknown"
    fork: str | None = None
    branch: str | None = None
    commit: str | None = None
    #: a donor-patch fork's build: the sha256 of the patch applied to the upstream tag ``branch``
    donor_patch: str | None = None
    error: str | None = None
    #: the Ubuntu prebuilt-module package whose file this is (linux-modules-nvidia-*), None for any other file
    package: str | None = None


@dataclass(kw_only=True)
class PrebuiltModulePackage:
    """One installed Ubuntu prebuilt-NVIDIA module package (fwman.driver.prebuilt) and the module files it put."""

    name: str
    version: str | None
    kind: str  # "modules", "metapackage", "objects", "signatures"
    branch: str | None
    open: bool
    kernel: str | None
    flavour: str | None
    provides: list[str] = field(default_factory=list)
    module_dirs: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    note: str | None = None


@dataclass(kw_only=True)
class P2PBranch:
    """Whether a fork carries a P2P branch for the kernel module's version."""

    version: str | None
    status: str  # "available" | "none" | "unknown"
    forks: list[str] = field(default_factory=list)
    nearest_below: str | None = None
    nearest_above: str | None = None
    source: str = "none"  # "live", "cache", "live+cache", "none"
    oldest_age_seconds: float | None = None
    note: str | None = None


@dataclass(kw_only=True)
class AuditReport:
    """Everything audit found, and the verdict."""

    reference: str | None
    reference_source: str
    running_kernel: str | None
    loaded: LoadedModule | None
    modules: list[KernelModule]
    kernels_without_module: list[str] = field(default_factory=list)  # installed kernels with no nvidia*.ko
    host_libs: dict[str, list[str]]  # version -> paths
    host_compat: list[str]
    smi_version: str | None
    firmware: list[str]
    firmware_dirs: dict[str, str] = field(default_factory=dict)  # version -> where it was found
    containers: list[ContainerAudit]
    rows: list[Row]
    cdi_specs: list[CdiSpecAudit] = field(default_factory=list)
    engine_problems: list[str] = field(default_factory=list)  # an engine not running, a malformed answer
    p2p: P2PBranch
    unreadable: list[str] = field(default_factory=list)
    #: Ubuntu's prebuilt, Canonical-signed NVIDIA module packages installed on the host
    prebuilt_modules: list[PrebuiltModulePackage] = field(default_factory=list)
    #: fwman's apt hold of the NVIDIA user space and the upgrades apt would make (schema fwman.userspace-hold/1)
    userspace_hold: dict[str, Any] | None = None

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        """Return the report as plain JSON types (rows, containers, specs as objects; ``mode`` is accepted for the
        pydantic call it replaces: the fields hold JSON types only)."""
        return dataclasses.asdict(self)

    @property
    def ok(self) -> bool:
        """Return True when every compared component matches (info rows do not count)."""
        return all(r.status in ("match", "info") for r in self.rows)

    def counts(self) -> dict[str, int]:
        """Return {status: number of rows}."""
        out = {"match": 0, "mismatch": 0, "unknown": 0, "info": 0}
        for r in self.rows:
            out[r.status] += 1
        return out

    def findings(self) -> list[Finding]:
        """Return the rows as Findings (mismatch: warn, unknown: info, match/info: ok) for ``fwman doctor``."""
        from fwman.core.findings import Finding, Severity  # pydantic: only the doctor needs it

        severity = {"match": Severity.OK, "info": Severity.OK, "unknown": Severity.INFO, "mismatch": Severity.WARN}
        out: list[Finding] = []
        for i, r in enumerate(self.rows):
            slug = re.sub(r"[^a-z0-9]+", "-", r.component.lower()).strip("-")
            out.append(
                Finding(
                    id=f"audit.{slug}.{i}",
                    severity=severity[r.status],
                    message=f"{r.component} {r.version or '?'} at {r.where}: {r.status}"
                    + (f" ({r.detail})" if r.detail else ""),
                    evidence={"where": r.where, "version": r.version or "unknown", "status": r.status},
                    fix=r.fix,
                )
            )
        return out


def status_against(version: str | None, reference: str | None) -> Status:
    """Return match/mismatch against the reference, unknown when either is missing."""
    if version is None or reference is None:
        return "unknown"
    return "match" if version == reference else "mismatch"


def version_sort_key(v: str) -> tuple[int, str, DriverVersion | None]:
    """Return a sort key for driver versions: parsed ones in version order, then anything else by its text."""
    try:
        return (0, "", DriverVersion.parse(v))
    except ParseError:
        return (1, v, None)
