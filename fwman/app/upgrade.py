"""``fwman upgrade --dry-run``, ``--apply`` and ``--check``: the use cases, whose results own their JSON shapes
(``fwman.upgrade-plan/1``, ``fwman.upgrade-apply/1``, ``fwman.upgrade-check/1``).

The plan is :func:`fwman.firmware.upgrade.plan.build_upgrade_plan`'s and its execution
:func:`fwman.firmware.upgrade.apply.apply_upgrade`'s; this module picks the cards and says what came of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwman.app.flash import Operator, flash_json
from fwman.core.errors import MissingError, UsageError, VerificationError
from fwman.firmware.ops.flash import FlashOptions
from fwman.firmware.upgrade.apply import ApplyResult, CheckRow
from fwman.firmware.upgrade.model import UpgradePlan
from fwman.host.base import Host


def choose_mode(dry_run: bool, apply: bool, check: bool) -> str:
    """Return ``"dry-run"``, ``"apply"`` or ``"check"``: the one mode the flags ask for.

    Raises UsageError for none, or for two at once (a dry run never flashes; a reboot goes between apply and
    check).
    """
    if dry_run and (apply or check):  # a dry run never flashes or records anything: refuse the mix outright
        raise UsageError(
            f"--dry-run and {'--apply' if apply else '--check'} contradict each other: nothing was done",
            hint="fwman upgrade --dry-run prints the plan; fwman upgrade --apply runs it",
        )
    if apply and check:
        raise UsageError("--apply and --check are separate steps: a reboot goes between them")
    if apply or check:  # docs/flash.md: back up all, flash, reboot, then --check
        return "apply" if apply else "check"
    if not dry_run:
        raise UsageError(
            "say what to do: --dry-run prints the plan, --apply runs it, --check checks it after the reboot",
            hint="start with: fwman upgrade --dry-run",
        )
    return "dry-run"


@dataclass
class PlanResult:
    """The upgrade plan of the host (``--dry-run``), and the cards whose firmware version could not be read."""

    plan: UpgradePlan

    @property
    def unreadable(self) -> list[str]:
        """Return the short bus ids of the cards the plan cannot decide for (firmware version unread)."""
        from fwman.firmware.upgrade.plan import short_bus

        return [short_bus(c.bus_id) for c in self.plan.cards if c.action == "check"]

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.upgrade-plan/1``."""
        return {"dry_run": True, "ready": self.plan.ready, **self.plan.model_dump(mode="json")}

    def raise_unreadable(self) -> None:
        """Raise MissingError (exit 5) when the firmware version of some cards could not be read: no plan for
        them, never "nothing to flash"."""
        unknown = self.unreadable
        if unknown:
            raise MissingError(
                f"cannot plan: the firmware version of {len(unknown)} card(s) could not be read ({', '.join(unknown)})",
                hint="load the NVIDIA driver so nvidia-smi can read it (or run as root), then plan again",
            )


def plan_upgrade(host: Host, selected: tuple[str, ...] = ()) -> PlanResult:
    """Return the plan for ``host`` (cards from the inventory, the catalog in use), flashing ``selected`` only
    when given. Raises UsageError for an unknown card, MissingError when there is no NVIDIA GPU or no catalog."""
    from fwman.firmware.catalog.load import load_catalog
    from fwman.firmware.upgrade.plan import build_upgrade_plan
    from fwman.gpu.inventory import find_card, scan_cards

    found = scan_cards(host)
    if not found:
        raise MissingError("no NVIDIA GPU found", hint="fwman scan shows what fwman sees")
    buses = [find_card(found, bus).bus_id for bus in selected]
    return PlanResult(build_upgrade_plan(host, found, load_catalog(host), buses))


@dataclass
class Applied:
    """What ``--apply`` flashed, the backup run of every card, and what the user does next."""

    result: ApplyResult

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.upgrade-apply/1``."""
        r = self.result
        return {"operation": r.operation, "backup_run": r.backup_run,
                "flashed": [flash_json(f) for f in r.flashed], "next_steps": r.next_steps}  # fmt: skip

    def lines(self) -> list[str]:
        """Return the text lines: each card flashed, the backup run, the numbered next steps."""
        r = self.result
        out = [f"{f.card}: {f.before_version} -> {f.after_version}: written, read back and verified" for f in r.flashed]
        if not r.flashed:
            return out
        out += [f"backups of every card: run {r.backup_run} (fwman backup list)", "next steps:"]
        for i, step in enumerate(r.next_steps, 1):
            title, _, details = step.partition(": ")
            if "; " in details:  # a step with several details: one line each, easier to follow at the console
                out += [f"  {i}. {title}", *(f"       - {d}" for d in details.split("; "))]
            else:
                out.append(f"  {i}. {step}")
        return out


def apply_plan(operator: Operator, selected: tuple[str, ...], reuse: str | None, no_backup_bios_ok: bool,
               timeout: float) -> Applied:  # fmt: skip
    """Back up every card, then flash the plan's targets (``selected`` only when given) one at a time.

    Raises UsageError on a snapshot or for an unknown card, and what the flash raises (docs/flash.md).
    """
    from fwman.firmware.nvflash.runner import require_live
    from fwman.firmware.upgrade.apply import apply_upgrade
    from fwman.gpu.inventory import find_card, require_cards

    host = operator.host
    require_live(host, operator.is_replay, "fwman upgrade --apply")
    cards = require_cards(host)
    buses = [find_card(cards, b).bus_id for b in selected]
    options = FlashOptions(reuse, no_backup_bios_ok, False, timeout)  # a plan never downgrades
    return Applied(apply_upgrade(host, operator.euid, cards, options, buses, say=operator.say,
                                 stream=operator.stream, command=operator.command))  # fmt: skip


@dataclass
class Checked:
    """Each card after the reboot: its running firmware and BAR1 against its last flash."""

    rows: list[CheckRow]

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.upgrade-check/1``."""
        return {"cards": [r.__dict__ for r in self.rows]}

    def raise_problems(self) -> None:
        """Raise VerificationError (exit 4) when a card is not as flashed, MissingError (exit 5) when a card's
        firmware could not be read (never exit 0 as if the check had passed); else return."""
        bad = [r for r in self.rows if r.result == "mismatch"]
        if bad:
            raise VerificationError(f"{len(bad)} card(s) not as flashed: {bad[0].bus_id}: {bad[0].message}")
        unknown = [r.bus_id for r in self.rows if r.running is None]
        if unknown:
            raise MissingError(
                f"cannot check {len(unknown)} card(s): firmware version unreadable ({', '.join(unknown)})",
                hint="load the NVIDIA driver so nvidia-smi can read it, then run `fwman upgrade --check` again",
            )


def check_flashed(host: Host) -> Checked:
    """Compare each card's running firmware and BAR1 with its last flash and record the outcome; return each.

    Raises MissingError when there is no NVIDIA card.
    """
    from fwman.firmware.upgrade.apply import check_upgrade
    from fwman.gpu.inventory import require_cards

    return Checked(check_upgrade(host, require_cards(host)))
