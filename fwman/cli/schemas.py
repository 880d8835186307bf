"""Every ``--json`` document fwman prints, by kind, with its current version (docs/json.md is the contract).

A document whose keys change (a name renamed, removed, or its type changed) gets its version bumped here, and
docs/json.md says what changed; adding a key does not bump it. fwman prints only the current version: the old
one is not kept beside it (a consumer reads ``schema`` and refuses a version it does not know).
"""

from __future__ import annotations

#: kind (``fwman.<kind>/<version>``) -> current version
SCHEMAS: dict[str, int] = {
    "apply-check": 1, "audit": 1, "backup": 2, "backup-list": 2, "backup-verify": 1, "capture": 2, "capture.check": 1,
    "catalog-board": 2, "catalog-keys": 1, "catalog-keys-sign": 1, "catalog-lint": 1, "catalog-list": 2,
    "catalog-local": 2, "catalog-propose": 1, "catalog-sign": 1, "catalog-update": 1,
    "dkms-block": 1, "dkms-status": 1, "dkms-unblock": 1, "doctor": 2,
    "driver-branches": 1, "driver-move": 1, "driver-power": 1, "driver-settings": 1, "fetch": 2,
    "flash": 2, "flash-resume": 1, "flash-status": 2, "history": 2,
    "hooks-install": 1, "hooks-remove": 1, "hooks-status": 1,
    "metrics-install": 1, "metrics-remove": 1, "metrics-write": 1,
    "modules-build": 2, "modules-catchup": 2, "modules-check-boot": 2, "modules-export": 1, "modules-forget": 2,
    "modules-hook": 2, "modules-import": 1, "modules-keygen": 1, "modules-preflight": 1, "modules-remove": 1,
    "modules-status": 1,
    "modules-unpin": 1, "p2p-nccl": 1, "p2p-test": 1, "plan": 1,
    "report": 1, "rom.inspect": 1, "rom.verify": 2, "scan": 2,
    "upgrade-apply": 2, "upgrade-check": 2, "upgrade-plan": 2,
    "userspace-hold": 1, "userspace-release": 1, "userspace-status": 1,
}  # fmt: skip


def schema_name(kind: str) -> str:
    """Return the ``schema`` value of a ``kind`` document, ``fwman.<kind>/<version>``.

    Raises KeyError for a kind not in :data:`SCHEMAS` (a document no one documented is a bug, not output).
    """
    return f"fwman.{kind}/{SCHEMAS[kind]}"
