"""``fwman driver settings`` as a use case: read what the host has, and (``--apply``) make it match. The reading and the
actions are :mod:`fwman.driver.settings_host` (``fwman doctor`` reads the same report)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwman.app.change import ChangeResult, change, free, plan_text
from fwman.app.text import Out, Result, say, table
from fwman.core import paths
from fwman.driver.settings_host import SettingsReport, inspect_settings, settings_actions
from fwman.host.actions import Tell, apply_all, pending, silent
from fwman.host.base import Host

__all__ = ["DriverSettings", "SettingsReport", "driver_settings", "inspect_settings", "settings_actions"]


@dataclass
class DriverSettings(Result):
    """The settings report (after an apply, read again) and what ``--apply`` changed or would change."""

    report: SettingsReport
    applied: ChangeResult | None = None  # None: read-only (no --apply)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.driver-settings/1`` (without the schema key)."""
        return {**self.report.to_json(), **apply_json(self.applied)}

    def text(self, verbose: int = 0) -> Out:
        """Return the GPUs, each option's state, fwman's file, the loaded module and the initramfs."""
        report = self.report
        gens = ", ".join(f"{g} ({len(b)} GPU{'s' if len(b) != 1 else ''})" for g, b in report.generations.items())
        out: Out = [say(f"GPUs: {gens or 'none found'}")]
        if report.settings:
            rows = [[s.option, state + (f" (loaded {loaded})" if loaded is not None and state != "in effect" else ""),
                     s.source] for s, state, loaded in report.states()]  # fmt: skip
            out.append(table(["option", "state (loaded module)", "source"], rows))
        out += [say(f"{gen}: {note}") for gen, note in report.silent().items()]
        where = paths.MODPROBE_OPTIONS_FILE
        if report.file_error:
            out.append(say(f"{where}: {report.file_error}"))
        elif report.file_ok:
            out.append(say(f"{where}: current" if report.wanted else f"{where}: absent (nothing to write)"))
        else:
            state = "absent" if report.current is None else "differs"
            out.append(say(f"{where}: {state} (`fwman driver settings --apply`)"))
        if report.params_error:
            out.append(say(f"{paths.PROC_DRIVER_PARAMS}: {report.params_error}"))
        elif report.params is None:
            out.append(say(f"{paths.PROC_DRIVER_PARAMS}: absent (the nvidia module is not loaded)"))
        out.append(say(f"initramfs {report.image or ''}: {report.initramfs}".replace("  ", " ")))
        after = "the options apply at the next load of the nvidia module (reboot)"
        return out + apply_text(self.applied, "nothing to do: fwman's file and the initramfs are current", after)


def apply_json(applied: ChangeResult | None) -> dict[str, Any]:
    """Return the ``changed``, ``applied`` and ``would`` keys an ``--apply`` command adds to its status."""
    done = applied.actions if applied is not None and not applied.dry_run else []
    todo = applied.actions if applied is not None and applied.dry_run else []
    return {"changed": bool(done), "applied": done, "would": todo}


def apply_text(applied: ChangeResult | None, current: str, after: str = "") -> Out:
    """Return the lines of an ``--apply``: the plan (``current`` when there is nothing to do), or what changed
    and (``after``) when it takes effect."""
    if applied is None:
        return []
    if applied.dry_run:
        return plan_text(applied.actions, current)
    out: Out = [say("changed: " + ("; ".join(applied.actions) if applied.actions else "nothing (already current)"))]
    return out + ([say(after)] if applied.actions and after else [])


def driver_settings(
    host: Host,
    *,
    rebar: bool = False,
    apply: bool = False,
    dry_run: bool = False,
    permit: Callable[[], None] = free,
    tell: Tell = silent,
) -> DriverSettings:
    """Return the settings report; with ``apply`` write (or remove) fwman's modprobe file and regenerate the
    initramfs first (``dry_run``: say what would be done). Raises what ``permit`` raises, MissingError when no
    initramfs generator is installed, what an action raises."""
    result = DriverSettings(inspect_settings(host, rebar=rebar))
    if not apply:
        return result
    actions = settings_actions(host, result.report)
    result.applied = change(
        dry_run, lambda: [a.describe() for a in pending(host, actions)], lambda: apply_all(host, actions, tell),
        permit=permit,
    )  # fmt: skip
    if not dry_run:
        result.report = inspect_settings(host, rebar=rebar)
    return result
