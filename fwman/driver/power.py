"""``fwman driver power``: persistence mode and power limits, persisted by a systemd unit fwman owns.

Power limits reset at every reboot and driver reload, and owners cap 3090s (280 W) for P2P work (issue 27). The
NVIDIA driver keeps neither, so fwman writes ``/etc/systemd/system/fwman-gpu-power.service`` (a oneshot that
runs ``nvidia-smi -i <bus> -pm ENABLED`` and ``nvidia-smi -i <bus> -pl <watts>`` for each GPU, after
``systemd-modules-load.service``) and enables it for ``multi-user.target``. ``-pm ENABLED`` is NVIDIA's
documented command ("To enable persistence mode using nvidia-smi (as root): nvidia-smi -i <target gpu> -pm
ENABLED", docs.nvidia.com/deploy/driver-persistence/persistence-mode-legacy.html, which also says that legacy
mode "will be eventually deprecated in favor of the Persistence Daemon"); ``-pl`` is the command ``fwman doctor``'s
power step already gives. fwman itself never reloads the nvidia module (its changes take effect at a reboot),
so the boot is the one reload the unit has to follow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fwman.core import paths, unitfile
from fwman.core.errors import FwmanError, NotRecordedError, ParseError
from fwman.core.names import bus_id
from fwman.host.actions import Action, RemoveFile, RunCommand, Symlink, WriteFile
from fwman.host.base import Host

MIN_WATTS = 1.0
MAX_WATTS = 2000.0  # above any board's limit; nvidia-smi refuses what the board does not allow
_LIMIT = re.compile(r"(?:(?P<bus>[0-9A-Fa-f:.]+)=)?(?P<watts>\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class GpuPower:
    """What one GPU holds now, as ``nvidia-smi -q -x`` reads back: persistence mode and the power limit in W
    (None where nvidia-smi did not say, or could not be read)."""

    persistence: bool | None = None
    limit_w: float | None = None

    def holds_limit(self, watts: float) -> bool:
        """Return True when the power limit read back is ``watts`` (to nvidia-smi's two decimals)."""
        return self.limit_w is not None and round(self.limit_w, 2) == round(watts, 2)


@dataclass(frozen=True)
class PowerPlan:
    """What the unit applies: ``limits`` (bus id -> watts, sorted by bus) and persistence mode on or not."""

    limits: tuple[tuple[str, float], ...]
    persistence: bool

    @property
    def empty(self) -> bool:
        """Return True when there is nothing to apply (then fwman's unit is removed)."""
        return not self.limits and not self.persistence


def parse_limits(items: list[str], buses: list[str]) -> dict[str, float]:
    """Return bus id -> watts for ``--limit`` items: ``280`` (every GPU in ``buses``) or ``0000:01:00.0=280``.

    Raises ParseError naming the item when it is neither, or the watts are outside 1 to 2000.
    """
    out: dict[str, float] = {}
    for item in items:
        m = _LIMIT.fullmatch(item.strip())
        if not m:
            raise ParseError("--limit", item[:40], "give WATTS or BUS=WATTS, e.g. 280 or 0000:01:00.0=280")
        watts = float(m.group("watts"))
        if not math.isfinite(watts) or not MIN_WATTS <= watts <= MAX_WATTS:
            raise ParseError("--limit", item[:40], f"give {MIN_WATTS:g} to {MAX_WATTS:g} W")
        if m.group("bus"):
            try:
                out[bus_id(m.group("bus"))] = watts
            except FwmanError as e:  # UsageError from the shared bus-id reader: a parse error of this item
                raise ParseError("--limit", item[:40], getattr(e, "message", str(e))) from e
        else:
            out.update(dict.fromkeys(buses, watts))
    return out


def smi_commands(plan: PowerPlan, buses: list[str], smi: str = "nvidia-smi") -> list[list[str]]:
    """Return the nvidia-smi command lines that apply ``plan``: persistence mode on each GPU of ``buses``, then
    each power limit."""
    out = [[smi, "-i", b, "-pm", "ENABLED"] for b in buses] if plan.persistence else []
    out += [[smi, "-i", b, "-pl", f"{w:g}"] for b, w in plan.limits]
    return out


def render_unit(plan: PowerPlan, buses: list[str], smi: str) -> bytes:
    """Return fwman's unit for ``plan`` (``smi``: nvidia-smi's absolute path, as systemd wants).

    Raises ParseError when a word of a command is not one systemd reads as it is (core/unitfile refuses it).
    """
    service = [("Type", "oneshot"), ("RemainAfterExit", "yes")]
    service += [("ExecStart", unitfile.exec_line(argv)) for argv in smi_commands(plan, buses, smi)]
    what = "fwman: GPU persistence mode and power limits (reset at every boot and driver reload)"
    unit = [("Description", what), ("After", "systemd-modules-load.service")]
    sections = [("Unit", unit), ("Service", service), ("Install", [("WantedBy", "multi-user.target")])]
    written = "Written by `fwman driver power --apply`; `fwman driver power --apply --off` removes it."
    return unitfile.render(sections, comments=(written,))


def power_actions(
    host: Host, plan: PowerPlan, buses: list[str], smi: str, now: bool, held: Mapping[str, GpuPower]
) -> list[Action]:
    """Return the actions that make the host match ``plan``: write and enable fwman's unit (or remove both when
    the plan is empty), then, with ``now``, apply the settings at once (the unit would only at the next boot).

    ``held`` is each GPU's state as read back before planning (bus id -> :class:`GpuPower`): a ``-pm`` or ``-pl``
    command is needed only where the GPU does not hold its value already (or nvidia-smi did not say), so a
    second run applies nothing.
    """
    if plan.empty:
        return [RemoveFile(paths.POWER_UNIT_WANTS), RemoveFile(paths.POWER_UNIT)]
    actions: list[Action] = [
        WriteFile(paths.POWER_UNIT, render_unit(plan, buses, smi)),
        Symlink(paths.POWER_UNIT_WANTS, paths.POWER_UNIT),
    ]
    if now:
        unknown = GpuPower()
        for argv in smi_commands(plan, buses, smi):
            state = held.get(argv[2], unknown)
            holds = state.persistence is True if argv[3] == "-pm" else state.holds_limit(float(argv[4]))
            actions.append(RunCommand(argv, _unless(holds), reason="now, not only at the next boot"))
    return actions


def _unless(holds: bool) -> Callable[[Host], bool]:
    """Return the ``needed`` check of a "now" step: True unless the GPU held its value when read back."""
    return lambda host: not holds


def read_unit(host: Host) -> bytes | None:
    """Return fwman's unit as it is on ``host`` (None when absent or unreadable).

    Raises NotRecordedError on a replay that did not record it: unknown, never "absent".
    """
    try:
        return host.read_bytes(paths.POWER_UNIT) if host.exists(paths.POWER_UNIT) else None
    except NotRecordedError:
        raise
    except (FwmanError, OSError):  # a permission error: as if not there (the unit is root's, readable by all)
        return None


_EXEC_LIMIT = re.compile(r"ExecStart=\S*nvidia-smi -i (\S+) -pl (\d+(?:\.\d+)?)")


def unit_limits(text: str) -> dict[str, float]:
    """Return bus id -> watts of the ``-pl`` lines in fwman's unit (``{}`` for any other text). Never raises."""
    found = (_EXEC_LIMIT.fullmatch(line.strip()) for line in text.splitlines())
    return {m.group(1).lower(): float(m.group(2)) for m in found if m}
