"""``fwman capture``: a read-only recording of an NVIDIA host into a snapshot directory. The fixed list from
../shared/docs/host-state.md is read through a RecordingHost, then fwman's own read-only commands (scan, audit,
doctor, modules/hooks/dkms status, upgrade --dry-run) run against it: so a replay of those commands finds everything
it needs."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.text import Out, Result, say
from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, UsageError
from fwman.core.jsonout import fields_of, meta
from fwman.gpu.inventory import nvidia_functions, scan_cards
from fwman.host.base import Host
from fwman.host.capped import MAX_TEXT_FILE, read_capped
from fwman.host.recording import RecordingHost, SnapshotWriter
from fwman.host.snapshot_check import SnapshotFormatError, check_snapshot
from fwman.platform.cdi import MAX_PROC_DEVICES

#: sysfs attributes recorded for every NVIDIA function and every bridge above it
PCI_ATTRIBUTES = (
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "class",
    "revision",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "numa_node",
    "local_cpulist",
    "resource",
    "config",
    "enable",
    "boot_vga",
)
PCI_LINKS = ("driver", "iommu_group")
FILES = (
    "/proc/modules",
    "/proc/cmdline",
    # where the command line is set (doctor's IOMMU fix names the file and the line)
    "/etc/default/grub",
    "/etc/kernel/cmdline",
    "/etc/kernel/proxmox-boot-uuids",
    "/proc/version",
    "/proc/sys/kernel/osrelease",
    "/etc/os-release",
    "/sys/module/nvidia/version",
    "/sys/module/nvidia/srcversion",
    "/sys/module/nvidia/initstate",
    "/sys/module/nvidia_uvm/version",
    "/sys/module/nvidia_peermem/version",
    "/proc/driver/nvidia/params",
    "/proc/driver/nvidia/registry",
    # whether this is a VM guest (fwman.platform.virt): CPU flags, DMI strings, Xen's hypervisor type
    "/proc/cpuinfo",
    "/sys/class/dmi/id/product_name",
    "/sys/class/dmi/id/sys_vendor",
    "/sys/class/dmi/id/board_vendor",
    "/sys/class/dmi/id/bios_vendor",
    "/sys/hypervisor/type",
)
COMMANDS = (
    ("uname", "-r"),
    ("nvidia-smi", "-q", "-x"),
    ("nvidia-smi", "topo", "-m"),
    ("nvidia-smi", "topo", "-p2p", "r"),
    ("nvidia-smi", "topo", "-p2p", "w"),
    ("nvidia-smi", "--version"),
    ("dkms", "status"),
    ("lspci", "-vvv", "-nn"),
    ("systemd-detect-virt", "--vm"),
)
TOOLS = (
    "nvidia-smi",
    "nvflash",
    "dkms",
    "lspci",
    "git",
    "modinfo",
    "depmod",
    "proxmox-boot-tool",
    "grub-editenv",
    "bootctl",
    "mokutil",
    "uname",
    "systemd-detect-virt",
)
LISTINGS = (
    "/sys/class/iommu",
    "/sys/kernel/iommu_groups",
    paths.MODULES_ROOT,
    "/lib/firmware/nvidia",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local",
    paths.PVE_LXC_DIR,
    paths.PVE_QEMU_DIR,
    "/etc/depmod.d",
    "/lib/depmod.d",
    "/etc/kernel/postinst.d",
    "/etc/kernel/postrm.d",
    "/etc/kernel/install.d",
    "/var/lib/dkms",
    # driver folders of containers/VMs that mount the host driver (e.g. /usr/local/nvidia)
    "/usr/local/nvidia",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/local/nvidia/bin",
    "/usr/local/nvidia/firmware/nvidia",
    "/usr/local/nvidia/modules",
)
#: the most files of one kind (kernel configurations, the .conf files of one modprobe directory) a capture reads:
#: a host has a handful; a directory someone filled with thousands is recorded by its listing only
MAX_FILES_OF_A_KIND = 256
#: the prefix of a kernel's configuration file in /boot (paths.kernel_config)
CONFIG_PREFIX = "config-"
#: read-only commands run once against the recording host (output discarded), so that replaying them finds
#: every path and command they read: the simplest guarantee that capture and the commands never drift apart
REPLAYABLE_COMMANDS = (
    ("scan", "--json"),
    ("audit", "--offline", "--json"),
    ("doctor", "--json"),
    ("modules", "status", "--json"),
    ("modules", "check-boot", "--json"),
    ("hooks", "status", "--json"),
    ("userspace", "status", "--json"),
    ("dkms", "status", "--json"),
    ("upgrade", "--dry-run", "--json"),
    ("upgrade", "--check", "--json"),
    ("backup", "list", "--json"),
    ("backup", "verify", "--json"),
    ("flash", "status", "--json"),
    ("flash", "history", "--json"),
    ("driver", "branches", "--offline", "--json"),
)


@dataclass
class CaptureReport:
    """What a capture recorded, and what it could not."""

    gpus: int = field(default=0, metadata=meta(key="gpu_count"))
    files: int = field(default=0, metadata=meta(key="file_count"))
    commands: int = field(default=0, metadata=meta(key="command_count"))
    missing_tools: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _try(report: CaptureReport, what: str, fn: Callable[..., object], *args: object) -> object:
    """Call ``fn(*args)``; record a failure in ``report`` instead of stopping the capture. Return its result."""
    try:
        return fn(*args)
    except (FwmanError, OSError) as e:
        report.problems.append(f"{what}: {getattr(e, 'message', e)}")
        return None


def bridges_above(host: Host, bus: str) -> list[str]:
    """Return the sysfs directories of the PCI bridges above function ``bus`` (nearest first)."""
    real = host.realpath(f"{paths.PCI_DEVICES_DIR}/{bus}")
    parts = real.split("/")
    result = []
    for i in range(len(parts) - 1, 3, -1):
        parent = "/".join(parts[:i])
        name = posixpath.basename(parent)
        if ":" in name and "." in name and not name.startswith("pci"):
            result.append(parent)
    return result


def _walk(host: Host, directory: str, depth: int = 3) -> None:
    """Read every file under ``directory`` (recording it), up to ``depth`` levels."""
    for name in host.listdir(directory):
        path = f"{directory}/{name}"
        if host.is_dir(path):
            if depth > 0:
                _walk(host, path, depth - 1)
        else:
            with contextlib.suppress(MissingError):
                host.read_bytes(path)


def capture(
    host: Host,
    writer: SnapshotWriter,
    *,
    run_fwman: Callable[[Host, list[str]], str | None],
    progress: Callable[[str], None] = lambda s: None,
) -> CaptureReport:
    """Record ``host`` into ``writer`` and return a report. Never writes to the host.

    ``run_fwman(host, argv)`` runs one fwman command against the recording (the CLI passes its in-process
    runner: this layer does not import the CLI) and returns None, or what broke it unexpectedly.
    """
    rec = RecordingHost(host, writer)
    report = CaptureReport()
    progress("GPU inventory")
    cards = _try(report, "inventory", scan_cards, rec)
    report.gpus = len(cards) if isinstance(cards, list) else 0
    progress("PCI functions and bridges")
    for bus in nvidia_functions(rec):
        bridges = _try(report, f"bridges of {bus}", bridges_above, rec, bus)
        for d in [f"{paths.PCI_DEVICES_DIR}/{bus}", *(bridges if isinstance(bridges, list) else [])]:
            for attr in PCI_ATTRIBUTES:
                if rec.exists(f"{d}/{attr}"):
                    _try(report, f"{d}/{attr}", rec.read_bytes, f"{d}/{attr}")
            for link in PCI_LINKS:
                if rec.exists(f"{d}/{link}"):
                    _try(report, f"{d}/{link}", rec.readlink, f"{d}/{link}")
            _try(report, f"{d} resizable BARs", _read_resize, rec, d)
            _try(report, f"{d} iommu group", _read_iommu_group, rec, d)
    progress("driver state")
    if rec.is_dir("/proc/driver/nvidia"):
        _try(report, "/proc/driver/nvidia", _walk, rec, "/proc/driver/nvidia")
    for path in FILES:
        if rec.exists(path):
            _try(report, path, rec.read_bytes, path)
    for path in LISTINGS:
        if rec.is_dir(path):
            _try(report, path, rec.listdir, path)
    progress("device numbers, kernel configurations, modprobe files")
    _try(report, "device numbers, kernel configurations, modprobe files", _read_kernel_state, rec, report)
    if rec.is_dir("/usr/local"):
        for name in rec.listdir("/usr/local"):
            if name.startswith("cuda") and rec.is_dir(f"/usr/local/{name}/compat"):
                _try(report, f"/usr/local/{name}/compat", rec.listdir, f"/usr/local/{name}/compat")
    progress("tools")
    for tool in TOOLS:
        if rec.which(tool) is None:
            report.missing_tools.append(tool)
    for argv in COMMANDS:
        progress(" ".join(argv))
        _try(report, " ".join(argv), rec.run, list(argv))
    for argv in REPLAYABLE_COMMANDS:
        progress(f"fwman {' '.join(argv)}")
        problem = run_fwman(rec, list(argv))
        if problem:
            report.problems.append(f"fwman {' '.join(argv)}: {problem}")
    report.files = len(writer.files)
    report.commands = len(writer.commands)
    return report


def _read_kernel_state(host: Host, report: CaptureReport) -> None:
    """Record, with bounded reads, what the CDI check, nova_core and the module options read besides sysfs:
    ``/proc/devices`` (the majors a CDI spec's device nodes must have), every ``/boot/config-KVER`` (which kernels
    have nova_core, the signature hash a kernel expects) and the ``.conf`` files of each modprobe directory (its
    blacklist). A file past its bound or unreadable is a problem in ``report``; the capture goes on."""
    if host.exists(paths.PROC_DEVICES):
        _try(report, paths.PROC_DEVICES, read_capped, host, paths.PROC_DEVICES, MAX_PROC_DEVICES, "device list")
    if host.is_dir(paths.BOOT_DIR):
        names = sorted(n for n in host.listdir(paths.BOOT_DIR) if n.startswith(CONFIG_PREFIX))
        for name in names[:MAX_FILES_OF_A_KIND]:
            path = paths.kernel_config(name.removeprefix(CONFIG_PREFIX))
            _try(report, path, read_capped, host, path, MAX_TEXT_FILE, "kernel configuration")
    for directory in paths.MODPROBE_CONFIG_DIRS:
        if not host.is_dir(directory):
            continue
        confs = sorted(n for n in host.listdir(directory) if n.endswith(".conf"))
        for name in confs[:MAX_FILES_OF_A_KIND]:
            path = f"{directory}/{name}"
            _try(report, path, read_capped, host, path, MAX_TEXT_FILE, "modprobe configuration")


def _read_resize(host: Host, directory: str) -> None:
    for name in host.listdir(directory):
        if name.startswith("resource") and name.endswith("_resize"):
            host.read_bytes(f"{directory}/{name}")


def _read_iommu_group(host: Host, directory: str) -> None:
    if not host.exists(f"{directory}/iommu_group"):
        return
    group = host.realpath(f"{directory}/iommu_group")
    host.listdir(f"{group}/devices")
    if host.exists(f"{group}/type"):
        host.read_bytes(f"{group}/type")


@dataclass
class Captured(Result):
    """``capture DIR``: where the snapshot went, what it recorded, and whether the capture ran as root."""

    directory: str
    report: CaptureReport
    redacted: bool = True
    as_root: bool = True

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.capture/2`` (without the schema key)."""
        return {"directory": self.directory, **fields_of(self.report), "redacted": self.redacted}

    def text(self, verbose: int = 0) -> Out:
        """Return what was captured, the tools missing, what could not be read, and how to replay it."""
        r = self.report
        out: Out = [say(f"captured {r.gpus} NVIDIA GPU(s), {r.files} files, {r.commands} commands into "
                        f"{self.directory}")]  # fmt: skip
        if r.missing_tools:
            out.append(say(f"not installed (recorded as missing): {', '.join(r.missing_tools)}"))
        out += [say(f"could not read: {problem}", err=True) for problem in r.problems[:20]]
        if not self.as_root:
            note = "note: not root: config space beyond 64 bytes (Resizable BAR sizes) was not readable"
            out.append(say(note, err=True))
        return [*out, say(f"replay with: fwman --snapshot {self.directory} scan")]


def capture_into(
    host: Host,
    directory: str,
    *,
    redact: bool = True,
    run_fwman: Callable[[Host, list[str]], str | None],
    progress: Callable[[str], None] = lambda s: None,
    replay: bool = False,
    as_root: bool = True,
) -> Captured:
    """Record ``host`` (read-only) into the snapshot directory ``directory`` and return what was recorded.

    Raises UsageError on a ``replay`` (a capture records a live host) and what writing the directory raises.
    """
    if replay:
        raise UsageError("capture records a live host; it cannot read from --snapshot")
    writer = SnapshotWriter(redact=redact)
    report = capture(host, writer, run_fwman=run_fwman, progress=progress)
    return Captured(str(writer.write(directory)), report, redact, as_root)


@dataclass
class SnapshotCheck(Result):
    """``capture --check DIR``: the snapshot's problems, and what it holds when it is well formed."""

    directory: str
    problems: list[str]
    counts: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.capture.check/1`` (without the schema key)."""
        return {"directory": self.directory, "ok": not self.problems, "counts": self.counts, "problems": self.problems}

    def text(self, verbose: int = 0) -> Out:
        """Return each problem, or that the snapshot is well formed and what it holds."""
        out: Out = [say(f"{self.directory}: {problem}") for problem in self.problems]
        c = self.counts
        if c is not None:
            out.append(say(f"{self.directory}: well-formed snapshot ({c['commands']} commands, {c['links']} links, "
                           f"{c['listings']} listings)"))  # fmt: skip
        return out

    def failure(self) -> FwmanError | None:
        """Return SnapshotFormatError (exit 2) when the snapshot has a problem."""
        if not self.problems:
            return None
        count = f"{len(self.problems)} problem(s)"
        return SnapshotFormatError(
            f"{self.directory}: not a well-formed snapshot ({count}); first: {self.problems[0]}",
            hint="do not replay it; ask its sender for a fresh `fwman capture`",
        )


def check_directory(directory: str) -> SnapshotCheck:
    """Check the snapshot at the user path ``directory`` (nothing else is read) and return its problems."""
    meta, problems = check_snapshot(directory)
    counts = None
    if not problems and meta is not None:
        counts = {"commands": len(meta.get("commands", [])), "links": len(meta.get("links", {})),
                  "listings": len(meta.get("dirs", {}))}  # fmt: skip
    return SnapshotCheck(directory, problems, counts)
