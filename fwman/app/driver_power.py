"""``fwman driver power`` as a use case: what the GPUs' power limits are, what fwman's unit holds, and the
actions that persist a plan (:mod:`fwman.driver.power`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import FwmanError
from fwman.driver.power import PowerPlan, parse_limits, power_actions, read_unit
from fwman.host.actions import Action
from fwman.host.base import Host

__all__ = ["PowerStatus", "plan_actions", "power_status"]


@dataclass
class PowerStatus:
    """The GPUs (bus id, power limit and default in W where nvidia-smi said) and fwman's unit as it is."""

    gpus: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    unit: bytes | None = None

    @property
    def buses(self) -> list[str]:
        """Return the GPUs' bus ids."""
        return [b for b, _, _ in self.gpus]

    def to_json(self) -> dict[str, Any]:
        """Return the status as JSON (the command adds ``changed``, ``applied``, ``would``)."""
        return {
            "gpus": [{"bus_id": b, "power_limit_w": w, "default_power_limit_w": d} for b, w, d in self.gpus],
            "unit": paths.POWER_UNIT,
            "unit_present": self.unit is not None,
            "unit_text": None if self.unit is None else self.unit.decode(errors="replace"),
        }


def power_status(host: Host) -> PowerStatus:
    """Return the GPUs and fwman's unit. Never raises: GPUs that cannot be listed are an empty list."""
    from fwman.gpu.inventory import scan_cards

    try:
        cards = scan_cards(host)
    except FwmanError:
        cards = []
    return PowerStatus([(c.bus_id, c.power_limit_w, c.default_power_limit_w) for c in cards], read_unit(host))


def plan_actions(
    host: Host, status: PowerStatus, limits: list[str], persistence: bool, off: bool, now: bool
) -> tuple[PowerPlan, list[Action]]:
    """Return the plan of ``--limit``/``--persistence`` (empty with ``off``) and its actions.

    Raises ParseError for a bad ``--limit``; MissingError when nvidia-smi is not installed (the unit runs it).
    """
    from fwman.core.errors import MissingError

    plan = PowerPlan((), False) if off else PowerPlan(
        tuple(sorted(parse_limits(limits, status.buses).items())), persistence
    )  # fmt: skip
    if not off and plan.empty:
        from fwman.core.errors import UsageError

        raise UsageError("no GPU found to apply --limit to", hint="check `fwman scan`; or name one: --limit BUS=WATTS")
    smi = host.which("nvidia-smi")
    if not plan.empty and smi is None:
        raise MissingError("nvidia-smi is not installed: the unit applies the settings with it",
                           hint="install the NVIDIA driver's user space (nvidia-smi)")  # fmt: skip
    return plan, power_actions(host, plan, status.buses, smi or "nvidia-smi", now)
