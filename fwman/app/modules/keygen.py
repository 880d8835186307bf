"""``fwman modules keygen``: the Secure Boot signing key for the modules (made, or DKMS's adopted), and how to
enroll it; the result owns its ``fwman.modules-keygen/1`` shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.app.change import free, plan_text
from fwman.app.text import Out, Result, say
from fwman.core.jsonout import meta
from fwman.driver.kmod.secureboot import SecureBootState, enrollment_steps, read_state
from fwman.driver.kmod.sign import keygen as make_key
from fwman.driver.kmod.sign import keygen_plan
from fwman.host.base import Host


@dataclass
class Keygen(Result):
    """The key made or adopted (None in a dry run), what was (or would be) done, and where Secure Boot stands."""

    dry_run: bool = field(metadata=meta(then=("changed",)))
    actions: list[str] = field(default_factory=list)
    key: str | None = None
    cert: str | None = None
    origin: str | None = None  # "fwman" (made here) | "dkms" (DKMS's adopted)
    secure_boot: SecureBootState | None = field(default=None, metadata=meta(via=SecureBootState.to_dict))
    #: how to enroll the certificate ([]: enrolled already)
    steps: list[str] = field(default_factory=list, metadata=meta(key="enrollment_steps"))

    @property
    def changed(self) -> bool:
        """Return True unless this is a dry run (a key is made or adopted every time)."""
        return not self.dry_run

    def text(self, verbose: int = 0) -> Out:
        """Return the key, the certificate, Secure Boot's state and the enrollment steps."""
        if self.dry_run or self.secure_boot is None:
            return plan_text(self.actions, "nothing to do")
        state = self.secure_boot
        enabled = {True: "on", False: "off", None: "unknown"}[state.enabled]
        out: Out = [say(f"signing key:  {self.key}"), say(f"certificate:  {self.cert} (DER)"),
               say(f"Secure Boot: {enabled} ({state.source}); this certificate: {state.key_state}")]  # fmt: skip
        if self.steps:
            out.append(say("enroll it as a Machine Owner Key (once per machine):"))
            out += [say(f"  {step}") for step in self.steps]
        rebuild = "rebuild the current ones with `fwman modules build --all`"
        out.append(say(f"modules built from now on are signed; {rebuild}"))
        return out


def keygen(
    host: Host, *, reuse_dkms: bool = False, force: bool = False, dry_run: bool = False,
    permit: Callable[[], None] = free,
) -> Keygen:  # fmt: skip
    """Create (or adopt DKMS's) signing key and return it with the enrollment steps; with ``dry_run`` return what
    would be written. Raises UsageError when a key is configured and not ``force``, MissingError when
    ``reuse_dkms`` finds no DKMS key, and what ``permit`` raises."""
    if not dry_run:
        permit()  # before anything is read: a user who may not change the host is told that first
    plan = keygen_plan(host, reuse_dkms=reuse_dkms, force=force)
    if dry_run:
        return Keygen(True, plan)
    key = make_key(host, reuse_dkms=reuse_dkms, force=force)
    state = read_state(host)
    steps = enrollment_steps(key.cert) if state.key_state != "enrolled" else []
    return Keygen(False, plan, key.key, key.cert, key.origin, state, steps)
