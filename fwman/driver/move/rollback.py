"""The rollback of a move: the kept packages installed, the kept files written back (those that were absent
removed), depmod for every kernel, the record saying ``rolled-back``, the working set removed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fwman.core.errors import MissingError, VerificationError
from fwman.driver.build import install
from fwman.driver.build.manifest import install_dir, sha256_hex
from fwman.driver.move.commit import RemoveTree
from fwman.driver.move.keep import KeptSet, owned_entries, read_kept
from fwman.driver.move.packages import InstallDebs
from fwman.driver.move.record import KEPT, KEPT_DEBS, ROLLED_BACK, WORK, MoveRecord, WriteRecord
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Action, Tracked
from fwman.host.base import Host


@dataclass
class RestoreKept:
    """Write every kept file back as it was (bytes and mode, or the link), remove those that were absent, and remove
    what is in an owned directory now and was not kept."""

    kept: KeptSet

    def describe(self) -> str:
        """Return what is restored."""
        return f"restore the {len(self.kept.files)} files kept before the move (modules, manifests, hold) from {KEPT}"

    def _differs(self, host: Host, path: str, entry: dict[str, Any] | None) -> bool:
        if entry is None:
            return host.exists(path) or host.is_link(path)
        if "link" in entry:
            try:
                return not host.is_link(path) or host.readlink(path) != entry["link"]
            except MissingError:
                return True
        if host.is_link(path):
            return True
        try:
            return sha256_hex(host.read_bytes(path)) != entry.get("sha256") or host.file_mode(path) not in (
                None, entry.get("mode"),
            )  # fmt: skip
        except MissingError:
            return True

    def _extra(self, host: Host) -> list[str]:
        return [p for p in owned_entries(host, self.kept.owned) if p not in self.kept.files]

    def is_needed(self, host: Host) -> bool:
        """Return True when a file differs from its kept copy, or an owned directory holds one that was not kept."""
        return any(self._differs(host, p, e) for p, e in self.kept.files.items()) or bool(self._extra(host))

    def apply(self, host: Host) -> None:
        """Restore. Raises VerificationError when a kept copy no longer hashes as kept."""
        for path in self._extra(host):
            host.unlink(path)
        for path, entry in self.kept.files.items():
            if not self._differs(host, path, entry):
                continue
            if entry is None:
                host.unlink(path)
            elif "link" in entry:
                if host.exists(path) or host.is_link(path):
                    host.unlink(path)
                host.symlink(str(entry["link"]), path)
            else:
                data = host.read_bytes(str(entry["copy"]))
                if sha256_hex(data) != entry.get("sha256"):
                    raise VerificationError(f"the kept copy of {path} ({entry['copy']}) changed since it was kept")
                if host.is_link(path):
                    host.unlink(path)
                host.write_bytes(path, data, int(entry.get("mode") or 0o644))


@dataclass
class DepmodAfterRestore(install.RunDepmod):
    """``depmod -a KVER`` after the kept modules are put back: needed whenever the restore is (the dry run, before
    it) or was applied (the run, after it), so the dry run lists what the run does."""

    def is_needed(self, host: Host) -> bool:
        """Return True when a watched restore is needed or was applied, or the names do not resolve to ours."""
        return any(t.applied or t.is_needed(host) for t in self.after) or super().is_needed(host)


def rollback_actions(host: Host, record: MoveRecord, at: str) -> list[Action]:
    """Return the actions that put back the set kept before ``record``'s move: the kept packages, the kept
    files, depmod for every kernel, the record. Raises MissingError without a kept set, ParseError for a damaged
    index."""
    kept = read_kept(host)
    actions: list[Action] = []
    previous = {p.name: p.installed for p in record.packages}
    if previous:
        actions.append(InstallDebs(KEPT_DEBS, previous, f"back to {record.from_version}"))
    restore = Tracked(RestoreKept(kept))
    actions.append(restore)
    for kver in record.kernels:
        expected = {n: p for n in MODULE_NAMES if kept.files.get(p := f"{install_dir(kver)}/{n}.ko") is not None}
        if expected:
            actions.append(DepmodAfterRestore(kver, expected, (restore,)))
    actions += [WriteRecord(replace(record, stage=ROLLED_BACK, at=at)), RemoveTree(WORK, "the move's working set")]
    return actions
