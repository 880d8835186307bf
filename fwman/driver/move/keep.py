"""The keep of a move: every file the commit may change, copied (bytes and mode, a link's target, or the fact that
it is absent) into ``kept/`` with an index, before anything changes; what a rollback restores."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver import userspace_hold
from fwman.driver.build.manifest import failed_path, install_dir, manifest_path, pending_path, sha256_hex, store_dir
from fwman.driver.move.record import KEPT, KEPT_INDEX
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.base import Host
from fwman.host.capped import MAX_RECORD, read_capped


def kept_paths(host: Host, kernels: Sequence[str]) -> list[str]:
    """Return every file the commit may change, to keep before it: per kernel the installed modules, fwman's copy,
    the manifest and the markers; the depmod override, the module source record and the hold's files."""
    out: list[str] = []
    for kver in kernels:
        for directory in (install_dir(kver), store_dir(kver)):
            names = {f"{n}.ko" for n in MODULE_NAMES}
            try:
                if host.is_dir(directory):
                    names |= {n for n in host.listdir(directory) if n.endswith(".ko")}
            except MissingError:
                pass
            out += [f"{directory}/{n}" for n in sorted(names)]
        out += [manifest_path(kver), failed_path(kver), pending_path(kver)]
    out += [paths.DEPMOD_OVERRIDE, paths.MODULES_SOURCE_RECORD]
    out += [userspace_hold.PIN_FILE, userspace_hold.BLACKLIST_FILE, userspace_hold.STATE_FILE]
    return out


@dataclass
class KeptSet:
    """The index of what was kept: ``files`` ({path: {copy, sha256, mode} of a file, {link} of a symbolic link, or
    None: absent}) and ``owned`` (directory, name pattern): every entry there whose name matches belongs to the set,
    so one that is there at the rollback and was not kept is removed (a container's libraries of the new version)."""

    files: dict[str, dict[str, Any] | None]
    owned: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> bytes:
        """Return the index as JSON bytes."""
        doc = {"files": self.files, "owned": [list(o) for o in self.owned]}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def owned_entries(host: Host, owned: Sequence[tuple[str, str]]) -> list[str]:
    """Return the paths of the entries of each owned directory whose names match its pattern. Never raises."""
    out: list[str] = []
    for directory, pattern in owned:
        try:
            names = host.listdir(directory) if host.is_dir(directory) else []
        except (MissingError, NotRecordedError):
            names = []
        out += [f"{directory}/{n}" for n in sorted(names) if re.fullmatch(pattern, n)]
    return out


@dataclass
class KeepFiles:
    """Copy ``files`` (bytes and mode, a link's target, or the fact that one is absent), and the entries of the
    ``owned`` directories, into ``kept/`` with an index."""

    files: list[str]
    owned: list[tuple[str, str]] = field(default_factory=list)

    def describe(self) -> str:
        """Return what is kept where."""
        return f"keep the current modules, manifests and hold ({len(self.files)} files) in {KEPT} for a rollback"

    def is_needed(self, host: Host) -> bool:
        """Return True when no index of kept files is there."""
        return not host.exists(KEPT_INDEX)

    def apply(self, host: Host) -> None:
        """Copy the files, then write the index (last: an index means the set is whole)."""
        index: dict[str, dict[str, Any] | None] = {}
        for path in dict.fromkeys([*self.files, *owned_entries(host, self.owned)]):
            if host.is_link(path):
                index[path] = {"link": host.readlink(path)}
                continue
            if not host.exists(path):
                index[path] = None
                continue
            data = host.read_bytes(path)
            copy = f"{KEPT}/files/{sha256_hex(path.encode())[:16]}"
            host.write_bytes(copy, data)
            index[path] = {"copy": copy, "sha256": sha256_hex(data), "mode": host.file_mode(path) or 0o644}
        host.write_bytes(KEPT_INDEX, KeptSet(index, list(self.owned)).to_json())


def read_kept(host: Host) -> KeptSet:
    """Return the index of what was kept. Raises MissingError without one, ParseError when it is damaged."""
    if not host.exists(KEPT_INDEX):
        raise MissingError(f"no kept set in {KEPT}: nothing to roll back to")
    doc = parse_json(read_capped(host, KEPT_INDEX, MAX_RECORD, "kept files index"), KEPT_INDEX)
    files = doc.get("files") if isinstance(doc, dict) else None
    owned = doc.get("owned", []) if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not all(v is None or isinstance(v, dict) for v in files.values()):
        raise ParseError(KEPT_INDEX, "files", "not an object of path: entry")
    if not isinstance(owned, list) or not all(
        isinstance(o, list) and len(o) == 2 and all(isinstance(x, str) for x in o) for o in owned
    ):
        raise ParseError(KEPT_INDEX, "owned", "not a list of [directory, pattern]")
    return KeptSet({str(k): v for k, v in files.items()}, [(o[0], o[1]) for o in owned])
