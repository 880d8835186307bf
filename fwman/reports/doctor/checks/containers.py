"""The container that serves the model: Docker and Podman containers that get the GPU (from ``fwman audit``).

For each (the running ones; when none runs, every GPU container): the same driver user space as the kernel
module (the audit's row), an NCCL new enough for the transport, and vLLM's cached P2P verdict
(``gpu_p2p_access_cache_for_<devices>.json`` under ``VLLM_CACHE_ROOT``) against what ``fwman p2p``
recorded on this configuration: vLLM reads the cache instead of testing again, so a verdict cached before a
driver or firmware change outlives it. The environment (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE) is checked with every
other workload by ``nccl.level``.
"""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Severity, Topic
from fwman.p2p.history import KIND_COPY, standing
from fwman.p2p.nccl_known import known_hangs
from fwman.platform.containers import ContainerAudit
from fwman.reports.audit.rows import NCCL_MINIMUM, nccl_tuple
from fwman.reports.doctor.checks.common import gpu_pairs
from fwman.reports.doctor.facts import Facts

ENGINE_KINDS = ("docker", "podman")


def serving_containers(containers: list[ContainerAudit]) -> list[ContainerAudit]:
    """Return the GPU containers that serve: the running ones, or every GPU container when none runs."""
    gpu = [c for c in containers if c.kind in ENGINE_KINDS and c.state != "no-gpu"]
    running = [c for c in gpu if c.engine_state == "running"]
    return running or gpu


def check_containers(facts: Facts) -> list[Finding]:
    """Return, per serving container, its driver, its NCCL and its vLLM P2P cache against fwman's record."""
    audit = facts.audit.get()
    containers = serving_containers(audit.containers)
    if not containers:
        # nothing to say on a host without GPU containers (the step is not shown); an engine that could not be
        # asked is said, since its containers may be the ones serving
        asked = [p for p in audit.engine_problems if not p.endswith(": not installed")]
        return (
            [
                Topic("containers").info(
                    f"could not ask the container engines: {'; '.join(asked)}",
                    "start the engine (or run fwman as a user that may reach its socket), then fwman doctor again",
                )
            ]
            if asked
            else []
        )
    rows = {r.component: r for r in audit.rows}
    out: list[Finding] = []
    try:  # where the GPUs meet decides whether a version's known hang applies here
        topo = facts.topo.get()
        cells: list[str] | None = sorted({topo.cell(a, b) for a, b in gpu_pairs(topo.gpus)})
    except FwmanError:
        cells = None
    for c in containers:
        label = f"{c.kind} container {c.name}"
        row = rows.get(label)
        # the row also counts an old NCCL as a mismatch; the driver finding judges the driver only (NCCL has its own)
        driver_problems = [p for p in c.problems if not p.startswith("libnccl ")]
        if row is None or row.status == "unknown":
            out.append(
                Topic("containers.driver").info(
                    f"{label}: its user-space driver could not be told"
                    + (f" ({row.detail})" if row and row.detail else ""),
                    row.fix if row else None,
                )
            )
        elif row.status == "match" or (not driver_problems and row.version == audit.reference):
            out.append(
                Topic("containers.driver").ok(f"{label}: user-space driver {row.version} is the kernel module's")
            )
        else:
            out.append(
                Topic(
                    "containers.driver",
                    {"version": row.version or "unknown", "reference": audit.reference or "unknown"},
                ).warn(f"{label}: {driver_problems[0] if driver_problems else row.detail}", row.fix)
            )
        out += _nccl(label, c)
        out += _hangs(label, c, cells)
        out += _vllm_cache(facts, label, c)
    return out


def _hangs(label: str, c: ContainerAudit, cells: list[str] | None) -> list[Finding]:
    """Return a finding per NCCL version of the image with a known P2P hang: a warning where this host's GPUs meet
    where the report's did (or where the topology could not be read), info elsewhere."""
    out = []
    for row in known_hangs(c.nccl):
        at = None if cells is None else [cell for cell in cells if cell in row.where]
        here = (
            "this host's topology could not be read"
            if cells is None
            else (f"GPUs here meet at {', '.join(at)}" if at else f"GPUs here meet at {', '.join(cells)}, not there")
        )
        out.append(
            Topic("containers.nccl.hang").say(
                Severity.WARN if at is None or at else Severity.INFO,
                f"{label}: NCCL {row.version} {row.what} ({here})",
                f"an image with another NCCL, or {row.workaround} in the container (and measure: `fwman p2p --nccl`)",
                evidence={"source": row.source, "where": ", ".join(row.where), "files": ", ".join(c.nccl[row.version])},
            )
        )
    return out


def _nccl(label: str, c: ContainerAudit) -> list[Finding]:
    minimum = ".".join(str(p) for p in NCCL_MINIMUM)
    old = [v for v in c.nccl if (t := nccl_tuple(v)) is not None and t < NCCL_MINIMUM]
    if old:
        return [
            Topic("containers.nccl").warn(
                f"{label}: its image ships NCCL {', '.join(sorted(old))}, older than {minimum}",
                f"use an image whose NCCL is {minimum} or newer",
            )
        ]
    if c.nccl:
        return [Topic("containers.nccl").ok(f"{label}: NCCL {', '.join(sorted(c.nccl))}")]
    return []


def _vllm_cache(facts: Facts, label: str, c: ContainerAudit) -> list[Finding]:
    if c.vllm_cache is None:
        return []
    where = f"{c.vllm_cache_path} (on the host {c.vllm_cache_host_path})"
    fix = f"remove {c.vllm_cache_host_path} and restart {label}: vLLM tests P2P again and writes a current verdict"
    return vllm_cache_findings(facts, "containers.vllm_cache", f"{label}: ", c.vllm_cache, where, fix)


def vllm_cache_findings(
    facts: Facts, finding_id: str, label: str, cache: dict[str, bool], where: str, fix: str
) -> list[Finding]:
    """Return the finding comparing one vLLM P2P cache (``cache``: ``{"0->1": True}``, at ``where``) with the
    newest ``fwman p2p`` record of this configuration: stale (says no while fwman verified P2P; says yes
    while fwman's test failed), agreeing, or nothing current to compare with. ``fix`` clears it."""
    denied = sorted(k for k, v in cache.items() if not v)
    allowed = sorted(k for k, v in cache.items() if v)
    try:
        now = standing(facts.p2p_history.get(), facts.fingerprint.get(), KIND_COPY)
    except FwmanError:
        now = None
    if now is not None and now.state == "verified" and denied:
        return [
            Topic(finding_id).warn(
                f"{label}vLLM's cached P2P verdict {where} says no for {', '.join(denied)}, but "
                "`fwman p2p` verified P2P on this configuration: the cache is stale",
                fix,
            )
        ]
    if now is not None and now.state == "failed" and allowed:
        return [
            Topic(finding_id).warn(
                f"{label}vLLM's cached P2P verdict {where} says yes for {', '.join(allowed)}, but "
                "`fwman p2p` FAILED on this configuration: vLLM would use P2P that corrupts data",
                fix,
            )
        ]
    if now is None or now.state in ("never", "changed"):
        return [
            Topic(finding_id).info(
                f"{label}vLLM's cached P2P verdict {where}: nothing current of fwman's to compare it with",
                "run `fwman p2p`, then `fwman doctor` again",
            )
        ]
    return [Topic(finding_id).ok(f"{label}vLLM's cached P2P verdict {where} agrees with `fwman p2p`")]


def check_host_vllm_caches(facts: Facts) -> list[Finding]:
    """Return, per vLLM P2P cache file on the host (not in a container), whether it agrees with fwman's record;
    nothing when there is none (the step is then not shown)."""
    if facts.vllm_caches is None:
        return []
    found, unreadable = facts.vllm_caches.get()
    out: list[Finding] = []
    for cache in found:
        fix = (
            f"clear it: `rm '{cache.path}'`, then restart the model server: vLLM tests P2P again at its next "
            "start and writes a current verdict"
        )
        where = f"{cache.path} (GPUs {cache.devices}, {cache.found_by})"
        out += vllm_cache_findings(facts, "vllm.cache", "", cache.verdicts, where, fix)
    for line in unreadable:
        out.append(
            Topic("vllm.cache").info(
                f"vLLM P2P cache not readable: {line}",
                "read it as root (`sudo fwman doctor`), or remove it so vLLM writes a new one",
            )
        )
    return out
