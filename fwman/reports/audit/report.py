"""``fwman audit``: which driver version the kernel module, the host user space and each container are on.

Everything must be the *same* version string: the loaded kernel module, the module depmod resolves for every
installed kernel, the user-space libraries and ``nvidia-smi`` on the host, the GSP firmware directory, and the
libraries inside every container that uses the GPU. :func:`audit_host` reads all of it (files only; the one
command run is ``nvidia-smi --version`` on the host) and returns an :class:`AuditReport` whose rows say, per
component, match / mismatch / unknown and the fix. ``fwman doctor`` calls it too.

The reference version is the loaded kernel module's; without a loaded module, the module depmod resolves for
the running kernel; without that, the host's ``libcuda``. Whether a module is fwman's patched build is decided
only by fwman's install manifest (``/var/lib/fwman/modules/<kver>.json``, sha256 of each installed file):
without a manifest the answer is "unknown", never a guess (patched and stock modules carry the same version).

The package: :mod:`.model` (the report and its rows, dumped as fwman.audit/1), :mod:`.read` (the module side),
:mod:`.rows` (the verdict, one function per component), :mod:`.p2p` (the fork branch answer). The facts about
user space and containers are read below the driver layer, where a module build reads them too:
:mod:`fwman.platform.userspace` (libraries, nvidia-smi, firmware) and :mod:`fwman.platform.containers` (LXC,
roots, Docker/Podman, CDI specs). This module puts them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fwman.core.config import load_config
from fwman.core.driver_version import DriverVersion
from fwman.driver.forks.config import configured_forks
from fwman.driver.forks.forge import DEFAULT_API
from fwman.driver.forks.listing import list_branches
from fwman.driver.forks.model import BranchReport, Fork
from fwman.driver.userspace_hold import read_status as read_hold
from fwman.host.base import Host
from fwman.host.optional import read_text_noting
from fwman.platform.containers import (
    EngineReads,
    read_cdi_specs,
    read_containers,
    read_engine_containers,
    start_engine_reads,
)
from fwman.platform.userspace import UserSpace, scan_userspace
from fwman.reports.audit.dkms_rows import dkms_rows
from fwman.reports.audit.model import AuditReport, KernelModule, LoadedModule
from fwman.reports.audit.p2p import p2p_status
from fwman.reports.audit.prebuilt import prebuilt_rows, read_prebuilt_packages
from fwman.reports.audit.read import read_kernel_modules, read_loaded
from fwman.reports.audit.rows import build_rows, hold_rows

#: audit trusts a branch list younger than this without going to the network (`fwman driver branches` refreshes)
CACHE_FRESH_SECONDS = 6 * 3600.0


def choose_reference(
    loaded: LoadedModule | None, modules: Sequence[KernelModule], running: str | None, host_us: UserSpace
) -> tuple[str | None, str]:
    """Return (reference version, where it came from): the loaded module's; without one, the nvidia.ko depmod
    resolves for the running kernel; without that, the newest host ``libcuda``; else (None, "nothing found")."""
    if loaded is not None and loaded.version:
        return loaded.version, "loaded kernel module"
    running_nvidia = next((m for m in modules if m.kernel == running and m.name == "nvidia" and m.version), None)
    if running_nvidia is not None:
        return running_nvidia.version, f"nvidia.ko for the running kernel {running}"
    cuda = sorted(
        (lib for lib in host_us.libs if lib.name == "libcuda"), key=lambda lib: DriverVersion.parse(lib.version)
    )
    if cuda:
        return cuda[-1].version, f"host {cuda[-1].path}"
    return None, "nothing found"


def audit_host(
    host: Host,
    *,
    container_roots: Sequence[str] = (),
    forks: Sequence[Fork] | None = None,
    branch_report: BranchReport | None = None,
    offline: bool = False,
    api: str | None = None,
    now: datetime | None = None,
    max_cache_age: float | None = CACHE_FRESH_SECONDS,
    engine_reads: EngineReads | None = None,
) -> AuditReport:
    """Return the audit of ``host``: kernel modules, user space, containers, verdict rows and P2P branch.

    Fork branches come from ``branch_report`` when given, else are listed for ``forks`` (the configured ones
    when None; ``offline`` uses the cache only; a cached list younger than ``max_cache_age`` seconds is used
    without going to the network). ``engine_reads``: the container engines already being asked
    (:func:`~fwman.platform.containers.start_engine_reads`), else they are asked first thing here. Never raises
    for unreadable parts of the host: they become "unknown" rows and ``unreadable`` entries.
    """
    unreadable: list[str] = []
    # the engines answer in their own processes while the host is read: `ps` now, `inspect` once it answers
    if engine_reads is None:
        engine_reads = start_engine_reads(host)
    running = read_text_noting(host, "/proc/sys/kernel/osrelease", unreadable)
    running = running.strip() if running else None
    loaded = read_loaded(host, unreadable)
    modules, bare_kernels = read_kernel_modules(host, unreadable)
    host_us = scan_userspace(host, "/")
    unreadable.extend(host_us.unreadable)
    containers = read_containers(host, container_roots, unreadable)
    # `ps` is the shorter wait; `inspect` (the longer) then runs while the CDI specs, the fork branches and the
    # user-space hold are read
    engine_reads.advance(block=True)
    cdi_specs = read_cdi_specs(host, unreadable)
    prebuilt, pinned = read_prebuilt_packages(host, unreadable)
    for _, us in containers:
        if us is not None:
            unreadable.extend(us.unreadable)

    reference, source = choose_reference(loaded, modules, running, host_us)

    if branch_report is None and reference is not None:
        if forks is None:
            forks = configured_forks(load_config(host))
        branch_report = list_branches(
            host, forks, api=api or DEFAULT_API, offline=offline, now=now, max_cache_age=max_cache_age
        )
    kernel_version = loaded.version if loaded and loaded.version else reference
    hold = read_hold(host)
    engine_problems: list[str] = []
    engine_containers = read_engine_containers(host, unreadable, engine_problems, engine_reads)

    report = AuditReport(
        reference=reference,
        reference_source=source,
        running_kernel=running,
        loaded=loaded,
        modules=modules,
        kernels_without_module=bare_kernels,
        host_libs={v: [lib.path for lib in libs] for v, libs in host_us.versions().items()},
        host_compat=[lib.path for lib in host_us.compat],
        smi_version=host_us.smi_version,
        firmware=host_us.firmware,
        firmware_dirs=host_us.firmware_dirs,
        containers=[c for c, _ in containers] + [c for c, _ in engine_containers],
        cdi_specs=cdi_specs,
        engine_problems=engine_problems,
        rows=[],
        prebuilt_modules=prebuilt,
        p2p=p2p_status(kernel_version, branch_report),
        unreadable=unreadable,
    )
    container_us = {c.name: us for c, us in containers}
    container_us.update({f"{c.kind}:{c.name}": us for c, us in engine_containers})
    for m in modules:  # a file of Ubuntu's prebuilt packages is stock, whatever fwman's manifest says
        m.package = next((p.name for p in prebuilt if m.path in p.modules), None)
    report.rows = build_rows(report, host_us, container_us)
    report.rows += prebuilt_rows(prebuilt, modules, pinned)
    report.rows += dkms_rows(host, sorted({m.kernel for m in modules if m.origin == "patched"}))
    if hold.installed or hold.held or hold.run_installer:
        report.userspace_hold = hold.to_dict()
        report.rows += hold_rows(hold)
    return report
