"""The verdict of ``fwman audit``: one :class:`Row` per component, compared with the reference version.

:func:`build_rows` calls one small function per component, in table order: the loaded module, each kernel's
module files, the host user space (libraries, nvidia-smi, GSP firmware), then each container (LXC, roots, Docker
and Podman: one row each for the last two), each CDI spec, and each container engine that could not be asked.
Pure over what :mod:`fwman.reports.audit.read`, :mod:`fwman.platform.containers` and
:mod:`fwman.platform.userspace` gathered (an engine container's row also writes its reasons and the CDI
libraries it gets into its :class:`ContainerAudit`, so ``--json`` carries them).
"""

from __future__ import annotations

from collections.abc import Sequence

from fwman.core import paths
from fwman.core.driver_version import DriverVersion
from fwman.driver.kmod.kofile import module_stem
from fwman.driver.userspace_hold import HoldStatus
from fwman.gpu.proc_version import parse_proc_version
from fwman.platform import proxmox
from fwman.platform.cdi import REGENERATE
from fwman.platform.containers import CdiSpecAudit, ContainerAudit
from fwman.platform.userspace import KEY_LIBS, UserSpace
from fwman.reports.audit.cdi_rows import cdi_spec_rows
from fwman.reports.audit.model import (
    AuditReport,
    KernelModule,
    LoadedModule,
    Row,
    Status,
    status_against,
    version_sort_key,
)

HOST = "on the host"
#: where NVIDIA's documentation writes the spec (docs.nvidia.com container-toolkit, cdi-support)
DEFAULT_CDI_SPEC = "/etc/cdi/nvidia.yaml"

#: llama.cpp's tensor split over NCCL is broken below this NCCL release (github.com/noonghunna/club-3090,
#: docs/PCIE_P2P.md, as cited in fwman issue 28); fwman reports an older NCCL as a mismatch with this fix
NCCL_MINIMUM = (2, 27, 5)


def nccl_tuple(version: str) -> tuple[int, ...] | None:
    """Return ``"2.25.1"`` as (2, 25, 1), None when it is not a dotted version."""
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return None


def build_rows(report: AuditReport, host_us: UserSpace, container_us: dict[str, UserSpace | None]) -> list[Row]:
    """Return the verdict rows of ``report`` (reference already chosen), in table order."""
    ref = report.reference
    rows = loaded_rows(report.loaded, ref, report.running_kernel)
    # the fork that carries the reference's P2P branch: the build command of a fix names it (it runs as printed)
    fork = report.p2p.forks[0] if report.p2p.version == ref and report.p2p.forks else None
    rows += [module_row(m, ref, fork) for m in report.modules]
    rows += [bare_kernel_row(kver, ref, fork) for kver in report.kernels_without_module]
    rows += unreadable_module_rows(report.unreadable)
    rows += host_userspace_rows(host_us, ref)
    rows += firmware_rows(host_us, ref, local_modules=bool(report.modules) or bool(report.kernels_without_module))
    for c in report.containers:
        if c.kind in ("docker", "podman"):
            rows += engine_container_rows(c, container_us.get(f"{c.kind}:{c.name}"), ref, report.cdi_specs)
        else:
            rows += container_rows(c, container_us.get(c.name), ref)
    rows += cdi_spec_rows(report.cdi_specs, ref)
    rows += engine_problem_rows(report.engine_problems)
    return rows


def loaded_rows(loaded: LoadedModule | None, ref: str | None, running_kernel: str | None) -> list[Row]:
    """Return the loaded module's row (and a mismatch row first when /proc and /sys disagree)."""
    if loaded is None:
        return [
            Row(
                component="loaded kernel module",
                where="/proc/driver/nvidia",
                status="info",
                detail="no NVIDIA module loaded",
            )
        ]
    rows: list[Row] = []
    if loaded.sys_version and loaded.proc_version:
        proc_v = parse_proc_version(loaded.proc_version).version
        if proc_v and proc_v != loaded.sys_version:
            rows.append(
                Row(
                    component="loaded kernel module",
                    version=proc_v,
                    where="/proc/driver/nvidia/version",
                    status="mismatch",
                    detail=f"/sys/module/nvidia/version says {loaded.sys_version}",
                )
            )
    rows.append(
        Row(
            component="loaded kernel module",
            version=loaded.version,
            where="/sys/module/nvidia" if loaded.sys_version else "/proc/driver/nvidia/version",
            status=status_against(loaded.version, ref),
            detail=f"{loaded.flavour or 'flavour unknown'}, running kernel {running_kernel or '?'}",
        )
    )
    return rows


def built_from(m: KernelModule) -> str:
    """Return what fwman built ``m`` from: its branch, or a donor fork's upstream tag and patch (the manifest's)."""
    if m.donor_patch:
        return f"upstream tag {m.branch or '?'} + patch {m.donor_patch[:12]}"
    return m.branch or "?"


def module_row(m: KernelModule, ref: str | None, fork: str | None = None) -> Row:
    """Return the row of one module file: its version, the kernel it was built for, and whether fwman put it (a
    mismatch's fix builds ``ref`` from ``fork``, the one carrying its P2P branch; None: the remembered fork)."""
    status: Status
    fix = None
    details: list[str] = []
    if m.version is None:
        status = "unknown"
        details.append(m.error or "no version tag")
    else:
        status = status_against(m.version, ref)
        if status == "mismatch" and ref is not None:
            fix = (
                f"build and install the {ref} kernel module for {m.kernel} "
                f"(P2P fork branch {DriverVersion.parse(ref).branch_name}): {build_command(m.kernel, ref, fork)}"
            )
    if m.kernel_release and m.kernel_release != m.kernel:
        status = "mismatch"
        details.append(f"built for kernel {m.kernel_release}")
        fix = fix or f"rebuild the module for {m.kernel}"
    details.append(
        {"patched": f"patched ({built_from(m)} from {m.fork or '?'})", "not-fwman": "NOT fwman's module"}.get(
            m.origin, "patched/stock unknown (no fwman manifest)"
        )
    )
    if m.package is not None:
        details.append(f"stock, from Ubuntu's {m.package}")
    if m.origin == "not-fwman" and m.package is not None:
        status = "mismatch"
        fix = fix or f"Ubuntu's {m.package} replaced fwman's module for {m.kernel}: see its row below"
    elif m.origin == "not-fwman":
        status = "mismatch"
        fix = fix or (
            f"the file depmod picks for {m.kernel} is not the one fwman installed (DKMS or a package replaced "
            "it): reinstall fwman's module for this kernel"
        )
    if m.version is not None:
        details.append(f"signed by {m.signer or '?'}" if m.signed else "unsigned")
    if m.error and m.version is not None:
        details.append(m.error)
    return Row(
        component=f"{module_stem(m.path.rsplit('/', 1)[-1]) or m.name}.ko ({m.kernel})",
        version=m.version,
        where=m.path,
        status=status,
        fix=fix,
        detail="; ".join(details),
    )


def build_command(kver: str, ref: str, fork: str | None) -> str:
    """Return the command that builds and installs the ``ref`` module for ``kver`` from ``fork`` (None: the fork an
    earlier build remembered), as it runs; the audit's text joins the rows of several kernels into one command,
    ``--kernel`` once per kernel."""
    from_fork = f" --fork {fork}" if fork else ""
    return f"`fwman modules build --kernel {kver}{from_fork} --driver-version {ref}`"


def bare_kernel_row(kver: str, ref: str | None, fork: str | None = None) -> Row:
    """Return the row of an installed kernel that has no NVIDIA module at all (its fix as :func:`module_row`'s)."""
    return Row(
        component=f"nvidia.ko ({kver})",
        where=paths.modules_dir(kver),
        status="mismatch" if ref else "unknown",
        fix=f"build and install the {ref} kernel module for {kver}: {build_command(kver, ref, fork)}" if ref else None,
        detail="no NVIDIA module for this kernel: booting it leaves the GPUs without a driver",
    )


def unreadable_module_rows(unreadable: Sequence[str]) -> list[Row]:
    """Return an "unknown" row for every module directory that could not be read."""
    return [
        Row(component="kernel modules", where=where.split(" ", 1)[0], status="unknown", detail=f"not readable: {where}")
        for where in unreadable
        if where.startswith("/lib/modules")
    ]


def host_userspace_rows(host_us: UserSpace, ref: str | None) -> list[Row]:
    """Return the host's library rows (or the row saying there are none) and nvidia-smi's row."""
    rows = _lib_rows(host_us, ref, "", HOST)
    if not host_us.libs:
        # with library places left unread (a replay that did not record them) absence is not proven
        proven = ref is not None and not any(u.startswith(("/usr/", "/lib")) for u in host_us.unreadable)
        rows.append(
            Row(
                component="driver libraries",
                where="host library directories",
                status="mismatch" if proven else "unknown",
                fix=_userspace_fix(ref, HOST),
                detail="no libcuda.so.<version> or libnvidia-*.so.<version> found",
            )
        )
    smi_status = status_against(host_us.smi_version, ref)
    rows.append(
        Row(
            component="nvidia-smi",
            version=host_us.smi_version,
            where="nvidia-smi --version",
            status=smi_status,
            fix=_userspace_fix(ref, HOST) if smi_status == "mismatch" else None,
            detail=None if host_us.smi_version else "not installed or no version printed",
        )
    )
    return rows


def firmware_rows(host_us: UserSpace, ref: str | None, *, local_modules: bool) -> list[Row]:
    """Return the GSP firmware row for ``ref`` and an info row for every other version left on disk.

    ``local_modules``: this filesystem has nvidia modules; without them the module was loaded from elsewhere
    (a VM's host, an initramfs) and its firmware may be there too, so absence here is not proof.
    """
    rows: list[Row] = []
    if ref is not None:
        present = ref in host_us.firmware
        rows.append(
            Row(
                component="GSP firmware",
                version=ref if present else None,
                where=host_us.firmware_dirs.get(ref, f"/lib/firmware/nvidia/{ref}"),
                status="match" if present else ("mismatch" if local_modules else "unknown"),
                fix=None if present else f"{_userspace_fix(ref, HOST)} (it installs the firmware)",
                detail=None
                if present
                else "not in the firmware search path"
                + ("" if local_modules else " (no nvidia module on this filesystem either: loaded from outside?)"),
            )
        )
    return rows + [
        Row(
            component="GSP firmware (other version)",
            version=version,
            where=host_us.firmware_dirs.get(version, f"/lib/firmware/nvidia/{version}"),
            status="info",
            detail="left from another driver version; not used by this one",
        )
        for version in host_us.firmware
        if version != ref
    ]


def container_rows(c: ContainerAudit, us: UserSpace | None, ref: str | None) -> list[Row]:
    """Return the rows of one container or root: its state when not read, else its libraries."""
    name, config = f"container {c.name}", proxmox.lxc_config_path(c.name)
    not_read = {
        "no-gpu": Row(
            component=name, where=config, status="info", detail="no NVIDIA device in its config: not audited"
        ),
        "hook": Row(
            component=name,
            version=ref,
            where=config,
            status="info",
            detail="libraries injected from the host by the NVIDIA hook at start",
        ),
        "not-mounted": Row(
            component=name,
            where=c.root or "",
            status="unknown",
            fix=f"start container {c.name} (or `pct mount {c.name}`) and run fwman audit again",
            detail="root filesystem not mounted",
        ),
    }
    if c.state in not_read:
        return [not_read[c.state]]
    if us is None:
        return []
    label = f"container {c.name}: " if c.kind == "lxc" else f"root {c.name}: "
    where_fix = f"inside container {c.name} (pct enter {c.name})" if c.kind == "lxc" else f"in the image at {c.root}"
    rows = _lib_rows(us, ref, label, where_fix)
    if not us.libs:
        rows.append(
            Row(
                component=f"{label}driver libraries",
                where=c.root or "",
                status="mismatch" if (c.kind == "lxc" and ref) else "unknown",
                fix=_userspace_fix(ref, where_fix),
                detail="no NVIDIA driver libraries found"
                + ("" if c.kind == "lxc" else " (a container runtime may inject them at start)"),
            )
        )
    return rows


def _userspace_fix(reference: str | None, where: str) -> str | None:
    """Return how to install the reference user space ``where``, None without a reference."""
    if reference is None:
        return None
    run = DriverVersion.parse(reference).run_file
    return f"{where}: install the user space of {reference}: sh {run} --no-kernel-modules"


def _lib_rows(us: UserSpace, reference: str | None, scope: str, fix_where: str) -> list[Row]:
    """Return the rows of one root's libraries: the key ones each, the others by version, compat as info."""
    rows: list[Row] = []
    by_version = us.versions()
    for key in KEY_LIBS:
        for lib in (lib for lib in us.libs if lib.name == key):
            status = status_against(lib.version, reference)
            rows.append(
                Row(
                    component=f"{scope}{key}.so",
                    version=lib.version,
                    where=lib.path,
                    status=status,
                    fix=_userspace_fix(reference, fix_where) if status == "mismatch" else None,
                )
            )
    for version, libs in sorted(by_version.items(), key=lambda kv: DriverVersion.parse(kv[0])):
        others = [lib for lib in libs if lib.name not in KEY_LIBS]
        if not others:
            continue
        status = status_against(version, reference)
        rows.append(
            Row(
                component=f"{scope}other driver libraries ({len(others)})",
                version=version,
                where=", ".join(sorted({lib.path.rsplit("/", 1)[0] for lib in others})),
                status=status,
                fix=_userspace_fix(reference, fix_where) if status == "mismatch" else None,
                detail=", ".join(sorted({lib.name for lib in others}))[:200],
            )
        )
    return rows + [
        Row(
            component=f"{scope}CUDA compat {lib.name}.so",
            version=lib.version,
            where=lib.path,
            status="info",
            detail="CUDA forward-compatibility library, not the driver: used only by programs that put its "
            "directory on their library path",
        )
        for lib in us.compat
    ]


def hold_rows(hold: HoldStatus) -> list[Row]:
    """Return the rows of fwman's user-space hold: one per pending NVIDIA user-space upgrade (a warning that
    an unattended upgrade would break NVML), and one saying whether the hold is in place."""
    rows = [
        Row(
            component=f"apt upgrade pending: {name}",
            version=new,
            where=f"installed {installed}",
            status="info",
            fix=None if hold.held else "fwman userspace hold",
            detail="WARNING: upgrading the user space alone breaks NVML (Driver/library version mismatch)",
        )
        for name, (installed, new) in sorted((hold.pending or {}).items())
    ]
    if hold.installed:
        held = f"held since {hold.record.at}" if hold.record else "not held"
        rows.append(
            Row(
                component="user-space apt hold",
                where=f"{len(hold.installed)} NVIDIA packages, {held}",
                status="info",
                fix=None if hold.held else "fwman userspace hold",
                detail="; ".join(hold.warnings()) or None,
            )
        )
    elif hold.run_installer:
        rows.append(
            Row(
                component="user-space apt hold",
                where="NVIDIA .run installer: nothing to pin",
                status="info",
                detail=hold.warnings()[-1] if hold.warnings() else None,
            )
        )
    return rows


def engine_problem_rows(problems: Sequence[str]) -> list[Row]:
    """Return one row per container engine that could not be asked (not installed, not running, bad answer)."""
    rows: list[Row] = []
    for engine, _, why in (line.partition(": ") for line in problems):
        component = f"container engine {engine}"
        if why == "not installed":
            detail = "not installed: no containers of its own to audit"
            rows.append(Row(component=component, where=f"`{engine}` on PATH", status="info", detail=detail))
        else:
            rows.append(
                Row(
                    component=component,
                    where=f"{engine} ps -a / inspect",
                    status="unknown",
                    fix=f"start the {engine} service (`systemctl start {engine}`), or run fwman as a user that may "
                    f"reach its socket, and run fwman audit again",
                    detail=f"its containers could not be read: {why}",
                )
            )
    return rows


def engine_container_rows(
    c: ContainerAudit, us: UserSpace | None, ref: str | None, specs: Sequence[CdiSpecAudit]
) -> list[Row]:
    """Return the one row of a Docker/Podman container: which driver user space it gets (CDI-injected, hook-
    injected, or shipped in its image), its NCCL, and the first fix; every reason is in ``c.problems``."""
    component = f"{c.kind} container {c.name}"
    where = f"{c.kind} inspect {c.name}"
    if c.state == "no-gpu":
        return [
            Row(
                component=component,
                where=where,
                status="info",
                detail="no GPU request (no nvidia runtime, --gpus, CDI device or /dev/nvidia*): not audited",
            )
        ]
    if c.state == "gone":
        return [
            Row(
                component=component,
                where=c.root or where,
                status="unknown",
                fix=f"its filesystem is gone: `{c.kind} rm {c.name}` and create it again from {c.image or 'its image'}",
                detail=f"{c.engine_state or '?'}; the engine names no filesystem fwman can read on disk",
            )
        ]
    problems: list[tuple[str, str | None]] = []
    notes: list[str] = []
    versions: set[str] = set()
    for device in c.cdi_devices:
        spec = next((s for s in specs if device in s.devices), None)
        if spec is None:
            problems.append(
                (f"no CDI spec defines {device}", f"write NVIDIA's spec: {REGENERATE.format(path=DEFAULT_CDI_SPEC)}")
            )
            continue
        for version, host_paths in spec.libs.items():
            c.injected.setdefault(version, []).extend(p for p in host_paths if p not in c.injected.get(version, []))
            versions.add(version)
        regenerate = REGENERATE.format(path=spec.path)
        stale = sorted(v for v in spec.libs if ref is not None and v != ref)
        if stale:
            problems.append(
                (
                    f"CDI spec {spec.path} injects the {', '.join(stale)} libraries, the driver is {ref}",
                    f"{regenerate}, then restart container {c.name}",
                )
            )
        if spec.missing:
            problems.append(
                (
                    f"CDI spec {spec.path} names host paths that are gone ({spec.missing[0]})",
                    f"{regenerate}, then restart container {c.name}",
                )
            )
    if c.legacy_hook:
        notes.append("NVIDIA's runtime hook mounts the host's libraries at start")
        if ref is not None:
            versions.add(ref)
    for lib in [lib for lib in (us.libs if us else []) if lib.name in KEY_LIBS]:  # the image's own libcuda, NVML
        versions.add(lib.version)
        if ref is not None and lib.version != ref:
            problems.append(
                (
                    f"the image ships its own {lib.name}.so {lib.version} ({lib.path})",
                    f"rebuild {c.image or 'the image'} without the driver's libraries (NVIDIA's toolkit mounts the "
                    f"host's {ref}) and create container {c.name} again",
                )
            )
    for version, where_nccl in sorted(c.nccl.items()):
        if (parsed := nccl_tuple(version)) is not None and parsed < NCCL_MINIMUM:
            minimum = ".".join(str(p) for p in NCCL_MINIMUM)
            problems.append(
                (
                    f"libnccl {version} ({where_nccl[0]}) is older than {minimum}",
                    f"use an image whose NCCL is {minimum} or newer (llama.cpp's tensor split needs it)",
                )
            )
        else:
            notes.append(f"libnccl {version}")
    if c.compat:
        notes.append(f"CUDA forward-compatibility libraries at {c.compat[0]} (data-centre GPUs only)")
    if c.env:
        notes.append(" ".join(f"{k}={v}" for k, v in sorted(c.env.items())))
    c.problems = [p for p, _ in problems]
    status: Status
    if problems:
        status = "mismatch"
    elif ref is None or not versions:
        status = "unknown"
        if not versions:
            notes.insert(0, "no driver library found in its image, its CDI spec or a runtime hook")
    else:
        status = "match" if versions == {ref} else "mismatch"
    shown = ", ".join(sorted(versions, key=version_sort_key)) or None
    return [
        Row(
            component=component,
            version=shown,
            where=where,
            status=status,
            fix=problems[0][1] if problems else None,
            detail="; ".join([*(p for p, _ in problems), f"{c.engine_state or '?'}", *c.gpu, *notes])[:600],
        )
    ]
