"""nova_core: the kernel's own driver for NVIDIA GPUs, which takes the GPU before nvidia.ko can probe it.

Kernel 7.0 binds ``nova_core`` on its own and it must be blacklisted or nvidia.ko cannot probe the GPU
(aikitoria/open-gpu-kernel-modules issue 24, May 2026); Ubuntu 26.04's 7.0 kernel sets ``CONFIG_NOVA_CORE`` and
the GPU is held by it (beclab/Olares PR 3963, August 2026). Both via ../shared/docs/field-late-2026.md.

What the kernel tree says (torvalds/linux ``drivers/gpu/nova-core/``): ``config NOVA_CORE`` is a tristate, "If M
is selected, the module will be called nova_core" (its Kconfig; the Makefile is ``obj-$(CONFIG_NOVA_CORE) +=
nova_core.o``), and its PCI table matches every NVIDIA VGA or 3D controller (``driver.rs``:
``from_class_and_vendor(Class::DISPLAY_VGA`` / ``DISPLAY_3D``, ``Vendor::NVIDIA)``): every GPU fwman serves.
The PCI driver registers as ``NovaCore``, the ``name`` of ``module_pci_driver!`` in ``nova_core.rs`` (Rust's
``module_driver!``, ``rust/kernel/driver.rs``, registers the driver under the module's ``NAME``), which is the name
of its directory under ``/sys/bus/pci/drivers`` and so of a bound device's ``driver`` link.

A kernel *has* nova_core when its ``/boot/config-KVER`` sets ``CONFIG_NOVA_CORE`` (``=m`` or ``=y``) or its module
tree holds ``kernel/drivers/gpu/nova-core/nova_core.ko`` (compressed or not). A ``blacklist`` line makes
modprobe ignore the module's own aliases (modprobe.d(5)), and an alias (the GPU's modalias) is how udev would
load it; a module built into the kernel (``=y``) is not loaded by modprobe at all, so
no modprobe file can keep it off the GPU.

The parsers here are pure (text in, a value out, never an exception); the readers go through the Host.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError
from fwman.core.jsonout import OMIT, meta
from fwman.host.base import Host

MODULE = "nova_core"
CONFIG_SYMBOL = "CONFIG_NOVA_CORE"
#: names a bound device's ``driver`` link may end in: the PCI driver's (``NovaCore``, nova_core.rs) and the
#: module's own, should a later kernel register under that
DRIVER_NAMES = frozenset({"NovaCore", "nova_core", "nova-core"})
#: where the module lies in a kernel's module tree (``drivers/gpu/nova-core/Makefile``)
MODULE_SUBDIR = "kernel/drivers/gpu/nova-core"
MODULE_SUFFIXES = ("", ".xz", ".zst", ".gz")
#: where the fact that nova_core must be blacklisted comes from (fwman's modprobe file says it beside the line)
SOURCE = "aikitoria/open-gpu-kernel-modules issue 24; beclab/Olares PR 3963"
FIX = "fwman driver settings --apply"

_INSTALL_NOOP = ("/bin/false", "/bin/true", "/usr/bin/false", "/usr/bin/true", "false", "true")


def _name(module: str) -> str:
    """Return a module name as modprobe compares it (``-`` and ``_`` are the same)."""
    return module.replace("-", "_")


def parse_config_symbol(text: str, symbol: str = CONFIG_SYMBOL) -> str | None:
    """Return the value of ``symbol`` in a kernel ``.config`` text (``"y"``, ``"m"``, ...), None when unset.

    ``# CONFIG_X is not set`` and a missing line both return None. Never raises.
    """
    found: str | None = None
    prefix = symbol + "="
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(prefix):
            found = line[len(prefix) :].strip().strip('"') or None
        elif line == f"# {symbol} is not set":
            found = None
    return found


def parse_blacklist(text: str) -> set[str]:
    """Return the modules a modprobe.d file keeps from loading by alias: ``blacklist M`` lines, and ``install M``
    lines whose command is ``/bin/false`` or ``/bin/true`` (the other idiom owners use).

    Names are returned as modprobe compares them (``-`` as ``_``). Comments (``#``) and continued lines
    (a trailing backslash) are handled as modprobe.d(5) describes. Never raises.
    """
    out: set[str] = set()
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        logical.append(line)
    if pending:
        logical.append(pending)
    for line in logical:
        words = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        blacklist = len(words) >= 2 and words[0] == "blacklist"
        if blacklist or (len(words) >= 3 and words[0] == "install" and words[2] in _INSTALL_NOOP):
            out.add(_name(words[1]))
    return out


def blacklisted_by(files: Iterable[tuple[str, str]], module: str = MODULE) -> list[str]:
    """Return the names of ``files`` ((path, text) pairs) that blacklist ``module``, in the order given."""
    return [path for path, text in files if _name(module) in parse_blacklist(text)]


def _conf_files(host: Host) -> list[tuple[str, str]]:
    """Return (path, text) of the ``*.conf`` files modprobe reads, a name in an earlier directory hiding the same
    name in a later one (modprobe.d(5): /etc overrides /run, which overrides /lib)."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for directory in paths.MODPROBE_CONFIG_DIRS:
        try:
            if not host.is_dir(directory):
                continue
            names = sorted(host.listdir(directory))
        except (MissingError, NotRecordedError):
            continue
        for name in names:
            if not name.endswith(".conf") or name in seen:
                continue
            seen.add(name)
            try:
                out.append((f"{directory}/{name}", host.read_text(f"{directory}/{name}")))
            except (FwmanError, OSError):
                continue
    return out


def blacklist_files(host: Host) -> list[str]:
    """Return the modprobe files of ``host`` that keep nova_core off the GPU (empty: none does). Never raises."""
    return blacklisted_by(_conf_files(host))


@dataclass(frozen=True)
class NovaKernel:
    """Whether one kernel has nova_core: what its config says and where its module lies.

    Its JSON form (``nova_core_kernels`` of ``fwman.driver-settings/1``): kernel, config, module, built_in.
    """

    kver: str = field(metadata=meta(key="kernel"))
    config: str | None  # CONFIG_NOVA_CORE's value ("m", "y"), None when unset or the config is absent
    config_path: str | None = field(metadata=OMIT)  # the config read, None when there is none
    #: the host path of nova_core.ko in the kernel's tree, None when absent
    module: str | None = field(metadata=meta(then=("built_in",)))

    @property
    def present(self) -> bool:
        """Return True when the kernel has nova_core, as a module or built in."""
        return self.config in ("m", "y") or self.module is not None

    @property
    def built_in(self) -> bool:
        """Return True when nova_core is built into the kernel (no modprobe file can stop it)."""
        return self.config == "y"

    @property
    def evidence(self) -> str:
        """Return what says the kernel has it: the config line, or the module's path."""
        if self.config in ("m", "y"):
            return f"{CONFIG_SYMBOL}={self.config} in {self.config_path}"
        return self.module or "nothing"


def inspect_kernel(host: Host, kver: str) -> NovaKernel:
    """Return whether ``kver`` has nova_core (its ``/boot/config-KVER``, its module tree). Never raises."""
    config_path = paths.kernel_config(kver)
    try:
        text = host.read_text(config_path) if host.exists(config_path) else None
    except (FwmanError, OSError):
        text = None
    module = None
    base = f"{paths.modules_dir(kver)}/{MODULE_SUBDIR}/{MODULE}.ko"
    for suffix in MODULE_SUFFIXES:
        try:
            if host.exists(base + suffix):
                module = base + suffix
                break
        except (FwmanError, OSError):
            break
    if text is None:
        return NovaKernel(kver, None, None, module)
    return NovaKernel(kver, parse_config_symbol(text), config_path, module)


def problem(kernel: NovaKernel, blacklist: list[str]) -> str | None:
    """Return why nova_core will take the GPU when ``kernel`` boots, or None when it will not.

    ``blacklist`` is :func:`blacklist_files`' answer for the host.
    """
    if not kernel.present:
        return None
    if kernel.built_in:
        return (
            f"nova_core is built into {kernel.kver} ({kernel.evidence}): it takes the GPU before nvidia.ko can "
            "probe it, and no modprobe blacklist can stop a built-in driver"
        )
    if blacklist:
        return None
    return (
        f"{kernel.kver} has nova_core ({kernel.evidence}): it takes the GPU before nvidia.ko can probe it; "
        f"blacklist it: {FIX}"
    )


def initramfs_problem(kver: str, members: Iterable[tuple[str, bytes]]) -> str | None:
    """Return why an initramfs of ``kver`` would let nova_core take the GPU before the root filesystem mounts.

    ``members`` are (name without leading ``/``, content) of the image's files. The image is a problem when it
    carries the nova_core module of ``kver`` and none of its modprobe files blacklists it. Never raises.
    """
    items = list(members)
    module = None
    for name, _ in items:
        rel = name.removeprefix("usr/")
        if rel.startswith(f"lib/modules/{kver}/") and posixpath.basename(rel).startswith(f"{MODULE}.ko"):
            module = name
            break
    if module is None:
        return None
    dirs = ("etc/modprobe.d", "lib/modprobe.d")
    confs = [
        (name, data.decode(errors="replace"))
        for name, data in items
        if name.endswith(".conf") and posixpath.dirname(name.removeprefix("usr/")) in dirs
    ]
    if blacklisted_by(confs):
        return None
    return f"initramfs carries /{module} without a blacklist: nova_core takes the GPU at boot; {FIX}"


@dataclass
class NovaRunning:
    """nova_core on the running system: loaded, and the NVIDIA functions bound to it. Its JSON form is
    ``{"module_loaded", "bound_to"}`` (``loaded`` names the nvidia module's object elsewhere)."""

    loaded: bool = field(default=False, metadata=meta(key="module_loaded"))
    #: bus ids whose driver is nova_core
    bound: list[str] = field(default_factory=list, metadata=meta(key="bound_to"))


def loaded_from_proc_modules(text: str) -> bool:
    """Return True when ``/proc/modules`` text lists nova_core (its first word on a line). Never raises."""
    return any(line.split()[:1] == [MODULE] for line in text.splitlines())


def read_running(host: Host, functions: Iterable[str]) -> NovaRunning:
    """Return whether nova_core is loaded and which of ``functions`` (PCI bus ids) it is bound to. Never raises.

    Loaded: ``/sys/module/nova_core`` or a line of ``/proc/modules``; bound: the device's ``driver`` link.
    """
    running = NovaRunning()
    try:
        running.loaded = host.exists(f"{paths.SYS_MODULE_DIR}/{MODULE}")
        if not running.loaded and host.exists(paths.PROC_MODULES):
            running.loaded = loaded_from_proc_modules(host.read_text(paths.PROC_MODULES))
    except (FwmanError, OSError):
        pass
    for bus in functions:
        try:
            target = host.readlink(f"{paths.PCI_DEVICES_DIR}/{bus}/driver")
        except (FwmanError, OSError):
            continue
        if posixpath.basename(target.rstrip("/")) in DRIVER_NAMES:
            running.bound.append(bus)
    return running
