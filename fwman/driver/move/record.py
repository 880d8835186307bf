"""The move's record (``/var/lib/fwman/driver-move.json``: from, to, the stage), where its working set lies, the
refusal, and what the boot-time catch-up says after a move (:func:`boot_note`).

Imported on the fast path of ``fwman modules catchup`` at boot: json and dataclasses, no builds, no apt.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from fwman.core import names, paths
from fwman.core.errors import BlockedError, FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver.build.manifest import install_dir
from fwman.host.base import Host
from fwman.host.capped import MAX_RECORD, read_capped

SCHEMA = "fwman.driver-move-record/1"
RECORD = paths.MOVE_RECORD
WORK = paths.MOVE_DIR
STAGED = f"{WORK}/staged"
STAGED_DEBS = f"{STAGED}/debs"
KEPT = f"{WORK}/kept"
KEPT_DEBS = f"{KEPT}/debs"
KEPT_INDEX = f"{KEPT}/index.json"
#: the stages a record goes through
STAGED_STAGE, COMMITTED, ROLLED_BACK, FINISHED = "staged", "committed", "rolled-back", "finished"
ROLLBACK_COMMAND = "fwman driver move --rollback"


class MoveRefused(BlockedError):
    """The move cannot be made as asked (a build fails for a kernel, a version apt does not offer): exit 3,
    nothing changed."""


@dataclass
class PackageMove:
    """One NVIDIA user-space package of the move: installed version and the version of the target."""

    name: str
    installed: str
    target: str


@dataclass
class MoveRecord:
    """The document in ``/var/lib/fwman/driver-move.json``: what the last move did and where it stands."""

    from_version: str | None
    to_version: str
    stage: str
    kernels: list[str]
    from_branch: str | None = None
    to_branch: str | None = None
    fork: str | None = None
    packages: list[PackageMove] = field(default_factory=list)
    hold_moved: bool = False
    at: str = ""
    #: the container roots whose own user space moved with the host's (NVIDIA's .run, --no-kernel-modules)
    containers: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        """Return the record as JSON bytes (schema :data:`SCHEMA`)."""
        doc = {"schema": SCHEMA, **asdict(self)}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> MoveRecord:
        """Return the record of ``data``. Raises ParseError naming the field that is wrong."""
        doc = parse_json(data, RECORD)
        if not isinstance(doc, dict):
            raise ParseError(RECORD, "document", "not an object")
        for key in ("to_version", "stage"):
            if not isinstance(doc.get(key), str):
                raise ParseError(RECORD, key, "missing or not a string")
        for key in ("from_version", "from_branch", "to_branch", "fork"):
            if doc.get(key) is not None and not isinstance(doc.get(key), str):
                raise ParseError(RECORD, key, "not a string")
        kernels = doc.get("kernels", [])
        # a record is read back as the command line is (it may have been edited): the names it holds become paths
        if not isinstance(kernels, list) or not all(names.is_kernel_release(k) for k in kernels):
            raise ParseError(RECORD, "kernels", "not a list of kernel releases")
        containers = doc.get("containers", [])
        if not isinstance(containers, list) or not all(_is_root_path(c) for c in containers):
            raise ParseError(RECORD, "containers", "not a list of absolute container roots")
        packages = []
        for entry in doc.get("packages", []) or []:
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) for k in ("name", "installed", "target")
            ):
                raise ParseError(RECORD, "packages", "an entry is not {name, installed, target}")
            packages.append(PackageMove(entry["name"], entry["installed"], entry["target"]))
        return cls(
            doc.get("from_version"), doc["to_version"], doc["stage"], list(kernels), doc.get("from_branch"),
            doc.get("to_branch"), doc.get("fork"), packages, bool(doc.get("hold_moved", False)), str(doc.get("at", "")),
            list(containers),
        )  # fmt: skip


def read_record(host: Host) -> MoveRecord | None:
    """Return the move record, None when no move was made. Raises ParseError when it is there but unreadable."""
    try:
        if not host.exists(RECORD):
            return None
    except NotRecordedError:
        return None
    return MoveRecord.from_json(read_capped(host, RECORD, MAX_RECORD, "driver move record"))


@dataclass
class WriteRecord:
    """Write the move record at a stage (a named step, so the dry run says which)."""

    record: MoveRecord

    def describe(self) -> str:
        """Return the record's step."""
        r = self.record
        return f"record the move {r.from_version or 'unknown'} -> {r.to_version}: {r.stage} ({RECORD})"

    def is_needed(self, host: Host) -> bool:
        """Return True unless the record is at this stage of this move."""
        try:
            now = read_record(host)
        except ParseError:
            return True
        return now is None or (now.from_version, now.to_version, now.stage) != (
            self.record.from_version, self.record.to_version, self.record.stage,
        )  # fmt: skip

    def apply(self, host: Host) -> None:
        """Write it."""
        host.write_bytes(RECORD, self.record.to_json())


def boot_note(host: Host) -> str | None:
    """Return what the boot-time service says after a move whose module is not the one loaded (None: nothing to
    say: no committed move, or the loaded module is the new version). Never raises."""
    try:
        record = read_record(host)
    except FwmanError:
        return None
    if record is None or record.stage != COMMITTED:
        return None
    try:
        loaded = (
            host.read_text(paths.NVIDIA_MODULE_VERSION).strip() if host.exists(paths.NVIDIA_MODULE_VERSION) else None
        )
    except FwmanError:
        loaded = None
    if loaded == record.to_version:
        return None
    state = f"the nvidia module loaded is {loaded}" if loaded else "no nvidia module is loaded"
    return (
        f"after the driver move {record.from_version or 'unknown'} -> {record.to_version}, {state}: if the new "
        f"module cannot load (`journalctl -k -b | grep -i nvidia` says why), go back with `{ROLLBACK_COMMAND}` "
        "and reboot"
    )


def module_version(host: Host, kver: str) -> str | None:
    """Return the version fwman's installed nvidia.ko of ``kver`` says (``modinfo`` version), None when absent."""
    from fwman.driver.kmod.kofile import read_module

    path = f"{install_dir(kver)}/nvidia.ko"
    try:
        return read_module(host.read_bytes(path)).version if host.exists(path) else None
    except (MissingError, ParseError):
        return None


def _is_root_path(value: object) -> bool:
    """Return True when ``value`` is an absolute, normalised path (no ``..``, no empty or ``.`` parts)."""
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        return False
    parts = value.split("/")[1:]
    return all(part not in ("", ".", "..") for part in parts) or value == "/"
