"""Secure Boot state, and whether fwman's module-signing certificate is enrolled as a Machine Owner Key.

Under Secure Boot the kernel (lockdown) refuses a module whose signing key it does not trust ("Key was rejected
by service"), however well the build went. What this module reads:

- the EFI variable ``SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c`` under ``/sys/firmware/efi/efivars``:
  efivarfs shows 4 bytes of attributes (little-endian) and then the data, one byte, 1 = on, 0 = off;
  no ``/sys/firmware/efi`` at all means a legacy BIOS boot (no Secure Boot);
- ``mokutil --sb-state``: "SecureBoot enabled" / "SecureBoot disabled" (plus "SecureBoot validation is
  disabled in shim" when shim does not enforce), "This system doesn't support Secure Boot", or "EFI
  variables are not supported on this system" (strings of mokutil 0.6.0);
- ``mokutil --test-key CERT``: "CERT is already enrolled" or "CERT is not enrolled". mokutil counts a key
  that is only *requested* (in MokNew, waiting for the MOK manager at the next boot) as "already enrolled",
  so ``mokutil --list-new`` decides: its ``SHA1 Fingerprint: aa:bb:...`` lines (or "MokNew is empty").

:func:`module_load_verdict` says whether modules signed (or not) the way a manifest records will load.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass, field

from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.core.jsonout import fields_of, meta
from fwman.core.paths import EFI_GLOBAL_GUID, EFIVARS_DIR, SECUREBOOT_VAR, SETUPMODE_VAR
from fwman.driver.kmod.mok import cert_fingerprint, key_enrollment, mokutil
from fwman.host.base import Host

__all__ = ["EFIVARS_DIR", "EFI_GLOBAL_GUID", "SECUREBOOT_VAR", "SETUPMODE_VAR"]  # the paths' owner is core/paths
SIG_ENFORCE_PARAM = "/sys/module/module/parameters/sig_enforce"
SCHEMA = "fwman.secureboot/1"
WHAT = "Secure Boot state"


def parse_efi_bool(data: bytes, name: str = "SecureBoot") -> bool:
    """Return the value of a one-byte boolean EFI variable as efivarfs shows it (4 attribute bytes + 1 byte).

    Raises ParseError when the file is not 5 bytes or the value is neither 0 nor 1.
    """
    if len(data) != 5:
        raise ParseError(WHAT, name, f"expected 4 attribute bytes and 1 data byte, got {len(data)} bytes", 0)
    (attributes,) = struct.unpack_from("<I", data, 0)
    del attributes  # read for the layout check only: NV/BS/RT flags do not change the meaning
    value = data[4]
    if value not in (0, 1):
        raise ParseError(WHAT, name, f"value {value} is neither 0 nor 1", 4)
    return value == 1


def parse_sb_state(text: str) -> bool | None:
    """Return True/False from ``mokutil --sb-state`` output, None when it says the state cannot be known."""
    if "SecureBoot enabled" in text:
        return True
    if "SecureBoot disabled" in text:
        return False
    return None


@dataclass
class SecureBootState:
    """Secure Boot as the next boot will see it, and where fwman's certificate stands (status JSON key)."""

    enabled: bool | None  # None: unknown (no EFI variable readable, no mokutil)
    source: str = field(metadata=meta(then=("enforcing",)))  # "efivars" | "mokutil" | "bios" | "unknown"
    shim_validation: bool | None = None  # False when shim's validation is off ("disabled in shim")
    sig_enforce: bool | None = None  # module.sig_enforce=1 (signatures required even without Secure Boot)
    cert: str | None = None  # fwman's signing certificate (host path), None when fwman signs nothing
    cert_fingerprint: str | None = None
    key_state: str = field(
        default="none", metadata=meta(key="key")
    )  # "enrolled" | "pending" | "not-enrolled" | "unknown" | "none" (no key)
    note: str | None = None

    @property
    def enforcing(self) -> bool:
        """Return True when the kernel will refuse modules it cannot verify."""
        return bool(self.enabled and self.shim_validation is not False) or bool(self.sig_enforce)

    def to_dict(self) -> dict[str, object]:
        """Return the JSON form (schema in :data:`SCHEMA`)."""
        return {"schema": SCHEMA, **fields_of(self)}


def efi_secure_boot(host: Host) -> bool | None:
    """Return the value of the SecureBoot EFI variable: the one reader of it; None when there is no such variable
    (a BIOS boot, no efivarfs).

    Raises ParseError when the variable is malformed, MissingError when it cannot be read, NotRecordedError on a
    replay that did not record it.
    """
    if not host.exists(SECUREBOOT_VAR):
        return None
    return parse_efi_bool(host.read_bytes(SECUREBOOT_VAR, limit=64))


def secure_boot_enabled(host: Host) -> bool | None:
    """Return True/False from the SecureBoot EFI variable; None when it is absent, unreadable, malformed or not
    recorded (the caller then treats Secure Boot as unknown). Never raises."""
    try:
        return efi_secure_boot(host)
    except (ParseError, MissingError, NotRecordedError):
        return None


def _read_firmware_state(host: Host, state: SecureBootState) -> None:
    """Fill ``state`` from the EFI variable (or its absence), mokutil and module.sig_enforce."""
    try:
        enabled = efi_secure_boot(host)
    except (ParseError, MissingError) as e:
        state.note = f"{SECUREBOOT_VAR}: {e.message}"
    else:
        if enabled is not None:
            state.enabled, state.source = enabled, "efivars"
        elif host.exists("/sys/firmware") and not host.exists("/sys/firmware/efi"):
            state.enabled, state.source = False, "bios"
    if state.enabled is not False or state.source != "bios":
        text = mokutil(host, "--sb-state")
        if text is not None:
            parsed = parse_sb_state(text)
            if state.enabled is None and parsed is not None:
                state.enabled, state.source = parsed, "mokutil"
            if "validation is disabled in shim" in text:
                state.shim_validation = False
    if host.exists(SIG_ENFORCE_PARAM):
        with contextlib.suppress(MissingError):
            state.sig_enforce = host.read_text(SIG_ENFORCE_PARAM).strip() in ("Y", "1")


def read_state(host: Host) -> SecureBootState:
    """Return the Secure Boot state and fwman's certificate enrollment. Never raises for a missing source."""
    from fwman.driver.kmod.sign import configured_key

    state = SecureBootState(None, "unknown")
    try:
        _read_firmware_state(host, state)
    except NotRecordedError as e:  # a replay that did not record the EFI variables: unknown, said so
        state.note = e.message
    try:
        key = configured_key(host)
    except NotRecordedError:
        key = None
    if key is None:
        return state
    state.cert = key.cert
    try:
        der = host.read_bytes(key.cert)
    except MissingError:
        state.key_state, state.note = "unknown", f"certificate {key.cert} is missing"
        return state
    state.cert_fingerprint = cert_fingerprint(der)
    state.key_state = key_enrollment(host, key.cert, state.cert_fingerprint)
    return state


def module_load_verdict(state: SecureBootState, signed: str | None) -> str | None:
    """Return why modules signed with ``signed`` (a hash name, None when unsigned) will NOT load, or None.

    Unknown states give None (not counted against the kernel) but :func:`read_state` says so in ``note``.
    """
    if not state.enforcing:
        return None
    if signed is None:
        return "Secure Boot is on and the modules are unsigned: the kernel rejects them (run `fwman modules keygen`)"
    if state.key_state == "pending":
        return (
            "Secure Boot is on and fwman's signing key is only pending enrollment: confirm it in the MOK manager "
            'at the next boot, or the modules are rejected ("Key was rejected by service")'
        )
    if state.key_state == "not-enrolled":
        return (
            "Secure Boot is on and fwman's signing key is not enrolled: the kernel rejects the modules "
            f'("Key was rejected by service"); enroll it: mokutil --import {state.cert}'
        )
    return None


def enrollment_steps(cert: str) -> list[str]:
    """Return the exact steps that enroll certificate ``cert`` as a Machine Owner Key."""
    return [
        f"1. mokutil --import {cert}",
        "   (asks for a one-time password; any password you will remember for the next step)",
        '2. reboot, at the console (or IPMI/iDRAC/iLO): shim shows "Press any key to perform MOK management" '
        "for 10 seconds; press a key",
        '3. "Enroll MOK", then "Continue", then "Enroll the key(s)?": "Yes", type the password, then "Reboot"',
        f'4. check: mokutil --test-key {cert}   ("is already enrolled", and `mokutil --list-new` no longer lists it)',
        "   missing the 10-second prompt leaves the request pending (the modules stay rejected): run step 1 again",
    ]
