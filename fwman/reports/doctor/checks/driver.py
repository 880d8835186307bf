"""The driver is the P2P fork at the user space's version (from ``fwman audit``), and
``nvidia-smi topo -p2p r`` reads OK rather than CNS."""

from __future__ import annotations

from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Severity, Topic
from fwman.driver import dkms, nova_core
from fwman.reports.audit.model import P2PBranch
from fwman.reports.audit.p2p import p2p_line
from fwman.reports.doctor.checks.common import gpu_pairs
from fwman.reports.doctor.facts import Facts

P2P_MEANING = {
    "CNS": "chipset not supported: the stock GeForce driver's answer",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "U": "unknown",
}


# -- driver: the patched fork, at the version of the user space --------------------------------------------------
def _p2p_cells(facts: Facts) -> list[str] | None:
    """Return the off-diagonal ``topo -p2p r`` cells, None when they cannot be read."""
    try:
        m = facts.p2p_read.get()
    except FwmanError:
        return None
    return [m.cell(a, b) for a, b in gpu_pairs(m.gpus)]


def check_driver(facts: Facts) -> list[Finding]:
    """Return whether the loaded module is the P2P fork, whether user space matches it, whether a branch exists."""
    audit = facts.audit.get()
    loaded = audit.loaded
    cells = _p2p_cells(facts)
    all_ok = bool(cells) and all(c == "OK" for c in cells or [])
    cns = sum(1 for c in cells or [] if c == "CNS")
    p2p_note = f" (topo -p2p r: CNS for {cns} of {len(cells or [])} pairs)" if cns else ""
    if loaded is None or not loaded.version:
        return [
            Topic("driver.fork").block(
                "no NVIDIA kernel module is loaded",
                "load the patched fork's module (modprobe nvidia) or install it for this kernel",
            )
        ]
    version = loaded.version
    fork = Topic(
        "driver.fork", {"version": version, "flavour": loaded.flavour or "unknown", "proc": loaded.proc_version or ""}
    )
    fork_fix = (
        f"install the P2P fork's open kernel module at exactly {version} (branch {version}-p2p; "
        f"`fwman driver branches --driver-version {version}` lists who carries it), or move host and every container "
        "to a version that has a branch"
    )
    running = [m for m in audit.modules if m.kernel == audit.running_kernel and m.name == "nvidia"]
    origin = running[0].origin if running else "unknown"
    if loaded.flavour == "proprietary":
        found = fork.block(
            f"stock proprietary driver {version}: the P2P forks patch NVIDIA's open kernel module" + p2p_note, fork_fix
        )
    elif origin == "patched":
        found = fork.ok(f"patched fork module {version} (fwman's install manifest matches)")
    elif all_ok:
        found = fork.ok(
            f"open kernel module {version}; topo -p2p r reads OK for every pair (fwman did not install "
            "it, so which build it is stays unknown)"
        )
    else:
        found = fork.say(
            Severity.BLOCK if cns else Severity.WARN,
            f"{loaded.flavour or 'unknown'} kernel module {version} is not known to be the P2P fork "
            + (
                "(its hash differs from fwman's install manifest: something, DKMS for one, replaced it)"
                if origin == "not-fwman"
                else "(no fwman manifest)"
            )
            + p2p_note,
            fork_fix,
        )
    out = [found]
    mismatches = [r for r in audit.rows if r.status == "mismatch"]
    if mismatches:
        first = mismatches[0]
        out.append(
            Topic("driver.userspace", {r.where: f"{r.component}: {r.version or 'none'}" for r in mismatches}).warn(
                f"kernel module {version} and {len(mismatches)} component"
                f"{'s' if len(mismatches) > 1 else ''} differ: first {first.component} "
                f"{first.version or '(none)'} at {first.where}" + (f" ({first.detail})" if first.detail else ""),
                (first.fix or "") + " (`fwman audit` lists every component)",
            )
        )
    else:
        out.append(
            Topic("driver.userspace").ok(
                f"user space matches kernel module {version} wherever it could be read (`fwman audit`)"
            )
        )
    out.append(_branch_finding(audit.p2p))
    return out


def _branch_finding(p2p: P2PBranch) -> Finding:
    t = Topic("driver.branch")
    line = p2p_line(p2p)
    if p2p.status == "available":
        return t.ok(line)
    if p2p.status == "none":
        return t.block(line, "move host and every container to a version with a -p2p branch (`fwman driver branches`)")
    return t.info(line, "`fwman driver branches` lists the forks (needs the network once; cached after)")


# -- what the driver says: topo -p2p r ---------------------------------------------------------------------------
def check_p2p_topo(facts: Facts) -> list[Finding]:
    """Return what ``nvidia-smi topo -p2p r`` says for every pair of GPUs (OK rather than CNS)."""
    t = Topic("p2p.topo")
    m = facts.p2p_read.get()
    pairs = gpu_pairs(m.gpus)
    if not pairs:
        return [t.info(f"topo -p2p r lists {len(m.gpus)} GPU: no pair to read")]
    counts: dict[str, int] = {}
    for a, b in pairs:
        counts[m.cell(a, b)] = counts.get(m.cell(a, b), 0) + 1
    bad = {k: v for k, v in counts.items() if k != "OK"}
    if not bad:
        return [t.ok(f"topo -p2p r: OK for all {len(pairs)} pairs")]
    parts = [f"{k} for {v} of {len(pairs)} pairs ({P2P_MEANING.get(k, k)})" for k, v in sorted(bad.items())]
    fix = (
        "load the patched fork module (driver step above); CNS disappears with it"
        if "CNS" in bad
        else "check the steps above (IOMMU, BAR1); TNS/NS pairs may be behind a bridge that blocks peer traffic"
    )
    return [t.block("topo -p2p r: " + "; ".join(parts), fix, evidence={f"{a}->{b}": m.cell(a, b) for a, b in pairs})]


def check_nova_core(facts: Facts) -> list[Finding]:
    """Return what nova_core, kernel 7.0's own NVIDIA driver, does to the patched module: a GPU it holds now
    (block), an installed kernel where it would take the GPU at boot (warn), or the blacklist that stops it (ok).
    Nothing when no installed kernel has it and it holds no GPU."""
    if facts.nova_core is None:
        return []
    nova = facts.nova_core.get()
    out: list[Finding] = []
    source = {"source": nova_core.SOURCE}
    if nova.running.bound:
        out.append(
            Topic(
                "driver.nova_core.bound",
                {**source, "driver": "the GPU's sysfs driver link names nova_core's PCI driver"},
            ).block(
                f"nova_core holds {', '.join(nova.running.bound)}: nvidia.ko cannot probe "
                + ("it" if len(nova.running.bound) == 1 else "them"),
                f"`{nova_core.FIX}` (blacklists nova_core, regenerates the initramfs), then reboot",
            )
        )
    for kernel, problem in nova.kernels:
        out.append(
            Topic("driver.nova_core", {**source, "kernel": kernel.kver, "found": kernel.evidence}).say(
                Severity.WARN if problem else Severity.OK,
                problem or f"{kernel.kver} has nova_core, blacklisted by {', '.join(nova.blacklist)}",
                None
                if problem is None
                else ("boot a kernel without nova_core built in" if kernel.built_in else f"`{nova_core.FIX}`"),
            )
        )
    return out


def check_dkms(facts: Facts) -> list[Finding]:
    """Return what DKMS builds for which kernel: NVIDIA's stock module registered (warn: it rebuilds over the
    patched one), the owner's P2P fork (info: who builds it per kernel, and whose copy loads). Nothing when no
    NVIDIA module is registered."""
    if facts.dkms is None:
        return []
    found = facts.dkms.get()
    out: list[Finding] = []
    for (module, version), src in sorted(found.kinds.items()):
        if src.kind == dkms.STOCK:
            kernels = sorted({e.kernel for e in found.entries if (e.module, e.version) == (module, version)
                              and e.kernel and e.installed})  # fmt: skip
            out.append(
                Topic("driver.dkms").warn(
                    f"NVIDIA's stock module {module}/{version} is registered with DKMS"
                    + (f" (installed for {', '.join(kernels)})" if kernels else "")
                    + ": DKMS rebuilds it over the patched one at kernel updates",
                    "`fwman dkms block` (removes the stock module, leaves the P2P fork registered)",
                )
            )
        else:
            out.append(
                Topic("driver.dkms.fork", {"source": "docs/dkms.md, The owner's P2P fork in DKMS"}).info(
                    f"{module}/{version} registered with DKMS is the P2P fork ({'; '.join(src.evidence)})"
                )
            )
    for line in dkms.builders(found.entries, found.kinds, found.fwman_kernels):
        out.append(Topic("driver.dkms.fork").info(line))
    return out


#: a GPU that drives a display loses P2P until the fork's static-BAR1 fixes (field-late-2026.md)
DISPLAY_SOURCE = "aikitoria/open-gpu-kernel-modules PRs 34, 36, 41; issue 31 (GB206)"


def check_display(facts: Facts) -> list[Finding]:
    """Return each GPU that drives a display as a P2P risk, with the source and the fix; nothing when none does (as
    far as nvidia-smi's display_active and sysfs boot_vga tell)."""
    inventory = facts.inventory.get()
    out = [
        Topic("driver.display", {"source": DISPLAY_SOURCE}).warn(
            f"{bus} drives a display ({why}): a GPU that drives a display loses P2P until the fork's static-BAR1 fixes",
            "run the display from another GPU or the board's own VGA (BMC) and keep the P2P GPUs headless, or "
            "build a fork branch with the static-BAR1 fixes; RTX 5090s also need the static-BAR1 options "
            "(`fwman driver settings --apply`: NVreg_RMForceStaticBar1=1, NVreg_PeerMappingOverride=1)",
        )
        for bus, why in sorted(inventory.displays.items())
    ]
    # nothing to say when no GPU drives a display (the step is not shown, as for the other optional links)
    return out
