"""``fwman modules unpin``: undo fwman's boot pin (the use case), whose result owns its JSON shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.app.change import free
from fwman.app.text import Out, Result, say
from fwman.core.jsonout import meta
from fwman.driver.boot.loaders import default_boot_kernel
from fwman.driver.boot.pin import PinRecord, UnpinBoot, read_pin
from fwman.driver.boot.safety import Safety, kernel_safety
from fwman.host.actions import apply_all
from fwman.host.base import Host


def _pin_json(pin: PinRecord) -> dict[str, str]:
    """Return the pin as ``fwman.modules-unpin/1`` shows it (its own order: kernel, avoided, method, at, reason)."""
    return {"kernel": pin.kernel, "avoided": pin.avoided, "method": pin.method, "at": pin.at, "reason": pin.reason}


@dataclass
class UnpinResult(Result):
    """What ``modules unpin`` did (or, in a dry run, would do)."""

    dry_run: bool = field(metadata=meta(then=("changed",)))
    #: the pin undone (or to undo); None: fwman has no boot pin in place
    pin: PinRecord | None = field(metadata=meta(via=_pin_json))
    next_boot: Safety | None = None  # the kernel that boots next once unpinned, and whether it is safe

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run)."""
        return self.pin is not None and not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return the pin undone (or to undo) and the kernel that boots next."""
        record, after = self.pin, self.next_boot
        if record is None:
            return [say("fwman has no boot pin in place")]
        if self.dry_run:
            return [say(f"would undo the boot pin to {record.kernel} ({record.method}), restoring the previous "
                        "default")]  # fmt: skip
        out: Out = [say(f"boot pin to {record.kernel} removed ({record.method}); the previous default is back")]
        if after is not None:
            note = "has working patched modules" if after.safe else f"has NO working patched modules: {after.reason}"
            out.append(say(f"next boot: {after.kver}, which {note}"))
        return out


def unpin_boot(host: Host, *, dry_run: bool = False, permit: Callable[[], None] = free) -> UnpinResult:
    """Undo fwman's boot pin and return what was undone and the kernel that boots next.

    With ``dry_run`` nothing changes: the pin in place is returned, ``next_boot`` unknown (None), since only the
    loader knows its default once the pin is gone. Raises what :func:`fwman.driver.boot.pin.unpin` raises.
    """
    if dry_run:
        return UnpinResult(True, read_pin(host))
    permit()
    action = UnpinBoot()
    apply_all(host, [action])
    if action.record is None:
        return UnpinResult(False, None)
    after = default_boot_kernel(host)
    return UnpinResult(False, action.record, kernel_safety(host, after.kver) if after.kver else None)
