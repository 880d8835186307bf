"""What ``fwman audit`` found: the components it read and the verdict rows (schema fwman.audit/1 dumps these)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from fwman.core.findings import Finding, Severity
from fwman.platform.containers import CdiSpecAudit, ContainerAudit

Status = Literal["match", "mismatch", "unknown", "info"]


class Row(BaseModel):
    """One line of the verdict table."""

    component: str
    version: str | None
    where: str
    status: Status
    fix: str | None = None
    detail: str | None = None


class LoadedModule(BaseModel):
    """The NVIDIA kernel module the running kernel has loaded."""

    version: str | None
    flavour: str | None  # "open" | "proprietary" | None when unknown
    proc_version: str | None  # first line of /proc/driver/nvidia/version
    sys_version: str | None  # /sys/module/nvidia/version


class KernelModule(BaseModel):
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


class PrebuiltModulePackage(BaseModel):
    """One installed Ubuntu prebuilt-NVIDIA module package (fwman.driver.prebuilt) and the module files it put."""

    name: str
    version: str | None
    kind: str  # "modules", "metapackage", "objects", "signatures"
    branch: str | None
    open: bool
    kernel: str | None
    flavour: str | None
    provides: list[str] = Field(default_factory=list)
    module_dirs: list[str] = Field(default_factory=list)
    modules: list[str] = Field(default_factory=list)
    note: str | None = None


class P2PBranch(BaseModel):
    """Whether a fork carries a P2P branch for the kernel module's version."""

    version: str | None
    status: str  # "available" | "none" | "unknown"
    forks: list[str] = Field(default_factory=list)
    nearest_below: str | None = None
    nearest_above: str | None = None
    source: str = "none"  # "live", "cache", "live+cache", "none"
    oldest_age_seconds: float | None = None
    note: str | None = None


class AuditReport(BaseModel):
    """Everything audit found, and the verdict."""

    reference: str | None
    reference_source: str
    running_kernel: str | None
    loaded: LoadedModule | None
    modules: list[KernelModule]
    kernels_without_module: list[str] = Field(default_factory=list)  # installed kernels with no nvidia*.ko
    host_libs: dict[str, list[str]]  # version -> paths
    host_compat: list[str]
    smi_version: str | None
    firmware: list[str]
    firmware_dirs: dict[str, str] = Field(default_factory=dict)  # version -> where it was found
    containers: list[ContainerAudit]
    rows: list[Row]
    cdi_specs: list[CdiSpecAudit] = Field(default_factory=list)
    engine_problems: list[str] = Field(default_factory=list)  # an engine not running, a malformed answer
    p2p: P2PBranch
    unreadable: list[str] = Field(default_factory=list)
    #: Ubuntu's prebuilt, Canonical-signed NVIDIA module packages installed on the host
    prebuilt_modules: list[PrebuiltModulePackage] = Field(default_factory=list)
    #: fwman's apt hold of the NVIDIA user space and the upgrades apt would make (schema fwman.userspace-hold/1)
    userspace_hold: dict[str, Any] | None = None

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
