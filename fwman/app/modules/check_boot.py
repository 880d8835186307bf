"""``fwman modules check-boot``: is the kernel that boots next safe, and (``--pin``) make it so. Typed arguments in, a
result model out; no click. Without ``pin`` it only reads. With ``pin`` it is the final boot check the hooks run after
the boot loader's own hook (:mod:`fwman.driver.boot.guard`): a kernel whose modules failed is pinned away from, a pin
whose reason is gone is released."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.change import free
from fwman.app.text import Out, Result, Span, line, say
from fwman.core.errors import FwmanError, MissingError, VerificationError
from fwman.core.jsonout import fields_of
from fwman.driver.boot.guard import final_check
from fwman.driver.boot.loaders import BootDefault, default_boot_kernel
from fwman.driver.boot.pin import BootCheck, PinRecord
from fwman.driver.boot.safety import kernel_safety
from fwman.host.actions import Tell, silent
from fwman.host.base import Host


@dataclass
class CheckBootResult(Result):
    """The next boot after the check (and after any pin it made), and what the check changed."""

    default: BootDefault
    safe: bool
    reason: str
    pinned: PinRecord | None = None
    released: PinRecord | None = None
    problem: str | None = None
    changed: list[str] = field(default_factory=list)
    #: the command that fixes an unpinnable next boot ("" otherwise)
    fix: str = ""
    #: who runs the check (``--origin``); inside an apt run a kernel hook leaves an unpinnable boot to apt's check
    origin: str = "manual"
    deferred: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-check-boot/2`` (without the schema key): :func:`boot_doc`."""
        return boot_doc(self.default, self.safe, self.reason, self)

    def text(self, verbose: int = 0) -> Out:
        """Return the verdict on the next boot, and the pin the check made; nothing for an unpinnable next boot
        that apt's check says at the end of the run (or that this check, apt's, says in its one error line)."""
        if self.deferred and not self.safe and self.pinned is None:
            return []
        verdict = Span("safe", "green") if self.safe else Span("NOT SAFE", "bad")
        out: Out = [line(f"next boot: {self.default.kver} ({self.default.how}): ", verdict, f": {self.reason}")]
        if self.pinned is not None:
            out.append(say(f"boot default pinned to {self.pinned.kernel} ({self.pinned.method})", "yellow"))
        return out

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when the next boot has no working patched modules."""
        if self.safe:
            return None
        if self.deferred and self.origin != "apt":
            return None  # a kernel hook inside an apt run: apt's check says it, once, at the end
        if self.deferred:  # apt's check at the end of its run: the one line, with what fixes it
            return VerificationError(
                f"the next boot ({self.default.kver}) has NO working patched NVIDIA modules and no kernel with them "
                f"can be pinned instead: {self.reason}; fix: {self.fix}"
            )
        return VerificationError(
            f"the next boot ({self.default.kver}) has no working patched modules: {self.reason}",
            hint=f"{self.problem}; see `fwman modules status`"
            if self.problem
            else "run `fwman modules catchup`, or pin a kernel that has them (`fwman modules check-boot --pin`)",
        )


def boot_doc(
    default: BootDefault, safe: bool | None, reason: str | None, check: CheckBootResult | BootCheck
) -> dict[str, Any]:
    """Return a boot check as JSON: the payload of ``modules check-boot``, the ``boot`` object of the others.

    The next boot (:class:`BootDefault`'s fields), ``safe`` and ``reason`` (None when the next boot's safety is
    unknown: :func:`fwman.app.modules.build.boot_json`), the pin made (its kernel and method), the kernel of the
    pin released, the problem, ``changed`` true or false and ``actions`` what changed, one line each.
    """
    return {
        **fields_of(default),
        "safe": safe,
        "reason": reason,
        "pinned": None if check.pinned is None else {"kernel": check.pinned.kernel, "method": check.pinned.method},
        "released": None if check.released is None else check.released.kernel,
        "problem": check.problem,
        "changed": bool(check.changed),
        "actions": check.changed,
    }


def check_boot(
    host: Host,
    pin: bool = False,
    origin: str = "manual",
    removed: frozenset[str] = frozenset(),
    tell: Tell = silent,
    permit: Callable[[], None] = free,
    under_apt: bool = False,
) -> CheckBootResult:
    """Return whether the next boot has working patched modules; with ``pin``, pin a safe kernel first if not.

    Raises MissingError (exit 5) when no kernel is installed; LockTimeout (with ``pin``) when a build holds
    the module lock.
    """
    if not pin:
        default = default_boot_kernel(host)
        if default.kver is None:
            raise MissingError("no installed kernel found under /lib/modules")
        safety = kernel_safety(host, default.kver)
        return CheckBootResult(default, safety.safe, safety.reason)
    permit()
    check = final_check(host, origin, removed, tell, under_apt=under_apt)
    if check.default.kver is None:
        raise MissingError("no installed kernel found under /lib/modules")
    safety = check.safety if check.safety is not None else kernel_safety(host, check.default.kver)
    return CheckBootResult(
        check.default,
        safety.safe,
        safety.reason,
        check.pinned,
        check.released,
        check.problem,
        check.changed,
        check.fix,
        origin,
        check.deferred,
    )
