"""The CDI rows of ``fwman audit``: one per CDI spec, its driver libraries and device numbers against this host
(kept apart from :mod:`fwman.reports.audit.rows`, which calls it in table order)."""

from __future__ import annotations

from collections.abc import Sequence

from fwman.platform.cdi import REGENERATE
from fwman.platform.containers import CdiSpecAudit
from fwman.reports.audit.model import Row, Status, status_against, version_sort_key


def cdi_spec_rows(specs: Sequence[CdiSpecAudit], ref: str | None) -> list[Row]:
    """Return one row per CDI spec: its library versions against the driver, and host paths it names that are
    gone; a spec that is not one is unknown. The fix is NVIDIA's command that writes the spec again."""
    rows: list[Row] = []
    for spec in specs:
        regenerate = REGENERATE.format(path=spec.path)
        if spec.error is not None:
            rows.append(
                Row(
                    component="CDI spec",
                    where=spec.path,
                    status="unknown",
                    fix=f"write it again: {regenerate}",
                    detail=f"not a CDI spec: {spec.error}",
                )
            )
            continue
        if not (spec.kind or "").startswith("nvidia.com/"):
            rows.append(
                Row(
                    component=f"CDI spec {spec.kind}",
                    where=spec.path,
                    status="info",
                    detail=f"cdiVersion {spec.version}: not NVIDIA's, not compared",
                )
            )
            continue
        versions = sorted(spec.libs, key=version_sort_key)
        stale = [v for v in versions if ref is not None and v != ref]
        details = [f"cdiVersion {spec.version}", f"devices {', '.join(spec.devices)}"]
        status: Status
        if spec.stale_majors:
            # nvidia-smi keeps working while cuInit fails (NemoClaw PR 4733; cuInit 999 with a uvm major of 510
            # where the kernel gave 509: nvidia-container-toolkit issue 1934)
            nodes = ", ".join(f"{node} major {was} (now {now})" for node, was, now in spec.stale_majors)
            details.insert(0, f"device numbers drifted: {nodes}: cuInit fails in its containers")
        if stale:
            status = "mismatch"
            details.insert(0, f"mounts the {', '.join(stale)} libraries: written for another driver than {ref}")
        elif spec.missing or spec.stale_majors:
            status = "mismatch"
        elif not versions:
            status = "unknown"
            details.insert(0, "names no versioned driver library")
        else:
            status = status_against(versions[-1], ref)
        if spec.missing:
            shown = ", ".join(spec.missing[:3]) + (
                f" and {len(spec.missing) - 3} more" if len(spec.missing) > 3 else ""
            )
            details.insert(0, f"host paths gone: {shown}")
        rows.append(
            Row(
                component=f"CDI spec {spec.kind}",
                version=", ".join(versions) or None,
                where=spec.path,
                status=status,
                fix=(
                    f"write it again for the installed driver: {regenerate}"
                    + (
                        " (or `systemctl start nvidia-cdi-refresh.service`, which nvidia-container-toolkit installs)"
                        if spec.refresh_unit
                        else ""
                    )
                )
                if status == "mismatch"
                else None,
                detail="; ".join(details),
            )
        )
    return rows
