"""What a changing command did (or, in a dry run, would do): the result the inverse commands share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Change:
    """The steps of one change: done, or (``dry_run``) still needed; ``changed`` is never true in a dry run."""

    dry_run: bool
    actions: list[str] = field(default_factory=list)  # descriptions: done, or to do in a dry run

    @property
    def changed(self) -> bool:
        """Return True when the host was changed (never in a dry run)."""
        return bool(self.actions) and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        """Return ``{"dry_run", "changed", "actions"}``: the payload of the command's schema (without the key)."""
        return {"dry_run": self.dry_run, "changed": self.changed, "actions": self.actions}
