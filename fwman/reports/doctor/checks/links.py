"""PCIe links trained at their maximum, power limits at their default."""

from __future__ import annotations

from fwman.core import paths
from fwman.core.errors import FwmanError
from fwman.core.findings import Finding, Topic
from fwman.driver.power import unit_limits
from fwman.reports.doctor.checks.common import buses
from fwman.reports.doctor.facts import Facts


# -- PCIe links ---------------------------------------------------------------------------------------------------
def _link(speed: float | None, width: int | None) -> str:
    s = f"{speed:g} GT/s" if speed is not None else "? GT/s"
    return f"{s} x{width if width is not None else '?'}"


def check_links(facts: Facts) -> list[Finding]:
    """Return the cards whose PCIe link trained below its maximum (width: a real limit; speed: maybe idle)."""
    t = Topic("pcie.link")
    out = []
    good, unknown = [], []
    for c in facts.cards:
        link = c.link
        now = _link(link.current_speed_gts, link.current_width)
        top = _link(link.max_speed_gts, link.max_width)
        if link.downtrained is None:
            unknown.append(c)
        elif link.narrow:
            out.append(
                t.warn(
                    f"{c.bus_id}: link trained at {now} of {top}: the width caps every transfer",
                    "reseat the card or its riser, or move it to a CPU-attached x16 slot (chipset-attached "
                    "slots and some risers train narrower)",
                    evidence={"bus_id": c.bus_id, "current": now, "max": top},
                )
            )
        elif link.slow:
            out.append(
                t.info(
                    f"{c.bus_id}: link at {now} of {top}: GPUs lower the link speed when idle; check under load",
                    f"run a workload and read `nvidia-smi -q -d PCIE -i {c.bus_id}`; still below max under load "
                    "means a riser, slot or firmware-setup PCIe generation setting limits it",
                    evidence={"bus_id": c.bus_id, "current": now, "max": top},
                )
            )
        else:
            good.append(c)
    if good:
        tops = ", ".join(sorted({_link(c.link.max_speed_gts, c.link.max_width) for c in good}))
        out.append(t.ok(f"links at their maximum on {buses(good)} ({tops})"))
    if unknown:
        out.append(t.info(f"could not check the PCIe link of {buses(unknown)} (speed/width not readable)"))
    return out


# -- power limit ----------------------------------------------------------------------------------------------------
def check_power(facts: Facts) -> list[Finding]:
    """Return the cards whose power limit is below their default (ok when fwman's unit sets that limit: it is
    on purpose and survives a reboot)."""
    t = Topic("power.limit")
    out = []
    good, unknown = [], []
    lowered = any(c.power_limit_w < c.default_power_limit_w for c in facts.cards
                  if c.power_limit_w is not None and c.default_power_limit_w is not None)  # fmt: skip
    kept: dict[str, float] = {}
    unit_unread = None  # why fwman's unit could not be read (a replay that did not record it): never "absent"
    if lowered and facts.power_unit is not None:  # the unit only tells whether a lowered limit is on purpose
        try:
            unit = facts.power_unit.get()
        except FwmanError as e:
            unit_unread = e.message
        else:
            kept = unit_limits(unit.decode(errors="replace")) if unit else {}
    for c in facts.cards:
        if c.power_limit_w is None or c.default_power_limit_w is None:
            unknown.append(c)
        elif c.power_limit_w < c.default_power_limit_w and kept.get(c.bus_id.lower()) == c.power_limit_w:
            out.append(
                t.ok(
                    f"{c.bus_id}: power limit {c.power_limit_w:g} W (default {c.default_power_limit_w:g} W), "
                    f"set at every boot by fwman's unit {paths.POWER_UNIT} (`fwman driver power`)"
                )
            )
        elif c.power_limit_w < c.default_power_limit_w:
            out.append(
                t.warn(
                    f"{c.bus_id}: power limit {c.power_limit_w:g} W is below the default {c.default_power_limit_w:g} W",
                    f"if not on purpose: `nvidia-smi -i {c.bus_id} -pl {c.default_power_limit_w:g}` (as root; "
                    "a firmware with a lower default power limit shows here too)",
                    evidence={"bus_id": c.bus_id, "limit_w": f"{c.power_limit_w:g}"}
                    | ({"fwman_unit": f"could not read: {unit_unread}"} if unit_unread else {}),
                )
            )
        else:
            good.append(c)
    if good:
        out.append(t.ok(f"power limit at or above default on {buses(good)}"))
    if unknown:
        out.append(t.info(f"could not check the power limit of {buses(unknown)} (nvidia-smi did not report it)"))
    return out
