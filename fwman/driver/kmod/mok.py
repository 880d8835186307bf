"""Machine Owner Keys as mokutil reports them: whether a certificate is enrolled, pending or not, and the
fingerprints ``mokutil --list-new`` lists (the one reader of mokutil's key answers; :mod:`.secureboot` reads
Secure Boot's state, :mod:`.sign` chooses the key to reuse)."""

from __future__ import annotations

import hashlib
import re

from fwman.core.errors import NotRecordedError
from fwman.host.base import Host, is_this_machine

_FINGERPRINT = re.compile(r"SHA1 Fingerprint:\s*([0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){19})")


def parse_test_key(text: str) -> bool | None:
    """Return True for "is already enrolled" (enrolled *or requested*), False for "is not enrolled", else None."""
    if "is already enrolled" in text:
        return True
    if "is not enrolled" in text:
        return False
    return None


def parse_fingerprints(text: str) -> list[str]:
    """Return the SHA-1 fingerprints (lowercase, colon-separated) listed by ``mokutil --list-new/--list-enrolled``."""
    return [m.group(1).lower() for m in _FINGERPRINT.finditer(text)]


def cert_fingerprint(der: bytes) -> str:
    """Return the SHA-1 fingerprint of a DER certificate the way mokutil prints it (``aa:bb:...``)."""
    digest = hashlib.sha1(der, usedforsecurity=False).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def mokutil(host: Host, *args: str) -> str | None:
    """Return what ``mokutil ARGS`` printed (stdout and stderr), or None where it cannot answer for ``host``
    (a temp root, a replay without it, no mokutil)."""
    # mokutil reads the running machine's EFI variables: on a temp root it would answer for the wrong machine
    try:
        if not is_this_machine(host) or host.which("mokutil") is None:
            return None
        result = host.run(["mokutil", *args], timeout=30)
    except NotRecordedError:
        return None
    return (result.stdout + result.stderr) if not result.missing else None


def key_enrollment(host: Host, cert: str, fingerprint: str) -> str:
    """Return "enrolled", "pending" (import requested, MOK manager not yet confirmed), "not-enrolled" or "unknown"."""
    local = host.local_path(cert) or cert
    tested = mokutil(host, "--test-key", local)
    verdict = parse_test_key(tested) if tested is not None else None
    new = mokutil(host, "--list-new")
    if new is not None and fingerprint in parse_fingerprints(new):
        return "pending"
    if verdict is None:
        return "unknown"
    return "enrolled" if verdict else "not-enrolled"
