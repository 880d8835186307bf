"""Everything the doctor's checks look at, gathered from one host: the checks themselves never see the host.

:func:`gather` returns a :class:`Facts` whose fields are :class:`Fact` values. A Fact is read at most once, on
first use (so doctor reads only what the chain asks for, as before, and a capture records exactly that), and
keeps the FwmanError its reader met (MissingError, NotRecordedError, ParseError): every ``get()`` raises it
again, the check that asked lets it through, and the runner turns it into one "could not check" finding, so
one unreadable thing never hides the others. Tests build a Facts from :meth:`Fact.known` and
:meth:`Fact.failed` values, without a host.

A new check that needs something not here: add a field to :class:`Facts` and its reader to :func:`gather`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.driver import dkms, nova_core
from fwman.driver.build.manifest import built_kernels
from fwman.driver.dkms import DkmsEntry, DkmsSource
from fwman.driver.kernels import installed_kernels
from fwman.driver.nova_core import NovaKernel, NovaRunning
from fwman.driver.power import read_unit
from fwman.driver.settings_host import SettingsReport, inspect_settings
from fwman.gpu.bridges import AcsFacts, SlotFacts, gather_acs, gather_slots
from fwman.gpu.card import Card
from fwman.gpu.inventory import Inventory, nvidia_functions, scan_inventory
from fwman.gpu.topo import TopoMatrix, parse_p2p_matrix, parse_topo_matrix
from fwman.gpu.windows import BridgeWindow, gather_windows
from fwman.host.base import Host
from fwman.host.optional import read_text_if_exists
from fwman.p2p.fingerprint import read_fingerprint
from fwman.p2p.history import Fingerprint, P2PRecord, read_history
from fwman.platform import nccl, proxmox
from fwman.platform.envfile import parse_env_file, uncommented
from fwman.platform.systemd import parse_unit_environment
from fwman.platform.virt import VirtVerdict, judge
from fwman.platform.virt import gather as gather_virt
from fwman.reports.audit.model import AuditReport
from fwman.reports.audit.report import audit_host
from fwman.reports.doctor.cmdline import BootCmdline, read_boot_cmdline
from fwman.reports.doctor.parsers import parse_cmdline
from fwman.reports.doctor.vllm_caches import HostVllmCache, find_caches

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import Catalog

T = TypeVar("T")
TOPO_M = ("nvidia-smi", "topo", "-m")
TOPO_P2P_READ = ("nvidia-smi", "topo", "-p2p", "r")
_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class Fact(Generic[T]):
    """One fact, read on first :meth:`get` and kept: its value, or the FwmanError reading it met."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._read: Callable[[], T] | None = read
        self._value: T | None = None
        self._error: FwmanError | None = None

    @classmethod
    def known(cls, value: T) -> Fact[T]:
        """Return a Fact that is ``value`` (for tests and for facts read already)."""
        fact: Fact[T] = cls(lambda: value)
        fact.get()
        return fact

    @classmethod
    def failed(cls, error: FwmanError) -> Fact[T]:
        """Return a Fact whose reading met ``error``."""

        def read() -> T:
            raise error

        return cls(read)

    def get(self) -> T:
        """Return the value. Raises the FwmanError its reader met (every time it is asked)."""
        if self._read is not None:
            read, self._read = self._read, None
            try:
                self._value = read()
            except FwmanError as e:
                self._error = e
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by the read above when no error was kept


@dataclass(frozen=True)
class Sources:
    """Places that may set NCCL/vLLM options, named by the user (``--env-file``, ``--unit``)."""

    env_files: tuple[str, ...] = ()
    unit_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvSource:
    """One place a GPU workload takes its environment (and command line) from."""

    kind: str  # "env-file", "unit", "lxc", "nccl.conf", "docker", "podman"
    where: str
    env: dict[str, str]
    text: str  # the whole file: vLLM flags are looked for in it
    uses_gpu: bool = True

    @property
    def label(self) -> str:
        """Return the place for people: ``container 101 (/etc/pve/lxc/101.conf)`` or the path."""
        if self.kind == "lxc":
            return f"container {proxmox.guest_id(posixpath.basename(self.where))} ({self.where})"
        return self.where

    def fix(self, assignment: str) -> str:
        """Return how to set ``assignment`` (``NAME=VALUE``) in this place."""
        if self.kind == "lxc":
            return f"add `lxc.environment: {assignment}` to {self.where} and restart the container"
        if self.kind in ("docker", "podman"):
            return (
                f"create {self.where} again with `-e {assignment}` (`{self.kind} run -e`; the environment of an "
                "existing container cannot change)"
            )
        if self.kind == "unit":
            return f"add `Environment={assignment}` under [Service] (`systemctl edit` the unit {self.where})"
        return f"add `{assignment}` to {self.where}"


@dataclass(frozen=True)
class Workloads:
    """Where GPU workloads take their environment from: the user's files, GPU containers, /etc/nccl.conf."""

    sources: list[EnvSource]
    problems: list[str]  # what could not be read, one line each ("<path>: <why>")


@dataclass(frozen=True)
class IommuState:
    """What the IOMMU mode is decided from."""

    cmdline: str  # /proc/cmdline ("" when absent)
    groups: list[str]  # entries of /sys/kernel/iommu_groups
    types: dict[str, str]  # bus id -> its group's type ("DMA", "identity", ...; "unknown" unreadable); no groups: {}


@dataclass(frozen=True)
class Passthrough:
    """Devices this host gives to VMs."""

    vfio: list[str]  # bus ids bound to vfio-pci
    hostpci: list[str]  # Proxmox ``hostpciN:`` lines as ``VM <id>: <line>``
    unreadable: list[str]


@dataclass(frozen=True)
class Facts:
    """What the checks may look at. Each field raises, on ``get()``, what reading it met."""

    inventory: Fact[Inventory]
    topo: Fact[TopoMatrix]  # nvidia-smi topo -m
    p2p_read: Fact[TopoMatrix]  # nvidia-smi topo -p2p r
    audit: Fact[AuditReport]  # fwman audit, offline
    catalog: Fact[Catalog]
    iommu: Fact[IommuState]
    passthrough: Fact[Passthrough]
    workloads: Fact[Workloads]
    virt: Fact[VirtVerdict]  # is this a VM guest
    acs: Fact[AcsFacts]  # the bridges between every GPU pair and their ACS capability
    slots: Fact[list[SlotFacts]]  # the port above each card below its link maximum
    p2p_history: Fact[list[P2PRecord]]  # what `fwman p2p` recorded
    fingerprint: Fact[Fingerprint]  # the configuration a P2P verification depends on, now
    driver_settings: Fact[SettingsReport] | None = None  # NVreg_* options: recommended, written, in effect
    windows: Fact[list[BridgeWindow]] | None = None  # the prefetchable window above each card
    #: vLLM's P2P cache files on the host (not in containers) and what could not be read
    vllm_caches: Fact[tuple[list[HostVllmCache], list[str]]] | None = None
    power_unit: Fact[bytes | None] | None = None  # fwman's fwman-gpu-power.service (None: absent)
    nova_core: Fact[NovaFacts] | None = None  # kernel 7.0's in-tree NVIDIA driver: per kernel, and now
    dkms: Fact[DkmsFacts] | None = None  # the NVIDIA modules registered with DKMS: stock or the owner's fork
    #: where the kernel command line is set (read only when a fix must name the file and the line)
    boot_cmdline: Fact[BootCmdline] | None = None

    @property
    def cards(self) -> list[Card]:
        """Return the GPUs. Raises what reading the inventory met."""
        return self.inventory.get().cards


def describe_error(e: FwmanError) -> str:
    """Return a one-line reason for a "could not check" finding."""
    if isinstance(e, NotRecordedError):
        return f"not in this snapshot ({e.message.removeprefix('snapshot ')})"
    if isinstance(e, ParseError):
        return f"unreadable output: {e.message}"
    return e.message


# -- gathering ---------------------------------------------------------------------------------------------------
def gather(host: Host, sources: Sources | None = None) -> Facts:
    """Return the facts of ``host`` (each read on first use), with NCCL/vLLM settings also read from ``sources``.

    Never raises: what a reader meets is raised by that fact's ``get()``.
    """
    inventory = Fact(lambda: scan_inventory(host))
    audit: Fact[AuditReport] = Fact(lambda: audit_host(host, offline=True))  # offline: cached fork branches only
    return Facts(
        inventory=inventory,
        topo=Fact(lambda: parse_topo_matrix(_command(host, TOPO_M))),
        p2p_read=Fact(lambda: parse_p2p_matrix(_command(host, TOPO_P2P_READ))),
        audit=audit,
        catalog=Fact(lambda: _catalog(host)),
        iommu=Fact(lambda: _iommu(host, inventory)),
        passthrough=Fact(lambda: _passthrough(host)),
        workloads=Fact(lambda: _workloads(host, sources or Sources(), audit)),
        virt=Fact(lambda: judge(gather_virt(host))),
        acs=Fact(lambda: gather_acs(host, inventory.get().cards)),
        slots=Fact(lambda: gather_slots(host, inventory.get().cards)),
        p2p_history=Fact(lambda: read_history(host)),
        fingerprint=Fact(lambda: _fingerprint(host, inventory)),
        driver_settings=Fact(lambda: inspect_settings(host)),
        windows=Fact(lambda: gather_windows(host, inventory.get().cards)),
        vllm_caches=Fact(lambda: _vllm_caches(host, sources or Sources())),
        power_unit=Fact(lambda: read_unit(host)),
        nova_core=Fact(lambda: _nova_core(host)),
        dkms=Fact(lambda: _dkms(host)),
        boot_cmdline=Fact(lambda: read_boot_cmdline(host)),
    )


@dataclass
class NovaFacts:
    """nova_core on this host: the installed kernels that have it (with why it would take the GPU, or None),
    the modprobe files that blacklist it, and whether it is loaded or bound to a GPU now."""

    kernels: list[tuple[NovaKernel, str | None]]
    blacklist: list[str]
    running: NovaRunning


def _nova_core(host: Host) -> NovaFacts:
    """Return what :class:`NovaFacts` holds (:mod:`fwman.driver.nova_core` reads it)."""
    blacklist = nova_core.blacklist_files(host)
    kernels = [k for k in (nova_core.inspect_kernel(host, kver) for kver in installed_kernels(host)) if k.present]
    return NovaFacts(
        [(k, nova_core.problem(k, blacklist)) for k in kernels],
        blacklist,
        nova_core.read_running(host, nvidia_functions(host)),
    )


@dataclass
class DkmsFacts:
    """The NVIDIA modules registered with DKMS, each classified (stock or the owner's fork), and the kernels
    fwman has built for."""

    entries: list[DkmsEntry]
    kinds: dict[tuple[str, str], DkmsSource]
    fwman_kernels: list[str]


def _dkms(host: Host) -> DkmsFacts:
    """Return what :class:`DkmsFacts` holds (DKMS's tree and the sources, :mod:`fwman.driver.dkms`)."""
    entries = dkms.read_tree(host)  # DKMS's tree, without running dkms (as the audit reads it)
    return DkmsFacts(entries, dkms.sources(host, entries), built_kernels(host))


def _vllm_caches(host: Host, sources: Sources) -> tuple[list[HostVllmCache], list[str]]:
    """Return vLLM's P2P cache files on the host and what could not be read: the directories the model
    servers' units and environment files (``sources``) set, root's and each /home user's cache."""
    problems: list[str] = []
    environments = [(p, parse_env_file(t)) for p, t in _user_files(host, sources.env_files, problems)]
    environments += [(p, parse_unit_environment(t)[0]) for p, t in _user_files(host, sources.unit_files, problems)]
    found, unreadable = find_caches(host, environments)
    return found, problems + unreadable


def _fingerprint(host: Host, inventory: Fact[Inventory]) -> Fingerprint:
    """Return the fingerprint of the configuration now. The IOMMU mode is decided as the IOMMU step decides it."""
    cards = inventory.get().cards
    return read_fingerprint(host, cards, iommu_mode(_iommu(host, inventory))[0])


def _command(host: Host, argv: tuple[str, ...]) -> str:
    """Return the stdout of ``argv``. Raises MissingError when it is not installed or fails, NotRecordedError."""
    if host.which(argv[0]) is None:
        raise MissingError(f"{argv[0]} is not installed", hint="install the NVIDIA driver's user space")
    result = host.run(list(argv), timeout=60)
    if result.missing:
        raise MissingError(f"{argv[0]} is not installed")
    if result.rc != 0:
        why = (result.stderr or result.stdout).strip().splitlines()
        raise MissingError(f"`{' '.join(argv)}` failed (exit {result.rc}): {why[0] if why else 'no output'}")
    return result.stdout


def _listing(host: Host, path: str) -> list[str] | None:
    """Return the entries of directory ``path``, None when it does not exist. Raises NotRecordedError."""
    if not host.is_dir(path):
        return None
    return host.listdir(path)


def _catalog(host: Host) -> Catalog:
    """Return the VBIOS catalog in use (local copy or bundled). Raises what loading it raises."""
    # the catalog (board models, keys, local entries) is read only when a card's firmware is judged
    from fwman.firmware.catalog.load import load_catalog

    return load_catalog(host)


def _iommu(host: Host, inventory: Fact[Inventory]) -> IommuState:
    """Return the command line, the IOMMU groups and, when there are groups, each GPU's group type."""
    cmdline = read_text_if_exists(host, "/proc/cmdline") or ""
    groups = _listing(host, paths.IOMMU_GROUPS_DIR) or []
    types: dict[str, str] = {}
    if groups:
        for card in inventory.get().cards:
            if card.iommu_group is None:
                continue
            text = read_text_if_exists(host, f"{paths.IOMMU_GROUPS_DIR}/{card.iommu_group}/type")
            types[card.bus_id] = text.strip() if text else "unknown"
    return IommuState(cmdline, groups, types)


def _passthrough(host: Host) -> Passthrough:
    """Return the devices bound to vfio-pci and the Proxmox VMs' ``hostpci`` lines."""
    unreadable: list[str] = []
    vfio: list[str] = []
    try:
        vfio = [n for n in _listing(host, paths.VFIO_PCI_DRIVER_DIR) or [] if _BUS_ID.match(n)]
    except NotRecordedError:
        modules = read_text_if_exists(host, "/proc/modules") or ""
        if re.search(r"^vfio_pci\s", modules, re.MULTILINE):
            unreadable.append(f"{paths.VFIO_PCI_DRIVER_DIR} (vfio_pci is loaded)")
    hostpci: list[str] = []
    for vm in proxmox.read_configs(host, proxmox.QEMU_DIR, proxmox.qemu_config_names(host)):
        if vm.error is not None:
            unreadable.append(f"{vm.path} ({describe_error(vm.error)})")
            continue
        hostpci += [f"VM {vm.guest_id}: {line}" for line in proxmox.hostpci_lines(vm.text)]
    return Passthrough(vfio, hostpci, unreadable)


def _user_files(host: Host, paths: Sequence[str], problems: list[str]) -> Iterator[tuple[str, str]]:
    """Yield (path, text) of each file the user named, in order; one that cannot be read adds its line to
    ``problems`` instead (as it is reached: the lines keep the order of the files)."""
    for path in paths:
        try:
            text = host.read_text(path)
        except FwmanError as e:
            problems.append(f"{path}: {describe_error(e)}")
        else:
            yield path, text


def _workloads(host: Host, sources: Sources, audit: Fact[AuditReport] | None = None) -> Workloads:
    """Return the places to check (user's files, GPU containers, /etc/nccl.conf) and what could not be read.

    Docker and Podman containers that get the GPU come from the audit (``audit``: one reading of the engines
    for both): their environment and command line as ``inspect`` shows them.

    Raises MissingError when /etc/pve/lxc exists but cannot be listed.
    """
    problems: list[str] = []
    out = [
        EnvSource("env-file", path, parse_env_file(text), uncommented(text))
        for path, text in _user_files(host, sources.env_files, problems)
    ]
    for path, text in _user_files(host, sources.unit_files, problems):
        env, files, _ = parse_unit_environment(text)
        for f in files:
            try:
                env = {**parse_env_file(host.read_text(f)), **env}
            except FwmanError as e:
                problems.append(f"{f} (EnvironmentFile of {path}): {describe_error(e)}")
        out.append(EnvSource("unit", path, env, uncommented(text)))
    try:
        names = proxmox.lxc_config_names(host)
    except NotRecordedError as e:
        names = []
        problems.append(f"{proxmox.LXC_DIR}: {describe_error(e)}")
    for ct in proxmox.read_configs(host, proxmox.LXC_DIR, names):
        if ct.error is not None:
            problems.append(f"{ct.path}: {describe_error(ct.error)}")
            continue
        device, hook = proxmox.lxc_uses_gpu(ct.text)
        out.append(EnvSource("lxc", ct.path, proxmox.parse_lxc_environment(ct.text), ct.text, uses_gpu=device or hook))
    if audit is not None:
        try:
            report = audit.get()
        except FwmanError as e:
            problems.append(f"docker/podman containers: {describe_error(e)}")
        else:
            for c in report.containers:
                if c.kind in ("docker", "podman") and c.state != "no-gpu":
                    out.append(EnvSource(c.kind, f"{c.kind} container {c.name}", dict(c.env), c.command or ""))
    try:
        conf = nccl.read_nccl_conf(host)
        if conf is not None:
            # NCCL reads /etc/nccl.conf itself: it covers processes on this host (not inside containers)
            out.append(EnvSource("nccl.conf", nccl.CONF, conf[1], conf[0], uses_gpu=False))
    except NotRecordedError as e:
        problems.append(f"{nccl.CONF}: {describe_error(e)}")
    return Workloads(out, problems)


def iommu_mode(state: IommuState) -> tuple[str, dict[str, str]]:
    """Return (mode, evidence): mode is translated, passthrough, off, not-visible or unknown."""
    cmdline = parse_cmdline(state.cmdline)
    evidence = {"cmdline": " ".join(cmdline.tokens) or "(no IOMMU parameter)"}
    if not state.groups:
        evidence["iommu_groups"] = "none"
        return ("off" if cmdline.disabled else "not-visible"), evidence
    types = state.types
    evidence.update({f"group of {bus}": t for bus, t in types.items()})
    kinds = set(types.values())
    if kinds & {"DMA", "DMA-FQ"}:
        return "translated", evidence
    if kinds == {"identity"}:
        return "passthrough", evidence
    if not types:
        evidence["gpu_groups"] = "the GPUs are in no IOMMU group"
        return ("passthrough" if cmdline.passthrough else "unknown"), evidence
    return "unknown", evidence
