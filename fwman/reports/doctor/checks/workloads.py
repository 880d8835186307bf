"""Checks over where GPU workloads take their settings from: NCCL_P2P_LEVEL where GPUs meet at the CPU, and
vLLM's custom all-reduce over PCIe."""

from __future__ import annotations

import re

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Severity, Topic
from fwman.p2p.history import KIND_NCCL, P2PRecord, standing
from fwman.platform import nccl
from fwman.reports.doctor.checks.common import gpu_pairs
from fwman.reports.doctor.facts import Facts
from fwman.reports.doctor.parsers import (
    AT_CPU,
    disables_custom_all_reduce,
    mentions_vllm,
    nccl_level_covers,
    nccl_level_needed,
)


def _nccl_measurement(facts: Facts) -> P2PRecord | None:
    """Return the NCCL tier's record on this configuration that timed P2P against its NCCL_P2P_DISABLE=1
    control (``p2p_faster`` known), None when there is none or it cannot be read."""
    try:
        found = standing(facts.p2p_history.get(), facts.fingerprint.get(), KIND_NCCL)
    except FwmanError:
        return None
    r = found.record
    return r if found.state == "verified" and r is not None and r.p2p_faster is not None else None


def check_nccl(facts: Facts) -> list[Finding]:
    """Return whether NCCL will use P2P between GPUs that meet at the CPU (``NCCL_P2P_LEVEL``)."""
    t = Topic("nccl.level")
    topo = facts.topo.get()
    pairs = gpu_pairs(topo.gpus)
    if not pairs:
        return [t.info("topo -m lists one GPU: NCCL has no pair")]
    cells = sorted({topo.cell(a, b) for a, b in pairs})
    needed = nccl_level_needed(cells)
    if needed is None:
        return [t.ok(f"GPUs meet at {', '.join(cells)} (NVLink or a shared PCIe switch): NCCL's default uses P2P")]
    meet = ", ".join(c for c in cells if c in AT_CPU)
    gathered = facts.workloads.get()
    sources, problems = gathered.sources, gathered.problems
    out: list[Finding] = []
    for s in sources:
        if s.env.get("NCCL_P2P_DISABLE", "").strip() == "1":
            out.append(
                t.block(
                    f"NCCL_P2P_DISABLE=1 in {s.where}: NCCL never uses P2P there",
                    f"create {s.where} again without `-e NCCL_P2P_DISABLE=1` (an existing container's "
                    "environment cannot change)"
                    if s.kind in ("docker", "podman")
                    else f"remove NCCL_P2P_DISABLE from {s.where}",
                    evidence={"where": s.where},
                )
            )
    workloads = [s for s in sources if s.uses_gpu]
    measured = _nccl_measurement(facts)
    global_conf = next((s for s in sources if s.kind == "nccl.conf" and "NCCL_P2P_LEVEL" in s.env), None)
    for s in workloads:
        value = s.env.get("NCCL_P2P_LEVEL")
        covers = nccl_level_covers(value, needed) if value is not None else False
        if covers:
            out.append(t.ok(f"NCCL_P2P_LEVEL={value} in {s.label}: covers GPUs meeting at {meet}"))
        elif covers is None:
            out.append(
                t.warn(
                    f"NCCL_P2P_LEVEL={value} in {s.label} is not a named level; GPUs meet at {meet}",
                    s.fix("NCCL_P2P_LEVEL=SYS"),
                )
            )
        else:
            what = f"NCCL_P2P_LEVEL={value} is too low" if value is not None else "NCCL_P2P_LEVEL not set"
            if measured is not None and measured.p2p_faster is False:
                # P2P is not always faster (an Intel H770 board: P2P at SYS 2.4x slower than SHM,
                # field-late-2026.md): the measurement on this configuration outranks the rule
                out.append(
                    t.ok(
                        f"{what} in {s.label}: NCCL stages through host memory, which `fwman p2p "
                        f"--nccl` measured faster than P2P on this configuration ({measured.date}"
                        + (f": {measured.advice}" if measured.advice else "")
                        + "): leave it",
                        evidence={"where": s.where, "topology": meet, "measured": measured.time},
                    )
                )
                continue
            proof = (
                f" (measured: P2P faster and exact on this configuration, {measured.date})"
                if measured is not None and measured.p2p_faster is True
                else ""
            )
            again = (
                ""
                if proof
                else "; then `fwman p2p --nccl --nccl-env NCCL_P2P_LEVEL=SYS`: P2P is not always faster than "
                "shared memory, measure it"
            )
            out.append(
                t.block(
                    f"{what} in {s.label}: GPUs meet at {meet}, so NCCL stages through host memory "
                    f"instead of P2P{proof}",
                    s.fix("NCCL_P2P_LEVEL=SYS") + "; `NCCL_DEBUG=INFO` then shows P2P/CUMEM channels" + again,
                    evidence={"where": s.where, "topology": meet, "needed": needed},
                )
            )
    if global_conf is not None:
        value = global_conf.env["NCCL_P2P_LEVEL"]
        ok = nccl_level_covers(value, needed)
        out.append(
            t.say(
                Severity.OK if ok else Severity.WARN,
                f"NCCL_P2P_LEVEL={value} in {nccl.CONF} (processes on this host, not in containers)"
                + ("" if ok else f": does not cover GPUs meeting at {meet}"),
                None if ok else f"set NCCL_P2P_LEVEL=SYS in {nccl.CONF}",
            )
        )
    if not workloads and global_conf is None:
        out.append(
            t.warn(
                f"GPUs meet at {meet}: NCCL needs NCCL_P2P_LEVEL=SYS, and no place that sets it was checked",
                "point doctor at where your workload gets its environment: `--env-file FILE` (docker/compose "
                ".env), `--unit FILE` (systemd unit); GPU containers in /etc/pve/lxc are checked by themselves",
            )
        )
    out += [t.info(f"could not check {p}") for p in problems]
    return out


# -- vLLM custom all-reduce -------------------------------------------------------------------------------------
def check_vllm(facts: Facts) -> list[Finding]:
    """Return whether vLLM's custom all-reduce is disabled where vLLM runs over PCIe (it assumes NVLink)."""
    t = Topic("vllm.allreduce")
    try:
        topo = facts.topo.get()
        cells = [topo.cell(a, b) for a, b in gpu_pairs(topo.gpus)]
    except FwmanError:
        cells = []
    if cells and all(re.fullmatch(r"NV\d+", c) for c in cells):
        return [t.ok("GPUs are linked by NVLink")]
    sources = facts.workloads.get().sources
    # only files that hold a command line or its options: a container config names a host, not a command
    runs = [s for s in sources if s.kind in ("env-file", "unit", "docker", "podman") and mentions_vllm(s.text)]
    out = []
    for s in runs:
        if disables_custom_all_reduce(s.text):
            out.append(t.ok(f"vLLM in {s.where} runs with --disable-custom-all-reduce"))
        else:
            out.append(
                t.warn(
                    f"vLLM in {s.where} runs without --disable-custom-all-reduce: its custom all-reduce "
                    "assumes NVLink, and over PCIe on 3090s it has produced wrong outputs",
                    f"create {s.where} again with --disable-custom-all-reduce on its vLLM command line"
                    if s.kind in ("docker", "podman")
                    else f"add --disable-custom-all-reduce to the vLLM command line in {s.where}",
                )
            )
    if not runs:
        out.append(
            t.info(
                "if you serve with vLLM over PCIe, pass --disable-custom-all-reduce (its custom all-reduce "
                "assumes NVLink; on 3090s over PCIe it has produced wrong outputs)"
            )
        )
    return out
