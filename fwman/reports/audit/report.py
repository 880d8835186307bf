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
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.findings import Finding, Severity
from fwman.driver.build.manifest import Manifest, load_manifest, manifest_path
from fwman.driver.forks import BranchReport, Fork, human_age, list_branches
from fwman.driver.kernels import installed_kernels
from fwman.driver.kmod.depmod import normalize, resolve_all
from fwman.driver.kmod.kofile import module_bytes, module_stem, read_module
from fwman.driver.versions import DriverVersion
from fwman.host.base import Host
from fwman.reports.audit.userspace import KEY_LIBS, DriverLib, UserSpace, scan_userspace

Status = Literal["match", "mismatch", "unknown", "info"]
#: audit trusts a branch list younger than this without going to the network (`fwman driver branches` refreshes)
CACHE_FRESH_SECONDS = 6 * 3600.0
#: lines of a Proxmox container config that give it an NVIDIA device
_GPU_LINE = re.compile(
    r"^(?:lxc\.cgroup2?\.devices\.allow:\s*c\s+195:|lxc\.mount\.entry:\s*/dev/nvidia|dev\d+:\s*/dev/nvidia)"
)
_NVIDIA_HOOK = re.compile(r"^lxc\.hook\.\w+:.*nvidia", re.IGNORECASE)


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
    error: str | None = None


class ContainerAudit(BaseModel):
    """One container (Proxmox LXC or a root given with --container-root)."""

    name: str
    kind: str  # "lxc" | "root"
    root: str | None
    state: str  # "read", "not-mounted", "no-gpu", "hook" (libraries injected by the NVIDIA hook at start)
    versions: dict[str, list[str]] = Field(default_factory=dict)  # version -> library paths
    compat: list[str] = Field(default_factory=list)


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
    p2p: P2PBranch
    unreadable: list[str] = Field(default_factory=list)

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


# -- pure parsers -------------------------------------------------------------------------------------------
def parse_proc_version(text: str) -> tuple[str | None, str | None]:
    """Return (version, flavour) from ``/proc/driver/nvidia/version``; flavour "open" or "proprietary".

    Returns (None, None) for text without an ``NVRM version:`` line. Never raises.
    """
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            flavour = "open" if "Open Kernel Module" in line else "proprietary" if "Kernel Module" in line else None
            version = DriverVersion.search(line.split(":", 1)[1])
            return (str(version) if version else None), flavour
    return None, None


def lxc_uses_gpu(conf: str) -> tuple[bool, bool]:
    """Return (has an NVIDIA device, has an NVIDIA hook) for a Proxmox container config (current section only)."""
    device = hook = False
    for line in conf.splitlines():
        if line.startswith("["):  # snapshot sections follow; they describe older states
            break
        if _GPU_LINE.match(line.strip()):
            device = True
        if _NVIDIA_HOOK.match(line.strip()):
            hook = True
    return device, hook


# -- reading --------------------------------------------------------------------------------------------------
def _read(host: Host, path: str, unreadable: list[str]) -> str | None:
    try:
        if not host.exists(path):
            return None
        return host.read_text(path)
    except NotRecordedError:
        unreadable.append(f"{path} (not recorded)")
    except MissingError:
        unreadable.append(path)
    return None


def read_loaded(host: Host, unreadable: list[str]) -> LoadedModule | None:
    """Return the loaded module (None when neither /proc nor /sys shows one)."""
    proc = _read(host, "/proc/driver/nvidia/version", unreadable)
    sysv = _read(host, "/sys/module/nvidia/version", unreadable)
    if proc is None and sysv is None:
        return None
    proc_version, flavour = parse_proc_version(proc) if proc else (None, None)
    sys_version = sysv.strip() if sysv else None
    return LoadedModule(
        version=sys_version or proc_version,
        flavour=flavour,
        proc_version=proc.splitlines()[0] if proc and proc.strip() else None,
        sys_version=sys_version,
    )


def _is_nvidia(name: str) -> bool:
    return name == "nvidia" or name.startswith("nvidia_")  # not nvidiafb (the in-tree framebuffer driver)


def read_kernel_modules(host: Host, unreadable: list[str]) -> tuple[list[KernelModule], list[str]]:
    """Return (every nvidia* module depmod resolves for every kernel, read and identified; the installed
    kernels that have no nvidia module at all).

    A module a snapshot recorded by size only (capture keeps files over 16 MiB that way) gets its row's error.
    """
    out: list[KernelModule] = []
    bare: list[str] = []
    try:
        kernels = installed_kernels(host)
    except NotRecordedError:
        unreadable.append("/lib/modules (not recorded)")
        return out, bare
    for kver in kernels:
        try:
            resolved = resolve_all(host, kver)
        except NotRecordedError as e:
            unreadable.append(f"/lib/modules/{kver} ({e.message})")
            continue
        manifest, manifest_error = _manifest(host, kver)
        names = sorted(n for n in resolved if _is_nvidia(n))
        if not names and _kernel_installed(host, kver):
            bare.append(kver)
        for name in names:
            out.append(_read_one(host, kver, name, resolved[name], manifest, manifest_error))
    return out, bare


def _kernel_installed(host: Host, kver: str) -> bool:
    """Return True when ``kver`` is a bootable kernel (its image or in-tree modules), not just headers."""
    try:
        return host.exists(f"/boot/vmlinuz-{kver}") or host.is_dir(f"/lib/modules/{kver}/kernel")
    except NotRecordedError:
        return False


def _manifest(host: Host, kver: str) -> tuple[Manifest | None, str | None]:
    path = manifest_path(kver)
    try:
        return load_manifest(host, kver), None
    except (MissingError, NotRecordedError, ParseError) as e:
        return None, f"manifest {path} unreadable: {e.message}"


def _read_one(
    host: Host,
    kver: str,
    name: str,
    path: str,
    manifest: Manifest | None,
    manifest_error: str | None,
) -> KernelModule:
    entry = KernelModule(kernel=kver, name=name, path=path)
    try:
        raw = host.read_bytes(path)
        info = read_module(module_bytes(host, path) if path.endswith(".zst") else _plain(raw, path))
    except (FwmanError, ParseError) as e:
        entry.error = e.message
        return entry
    entry.version = info.version
    entry.vermagic = info.vermagic
    entry.kernel_release = info.kernel_release
    entry.srcversion = info.srcversion
    entry.signed = info.signature is not None
    entry.signer = info.signature.signer if info.signature else None
    if manifest_error:
        entry.error = manifest_error
    if manifest is not None:
        recorded = next((e for n, e in manifest.modules.items() if normalize(n) == name), None)
        if recorded is not None and recorded.sha256 == hashlib.sha256(raw).hexdigest():
            entry.origin = "patched"
            entry.fork, entry.branch, entry.commit = manifest.fork, manifest.branch, manifest.commit
        else:
            entry.origin = "not-fwman"
    return entry


def _plain(raw: bytes, path: str) -> bytes:
    from fwman.driver.kmod.kofile import decompress

    return decompress(raw, path)


def read_containers(
    host: Host, roots: Sequence[str], unreadable: list[str]
) -> list[tuple[ContainerAudit, UserSpace | None]]:
    """Return the Proxmox LXC containers (from /etc/pve/lxc) and the given roots, each with its user space."""
    out: list[tuple[ContainerAudit, UserSpace | None]] = []
    names: list[str] = []
    try:
        if host.is_dir(paths.PVE_LXC_DIR):
            names = [n for n in host.listdir(paths.PVE_LXC_DIR) if n.endswith(".conf")]
    except NotRecordedError:
        unreadable.append(f"{paths.PVE_LXC_DIR} (not recorded)")
    except MissingError:
        unreadable.append(paths.PVE_LXC_DIR)
    for conf_name in sorted(names, key=lambda n: (len(n), n)):
        ctid = conf_name[: -len(".conf")]
        conf = _read(host, f"{paths.PVE_LXC_DIR}/{conf_name}", unreadable) or ""
        device, hook = lxc_uses_gpu(conf)
        rootfs = f"/var/lib/lxc/{ctid}/rootfs"
        if not device and not hook:
            out.append((ContainerAudit(name=ctid, kind="lxc", root=None, state="no-gpu"), None))
            continue
        if hook:
            out.append((ContainerAudit(name=ctid, kind="lxc", root=None, state="hook"), None))
            continue
        mounted = False
        try:
            mounted = host.is_dir(rootfs) and bool(host.listdir(rootfs))
        except (MissingError, NotRecordedError):
            mounted = False
        if not mounted:
            out.append((ContainerAudit(name=ctid, kind="lxc", root=rootfs, state="not-mounted"), None))
            continue
        out.append(_scan_container(host, ctid, "lxc", rootfs))
    for root in roots:
        out.append(_scan_container(host, root, "root", root.rstrip("/") or "/"))
    return out


def _scan_container(host: Host, name: str, kind: str, root: str) -> tuple[ContainerAudit, UserSpace]:
    us = scan_userspace(host, root, run_smi=False)
    audit = ContainerAudit(
        name=name,
        kind=kind,
        root=root,
        state="read",
        versions={v: [lib.path for lib in libs] for v, libs in sorted(us.versions().items())},
        compat=[lib.path for lib in us.compat],
    )
    return audit, us


# -- the verdict ----------------------------------------------------------------------------------------------
def _status(version: str | None, reference: str | None) -> Status:
    if version is None or reference is None:
        return "unknown"
    return "match" if version == reference else "mismatch"


def _userspace_fix(reference: str | None, where: str) -> str | None:
    if reference is None:
        return None
    run = DriverVersion.parse(reference).run_file
    return f"{where}: install the user space of {reference}: sh {run} --no-kernel-modules"


def _lib_rows(us: UserSpace, reference: str | None, scope: str, fix_where: str) -> list[Row]:
    rows: list[Row] = []
    by_version = us.versions()
    for key in KEY_LIBS:
        for lib in (lib for lib in us.libs if lib.name == key):
            status = _status(lib.version, reference)
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
        status = _status(version, reference)
        rows.append(
            Row(
                component=f"{scope}other driver libraries ({len(others)})",
                version=version,
                where=_common_dir(others),
                status=status,
                fix=_userspace_fix(reference, fix_where) if status == "mismatch" else None,
                detail=", ".join(sorted({lib.name for lib in others}))[:200],
            )
        )
    for lib in us.compat:
        rows.append(
            Row(
                component=f"{scope}CUDA compat {lib.name}.so",
                version=lib.version,
                where=lib.path,
                status="info",
                detail="CUDA forward-compatibility library, not the driver: used only by programs that put its "
                "directory on their library path",
            )
        )
    return rows


def _common_dir(libs: Sequence[DriverLib]) -> str:
    dirs = sorted({lib.path.rsplit("/", 1)[0] for lib in libs})
    return dirs[0] if len(dirs) == 1 else ", ".join(dirs)


def build_rows(report: AuditReport, host_us: UserSpace, container_us: dict[str, UserSpace | None]) -> list[Row]:
    """Return the verdict rows of ``report`` (reference already chosen)."""
    ref = report.reference
    rows: list[Row] = []
    loaded = report.loaded
    if loaded is not None:
        flavour = loaded.flavour or "flavour unknown"
        if loaded.sys_version and loaded.proc_version:
            proc_v, _ = parse_proc_version(loaded.proc_version)
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
                status=_status(loaded.version, ref),
                detail=f"{flavour}, running kernel {report.running_kernel or '?'}",
            )
        )
    else:
        rows.append(
            Row(
                component="loaded kernel module",
                version=None,
                where="/proc/driver/nvidia",
                status="info",
                detail="no NVIDIA module loaded",
            )
        )
    for m in report.modules:
        status: Status
        fix = None
        details: list[str] = []
        if m.version is None:
            status = "unknown"
            details.append(m.error or "no version tag")
        else:
            status = _status(m.version, ref)
            if status == "mismatch" and ref is not None:
                fix = (
                    f"build and install the {ref} kernel module for {m.kernel} "
                    f"(P2P fork branch {DriverVersion.parse(ref).branch_name})"
                )
        if m.kernel_release and m.kernel_release != m.kernel:
            status = "mismatch"
            details.append(f"built for kernel {m.kernel_release}")
            fix = fix or f"rebuild the module for {m.kernel}"
        details.append(
            {"patched": f"patched ({m.branch or '?'} from {m.fork or '?'})", "not-fwman": "NOT fwman's module"}.get(
                m.origin, "patched/stock unknown (no fwman manifest)"
            )
        )
        if m.origin == "not-fwman":
            status = "mismatch"
            fix = fix or (
                f"the file depmod picks for {m.kernel} is not the one fwman installed (DKMS or a package replaced "
                "it): reinstall fwman's module for this kernel"
            )
        if m.version is not None:
            details.append(f"signed by {m.signer or '?'}" if m.signed else "unsigned")
        if m.error and m.version is not None:
            details.append(m.error)
        rows.append(
            Row(
                component=f"{module_stem(m.path.rsplit('/', 1)[-1]) or m.name}.ko ({m.kernel})",
                version=m.version,
                where=m.path,
                status=status,
                fix=fix,
                detail="; ".join(details),
            )
        )
    for kver in report.kernels_without_module:
        rows.append(
            Row(
                component=f"nvidia.ko ({kver})",
                version=None,
                where=f"/lib/modules/{kver}",
                status="mismatch" if ref else "unknown",
                fix=f"build and install the {ref} kernel module for {kver}" if ref else None,
                detail="no NVIDIA module for this kernel: booting it leaves the GPUs without a driver",
            )
        )
    for where in (u for u in report.unreadable if u.startswith("/lib/modules")):
        rows.append(
            Row(
                component="kernel modules",
                version=None,
                where=where.split(" ", 1)[0],
                status="unknown",
                detail=f"not readable: {where}",
            )
        )
    rows.extend(_lib_rows(host_us, ref, "", "on the host"))
    if not host_us.libs:
        # with library places left unread (a replay that did not record them) absence is not proven
        proven = ref is not None and not any(u.startswith(("/usr/", "/lib")) for u in host_us.unreadable)
        rows.append(
            Row(
                component="driver libraries",
                version=None,
                where="host library directories",
                status="mismatch" if proven else "unknown",
                fix=_userspace_fix(ref, "on the host"),
                detail="no libcuda.so.<version> or libnvidia-*.so.<version> found",
            )
        )
    rows.append(
        Row(
            component="nvidia-smi",
            version=host_us.smi_version,
            where="nvidia-smi --version",
            status=_status(host_us.smi_version, ref),
            fix=_userspace_fix(ref, "on the host") if _status(host_us.smi_version, ref) == "mismatch" else None,
            detail=None if host_us.smi_version else "not installed or no version printed",
        )
    )
    if ref is not None:
        present = ref in host_us.firmware
        # without nvidia modules on this filesystem the module was loaded from elsewhere (a VM's host, an
        # initramfs): its firmware may be there too, so absence here is not proof
        local_modules = bool(report.modules) or bool(report.kernels_without_module)
        rows.append(
            Row(
                component="GSP firmware",
                version=ref if present else None,
                where=host_us.firmware_dirs.get(ref, f"/lib/firmware/nvidia/{ref}"),
                status="match" if present else ("mismatch" if local_modules else "unknown"),
                fix=None if present else f"{_userspace_fix(ref, 'on the host')} (it installs the firmware)",
                detail=None
                if present
                else "not in the firmware search path"
                + ("" if local_modules else " (no nvidia module on this filesystem either: loaded from outside?)"),
            )
        )
    for version in host_us.firmware:
        if version != ref:
            rows.append(
                Row(
                    component="GSP firmware (other version)",
                    version=version,
                    where=host_us.firmware_dirs.get(version, f"/lib/firmware/nvidia/{version}"),
                    status="info",
                    detail="left from another driver version; not used by this one",
                )
            )
    for c in report.containers:
        label = f"container {c.name}: " if c.kind == "lxc" else f"root {c.name}: "
        where_fix = (
            f"inside container {c.name} (pct enter {c.name})" if c.kind == "lxc" else f"in the image at {c.root}"
        )
        if c.state == "no-gpu":
            rows.append(
                Row(
                    component=f"container {c.name}",
                    version=None,
                    where=f"{paths.PVE_LXC_DIR}/{c.name}.conf",
                    status="info",
                    detail="no NVIDIA device in its config: not audited",
                )
            )
        elif c.state == "hook":
            rows.append(
                Row(
                    component=f"container {c.name}",
                    version=ref,
                    where=f"{paths.PVE_LXC_DIR}/{c.name}.conf",
                    status="info",
                    detail="libraries injected from the host by the NVIDIA hook at start",
                )
            )
        elif c.state == "not-mounted":
            rows.append(
                Row(
                    component=f"container {c.name}",
                    version=None,
                    where=c.root or "",
                    status="unknown",
                    fix=f"start container {c.name} (or `pct mount {c.name}`) and run fwman audit again",
                    detail="root filesystem not mounted",
                )
            )
        else:
            us = container_us.get(c.name)
            if us is None:
                continue
            rows.extend(_lib_rows(us, ref, label, where_fix))
            if not us.libs:
                rows.append(
                    Row(
                        component=f"{label}driver libraries",
                        version=None,
                        where=c.root or "",
                        status="mismatch" if (c.kind == "lxc" and ref) else "unknown",
                        fix=_userspace_fix(ref, where_fix),
                        detail="no NVIDIA driver libraries found"
                        + ("" if c.kind == "lxc" else " (a container runtime may inject them at start)"),
                    )
                )
    return rows


def p2p_status(version: str | None, report: BranchReport | None) -> P2PBranch:
    """Return whether some fork carries ``version``-p2p according to ``report`` (unknown without a listing)."""
    if version is None:
        return P2PBranch(version=None, status="unknown", note="no kernel module version to look up")
    if report is None or not report.any_available:
        return P2PBranch(version=version, status="unknown", note="fork branches not listed (offline, no cache)")
    target = DriverVersion.parse(version)
    carriers = report.carrying(target)
    sources = sorted({"cache" if f.source == "cache" else "live" for f in report.forks if f.available})
    ages = [f.age_seconds(report.now) for f in report.forks if f.source == "cache"]
    oldest = max((a for a in ages if a is not None), default=None)
    if carriers:
        return P2PBranch(
            version=version, status="available", forks=carriers, source="+".join(sources), oldest_age_seconds=oldest
        )
    below, above = report.nearest(target)
    return P2PBranch(
        version=version,
        status="none" if report.complete else "unknown",
        nearest_below=str(below) if below else None,
        nearest_above=str(above) if above else None,
        source="+".join(sources),
        oldest_age_seconds=oldest,
        note=None if report.complete else "some forks could not be listed",
    )


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
) -> AuditReport:
    """Return the audit of ``host``: kernel modules, user space, containers, verdict rows and P2P branch.

    Fork branches come from ``branch_report`` when given, else are listed for ``forks`` (the configured ones
    when None; ``offline`` uses the cache only; a cached list younger than ``max_cache_age`` seconds is used
    without going to the network). Never raises for unreadable parts of the host: they become
    "unknown" rows and ``unreadable`` entries.
    """
    unreadable: list[str] = []
    running = _read(host, "/proc/sys/kernel/osrelease", unreadable)
    running = running.strip() if running else None
    loaded = read_loaded(host, unreadable)
    modules, bare_kernels = read_kernel_modules(host, unreadable)
    host_us = scan_userspace(host, "/")
    unreadable.extend(host_us.unreadable)
    containers = read_containers(host, container_roots, unreadable)
    for _, us in containers:
        if us is not None:
            unreadable.extend(us.unreadable)

    reference, source = None, "nothing found"
    if loaded is not None and loaded.version:
        reference, source = loaded.version, "loaded kernel module"
    else:
        running_nvidia = next((m for m in modules if m.kernel == running and m.name == "nvidia" and m.version), None)
        if running_nvidia is not None:
            reference, source = running_nvidia.version, f"nvidia.ko for the running kernel {running}"
        else:
            cuda = sorted(
                (lib for lib in host_us.libs if lib.name == "libcuda"), key=lambda lib: DriverVersion.parse(lib.version)
            )
            if cuda:
                reference, source = cuda[-1].version, f"host {cuda[-1].path}"

    if branch_report is None and reference is not None:
        from fwman.core.config import load_config
        from fwman.driver.forks import DEFAULT_API, configured_forks

        if forks is None:
            forks = configured_forks(load_config(host))
        branch_report = list_branches(
            host, forks, api=api or DEFAULT_API, offline=offline, now=now, max_cache_age=max_cache_age
        )
    kernel_version = loaded.version if loaded and loaded.version else reference

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
        containers=[c for c, _ in containers],
        rows=[],
        p2p=p2p_status(kernel_version, branch_report),
        unreadable=unreadable,
    )
    report.rows = build_rows(report, host_us, {c.name: us for c, us in containers})
    return report


def p2p_line(p2p: P2PBranch) -> str:
    """Return the one-line P2P branch answer for people."""
    if p2p.version is None:
        return "P2P branch: unknown (no driver version found)"
    age = f", cached {human_age(p2p.oldest_age_seconds)} ago" if p2p.oldest_age_seconds is not None else ""
    if p2p.status == "available":
        return f"P2P branch {p2p.version}-p2p: carried by {', '.join(p2p.forks)} ({p2p.source}{age})"
    if p2p.status == "none":
        near = " and ".join(v for v in (p2p.nearest_below, p2p.nearest_above) if v) or "none"
        return (
            f"P2P branch {p2p.version}-p2p: no fork carries it; nearest versions with a branch: {near} "
            f"(moving means host and every container to that exact version; see fwman driver branches --version "
            f"{p2p.version}){age}"
        )
    return f"P2P branch {p2p.version}-p2p: unknown ({p2p.note or 'not listed'})"
