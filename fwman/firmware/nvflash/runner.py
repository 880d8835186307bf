"""Running nvflash on a Host: find it, read its version and adapters, map fwman's cards to nvflash indexes.

Plain (non-interactive) runs go through ``Host.run``; the interactive flash goes through the pseudo-terminal driver in
:mod:`fwman.host.pty` (through ``Host.run_interactive``). Parsing is in :mod:`fwman.firmware.nvflash.protocol` (pure).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import BlockedError, FwmanError, ParseError, ToolMissingError, UsageError
from fwman.core.findings import Finding
from fwman.firmware.nvflash import protocol as nvflash
from fwman.firmware.nvflash.gates import DeviceHolder, driver_gate
from fwman.gpu.card import Card
from fwman.gpu.kernel_modules import UNLOAD_ORDER, is_driver_module
from fwman.host.base import CommandResult, Host

DEFAULT_TIMEOUT = 300.0


@dataclass
class NvflashTool:
    """nvflash as found on one host: its path, version, and the adapters it lists."""

    host: Host
    path: str
    version: str
    adapters: list[nvflash.Adapter] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT

    def run(self, argv: list[str], timeout: float | None = None) -> CommandResult:
        """Run nvflash with ``argv[1:]``. Raises BlockedError when it refuses because the driver is loaded."""
        result = self.host.run([self.path, *argv[1:]], timeout=timeout or self.timeout)
        if result.missing:
            raise ToolMissingError("nvflash", hint="install NVIDIA's nvflash for Linux and put it on PATH")
        if nvflash.driver_loaded(result.stdout + result.stderr):
            raise BlockedError(
                "nvflash refused: the NVIDIA kernel driver is loaded",
                hint="stop GPU users, then: rmmod " + " ".join(UNLOAD_ORDER),
            )
        return result

    def adapter_for(self, card: Card) -> nvflash.Adapter:
        """Return the nvflash adapter that is ``card`` (same bus location and IDs).

        Raises BlockedError when nvflash does not list it or lists other IDs there.
        """
        try:
            return nvflash.match_adapter(self.adapters, card.bus_id, card.vendor_id, card.device_id, card.subsystem)
        except ParseError as e:
            raise BlockedError(
                f"cannot map card {card.bus_id} to an nvflash adapter: {e.detail}",
                hint="compare `nvflash --list` with `fwman scan`; fwman flashes only a card it can identify",
            ) from e


def find_nvflash(host: Host, timeout: float = DEFAULT_TIMEOUT) -> NvflashTool:
    """Return nvflash on ``host`` with its version and adapter list (``nvflash --list``).

    Raises ToolMissingError when it is not installed, BlockedError when it refuses (driver loaded),
    FwmanError when its output is not nvflash's.
    """
    path = host.which(nvflash.TOOL)
    if path is None:
        raise ToolMissingError(
            "nvflash", hint="download NVIDIA's nvflash for Linux, put it in /usr/local/sbin, then run this again"
        )
    tool = NvflashTool(host, path, "unknown", timeout=timeout)
    result = tool.run(nvflash.list_argv(path))
    text = result.stdout + result.stderr
    try:
        tool.version = nvflash.parse_tool_version(text)
        tool.adapters = nvflash.parse_list(result.stdout)
    except ParseError as e:
        raise FwmanError(f"{path} does not answer like nvflash: {e.message}", hint="check the nvflash install") from e
    if result.rc != 0 and not tool.adapters:
        raise FwmanError(f"nvflash --list failed (exit {result.rc}): {last_error(text)}")
    return tool


def last_error(text: str) -> str:
    """Return the last ``ERROR:`` line of nvflash output, else its last non-empty line, else 'no output'."""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return errors[-1] if errors else (lines[-1] if lines else "no output")


def loaded_nvidia_modules(host: Host) -> list[str]:
    """Return the nvidia* modules listed in /proc/modules, in safe unload order (unknown ones first)."""
    try:
        text = host.read_text(paths.PROC_MODULES)
    except FwmanError:
        return []
    names = [line.split(" ", 1)[0] for line in text.splitlines() if line.strip()]
    loaded = [n for n in names if is_driver_module(n)]
    known = [m for m in UNLOAD_ORDER if m in loaded]
    return [m for m in loaded if m not in UNLOAD_ORDER] + known


def device_holders(host: Host) -> list[DeviceHolder]:
    """Return every process with an open file descriptor on /dev/nvidia* (scanning /proc), once each."""
    holders: list[DeviceHolder] = []
    try:
        entries = host.listdir("/proc")
    except FwmanError:
        return holders
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fds = host.listdir(f"/proc/{entry}/fd")
        except FwmanError:
            continue
        for fd in fds:
            try:
                target = host.readlink(f"/proc/{entry}/fd/{fd}")
            except FwmanError:
                continue
            if target.startswith("/dev/nvidia"):
                try:
                    comm = host.read_text(f"/proc/{entry}/comm").strip()
                except FwmanError:
                    comm = "?"
                holders.append(DeviceHolder(int(entry), comm, target))
                break
    return holders


def driver_findings(host: Host) -> list[Finding]:
    """Return the driver gate (:func:`fwman.firmware.nvflash.gates.driver_gate`) over what ``host`` shows now:
    block while an nvidia module is loaded or a process holds the device."""
    return driver_gate(device_holders(host), loaded_nvidia_modules(host))


def require_live(host: Host, is_replay: bool, what: str) -> None:
    """Raise UsageError when working on a snapshot: a replay never touches a card."""
    if is_replay or host.local_path("/") is None:
        raise UsageError(
            f"{what} needs a live host: a snapshot replay never runs nvflash",
            hint="use `fwman upgrade --dry-run --snapshot DIR` to see the plan",
        )
