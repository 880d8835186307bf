"""``fwman driver power`` as a use case: what the GPUs' power limits are, what fwman's unit holds, and the
actions that persist a plan (:mod:`fwman.driver.power`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import ChangeResult, change, free
from fwman.app.driver.settings import apply_json, apply_text
from fwman.app.text import Out, Result, say, table
from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError, UsageError
from fwman.driver.power import GpuPower, PowerPlan, parse_limits, power_actions, read_unit
from fwman.driver.settings_host import NOT_RECORDED
from fwman.gpu.inventory import scan_cards
from fwman.host.actions import Action, Tell, apply_all, pending, silent
from fwman.host.base import Host
from fwman.host.machine import reachable
from fwman.platform.systemd import reload_running_systemd


@dataclass
class PowerStatus:
    """The GPUs (bus id, power limit and default in W where nvidia-smi said) and fwman's unit as it is."""

    gpus: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    unit: bytes | None = None
    #: what each GPU holds now (persistence mode, power limit), read back from nvidia-smi: the "now" steps skip
    #: what is already so
    held: dict[str, GpuPower] = field(default_factory=dict)
    #: False on a replay that did not record the unit: whether it is there is unknown (never guessed absent)
    unit_recorded: bool = True

    @property
    def buses(self) -> list[str]:
        """Return the GPUs' bus ids."""
        return [b for b, _, _ in self.gpus]

    def to_json(self) -> dict[str, Any]:
        """Return the status as JSON (the command adds ``changed``, ``applied``, ``would``)."""
        return {
            "gpus": [{"bus_id": b, "power_limit_w": w, "default_power_limit_w": d} for b, w, d in self.gpus],
            "unit": paths.POWER_UNIT,
            "unit_present": (self.unit is not None) if self.unit_recorded else None,
            "unit_text": None if self.unit is None else self.unit.decode(errors="replace"),
        }


@dataclass
class DriverPower(Result):
    """``driver power``: the GPUs and fwman's unit (after an apply, read again), and what ``--apply`` did."""

    status: PowerStatus
    applied: ChangeResult | None = None  # None: read-only (no --apply)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.driver-power/1`` (without the schema key)."""
        return {**self.status.to_json(), **apply_json(self.applied)}

    def text(self, verbose: int = 0) -> Out:
        """Return each GPU's power limit and default, fwman's unit, and what ``--apply`` did or would do."""
        rows = [[b, "-" if w is None else f"{w:g} W", "-" if d is None else f"{d:g} W"] for b, w, d in self.status.gpus]
        out: Out = [table(["GPU", "power limit", "default"], rows)] if rows else [say("GPUs: none found")]
        state = "present" if self.status.unit is not None else "absent"
        out.append(say(f"{paths.POWER_UNIT}: " + (state if self.status.unit_recorded else NOT_RECORDED)))
        return out + apply_text(self.applied, "nothing to do: fwman's unit is current")


def driver_power(
    host: Host,
    *,
    limits: list[str] | None = None,
    persistence: bool = False,
    off: bool = False,
    apply: bool = False,
    dry_run: bool = False,
    permit: Callable[[], None] = free,
    tell: Tell = silent,
) -> DriverPower:
    """Return the GPUs' power limits and fwman's unit; with ``apply`` write (``off``: remove) the unit that
    persists ``limits`` and ``persistence``, and apply them now (``dry_run``: say what would be done).

    Raises UsageError for a bad ``--limit`` or no GPU to apply it to, MissingError without nvidia-smi, what
    ``permit`` raises, what an action raises.
    """
    result = DriverPower(power_status(host))
    if not apply:
        return result
    try:
        # the settings apply now only where fwman may act on the GPUs (not from under --root: fwman.host.machine)
        now = reachable(host, ["nvidia-smi", "--power-limit"])
        _, actions = plan_actions(host, result.status, list(limits or []), persistence, off, now=now)
    except ParseError as e:
        raise UsageError(e.message, hint="--limit 280, or --limit 0000:01:00.0=280") from e

    def act() -> list[str]:
        done = apply_all(host, actions, tell)
        if any(paths.POWER_UNIT in c for c in done):
            reload_running_systemd(host)
        return done

    result.applied = change(dry_run, lambda: [a.describe() for a in pending(host, actions)], act, permit=permit)
    if not dry_run:
        result.status = power_status(host)
    return result


def power_status(host: Host) -> PowerStatus:
    """Return the GPUs and fwman's unit. Never raises: GPUs that cannot be listed are an empty list; a unit a
    replay did not record is unknown (``unit_recorded`` False)."""
    try:
        cards = scan_cards(host)
    except FwmanError:
        cards = []
    gpus = [(c.bus_id, c.power_limit_w, c.default_power_limit_w) for c in cards]
    held = {c.bus_id: GpuPower(c.persistence_mode, c.power_limit_w) for c in cards}
    try:
        return PowerStatus(gpus, read_unit(host), held)
    except NotRecordedError:
        return PowerStatus(gpus, None, held, unit_recorded=False)


def plan_actions(
    host: Host, status: PowerStatus, limits: list[str], persistence: bool, off: bool, now: bool
) -> tuple[PowerPlan, list[Action]]:
    """Return the plan of ``--limit``/``--persistence`` (empty with ``off``) and its actions.

    Raises ParseError for a bad ``--limit``; MissingError when no GPU is found to apply a limit to, or nvidia-smi
    is not installed (the unit runs it).
    """
    plan = PowerPlan((), False) if off else PowerPlan(
        tuple(sorted(parse_limits(limits, status.buses).items())), persistence
    )  # fmt: skip
    if not off and plan.empty:  # no GPU here: a state of the host (exit 5), not a bad command line
        hint = "check `fwman scan`; or name one: --limit BUS=WATTS"
        raise MissingError("no GPU found to apply --limit to", hint=hint)
    smi = host.which("nvidia-smi")
    if not plan.empty and smi is None:
        raise MissingError("nvidia-smi is not installed: the unit applies the settings with it",
                           hint="install the NVIDIA driver's user space (nvidia-smi)")  # fmt: skip
    return plan, power_actions(host, plan, status.buses, smi or "nvidia-smi", now, status.held)
