"""Where fwman keeps its per-kernel module state, and the manifest that says which modules are ours.

Patched and stock modules carry the same ``version=`` string, so fwman records its own identity: after every
successful install it writes ``/var/lib/fwman/modules/<kver>.json``::

    {"kernel": "6.1.0-50-amd64", "fork": "...", "branch": "570.86.16-p2p", "commit": "<sha1>",
     "modules": {"nvidia": {"path": "/lib/modules/6.1.0-50-amd64/updates/fwman/nvidia.ko",
                            "sha256": "...", "size": 12345}, ...},
     "built_at": "2026-11-29T08:30:00+00:00", ...}

Next to it, two markers that are deliberately *not* ``*.json`` (readers that list manifests never see them):
``<kver>.failed`` (the last build failed: automatic runs skip it, as akmods does, while nothing it was built with
changed: :mod:`fwman.driver.build.attempt`) and
``<kver>.pending`` (the kernel needs a build that could not run yet: no headers, lock busy). A copy of the
installed modules is kept in ``<kver>.d/`` so a module DKMS moved away can be put back without a rebuild.

This module is imported on the fast path of ``fwman modules catchup`` at boot: it uses json and dataclasses
only (no pydantic), and :func:`manifest_is_current` checks sizes with ``stat`` instead of hashing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from fwman.core import clock, names, paths
from fwman.core.errors import MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.host.actions import Action

INSTALL_SUBDIR = "updates/fwman"
WHAT = "module manifest"
_R = TypeVar("_R", bound="BuildRecord")


def manifest_path(kver: str) -> str:
    """Return the host path of the manifest of kernel ``kver``."""
    return f"{paths.MODULES_STATE_DIR}/{kver}.json"


def failed_path(kver: str) -> str:
    """Return the host path of the failure marker of kernel ``kver``."""
    return f"{paths.MODULES_STATE_DIR}/{kver}.failed"


def pending_path(kver: str) -> str:
    """Return the host path of the pending marker of kernel ``kver``."""
    return f"{paths.MODULES_STATE_DIR}/{kver}.pending"


def store_dir(kver: str) -> str:
    """Return the host directory holding fwman's copy of the modules installed for ``kver``."""
    return f"{paths.MODULES_STATE_DIR}/{kver}.d"


def install_dir(kver: str) -> str:
    """Return the host directory the modules of ``kver`` are installed in."""
    return f"{paths.modules_dir(kver)}/{INSTALL_SUBDIR}"


def build_log_path(kver: str) -> str:
    """Return the host path of the build log of kernel ``kver``."""
    return f"{paths.LOG_DIR}/build-{kver}.log"


def now_iso() -> str:
    """Return the current UTC time as an ISO 8601 string (seconds)."""
    return clock.now_utc().replace(microsecond=0).isoformat()


def sha256_hex(data: bytes) -> str:
    """Return the SHA-256 of ``data`` as lowercase hex."""
    import hashlib  # here: `fwman audit` imports this module but hashes only where a manifest exists

    return hashlib.sha256(data).hexdigest()


@dataclass(kw_only=True)
class BuildRecord:
    """What a build was made from, as its manifest records it: the part of a manifest that travels with the
    modules (a bundle carries it to another host, whose manifest records it again)."""

    fork: str | None = None
    branch: str | None = None
    commit: str | None = None
    #: a local source directory (``--source``) or the fork URL
    source: str | None = None
    #: the first line of ``cc --version`` the modules were built with
    compiler: str | None = None
    #: hash algorithm used to sign the modules, or None when unsigned
    signed: str | None = None
    built_at: str | None = None

    @classmethod
    def of(cls, holder: Manifest | BuildRecord) -> BuildRecord:
        """Return the build record of ``holder`` (a manifest, or a bundle document): its fields of these names."""
        return BuildRecord(**{f.name: getattr(holder, f.name) for f in fields(BuildRecord)})

    def onto(self, target: _R) -> _R:
        """Return ``target`` (a build record with more fields: a bundle document) holding this record's values."""
        return replace(target, **{f.name: getattr(self, f.name) for f in fields(BuildRecord)})


@dataclass
class ModuleEntry:
    """One installed module file: where it is and what it must hash to."""

    path: str
    sha256: str
    size: int | None = None


@dataclass
class Manifest:
    """What fwman installed for one kernel (the document in ``<kver>.json``)."""

    kernel: str
    fork: str | None
    branch: str | None
    commit: str | None
    modules: dict[str, ModuleEntry]
    built_at: str
    #: a local source directory (``--source``) or the fork URL
    source: str | None = None
    #: the first line of ``cc --version`` the modules were built with
    compiler: str | None = None
    #: hash algorithm used to sign the modules, or None when unsigned
    signed: str | None = None
    #: the kernel-independent objects came from the object cache
    object_cache_hit: bool = False
    #: the patches of /etc/fwman/patches.d applied for this kernel: [{"name", "sha256", "kernels"}]
    patches: list[dict[str, str | None]] = field(default_factory=list)
    #: a donor-patch fork's build: {"tag", "sha256", "patch"}: NVIDIA's upstream tag ``branch`` (at ``commit``)
    #: with the patch of that sha256 applied (docs/driver-branches.md); None for a branch or a local tree
    donor_patch: dict[str, str] | None = None

    @classmethod
    def from_record(cls, kernel: str, modules: dict[str, ModuleEntry], record: BuildRecord) -> Manifest:
        """Return the manifest of ``modules`` installed for ``kernel``, built as ``record`` says (``built_at``
        defaults to now). The one place a build record becomes a manifest (:meth:`BuildRecord.of` is the other
        way)."""
        fields_of = {f.name: getattr(record, f.name) for f in fields(BuildRecord)}
        return cls(kernel=kernel, modules=modules, **{**fields_of, "built_at": record.built_at or now_iso()})

    def to_json(self) -> bytes:
        """Return the manifest as UTF-8 JSON bytes (stable key order)."""
        return (json.dumps(asdict(self), indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """Return the manifest in ``data``. Raises ParseError naming the field that is wrong."""
        doc = parse_json(data, WHAT, "document")
        if not isinstance(doc, dict):
            raise ParseError(WHAT, "document", "not a JSON object")
        kernel = _str(doc, "kernel", required=True)
        if kernel is None or not names.is_kernel_release(kernel):
            raise ParseError(WHAT, "kernel", f"{str(kernel)[:70]!r} is not a kernel release (as --kernel checks one)")
        raw_modules = doc.get("modules")
        if not isinstance(raw_modules, dict) or not raw_modules:
            raise ParseError(WHAT, "modules", "missing or empty")
        modules: dict[str, ModuleEntry] = {}
        for name, entry in raw_modules.items():
            if not isinstance(entry, dict):
                raise ParseError(WHAT, f"modules.{name}", "not an object")
            path, digest, size = entry.get("path"), entry.get("sha256"), entry.get("size")
            if not isinstance(path, str) or not path.startswith("/"):
                raise ParseError(WHAT, f"modules.{name}.path", "missing or not an absolute path")
            if not isinstance(digest, str) or len(digest) != 64:
                raise ParseError(WHAT, f"modules.{name}.sha256", "missing or not a SHA-256 hex digest")
            if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
                raise ParseError(WHAT, f"modules.{name}.size", "not a non-negative integer")
            modules[str(name)] = ModuleEntry(path, digest.lower(), size)
        hit = doc.get("object_cache_hit", False)
        raw_patches = doc.get("patches") or []
        if not isinstance(raw_patches, list) or not all(
            isinstance(p, dict)
            and isinstance(p.get("name"), str)
            and all(isinstance(v, str | None) for v in p.values())
            for p in raw_patches
        ):
            raise ParseError(WHAT, "patches", "not a list of {name, sha256, kernels} objects")
        donor = doc.get("donor_patch")
        if donor is not None and (
            not isinstance(donor, dict) or not all(isinstance(v, str) for v in donor.values()) or "sha256" not in donor
        ):
            raise ParseError(WHAT, "donor_patch", "not a {tag, sha256, patch} object of strings")
        return cls(
            kernel=kernel or "",
            modules=modules,
            built_at=_str(doc, "built_at") or "",
            **{key: _str(doc, key) for key in ("fork", "branch", "commit", "source", "compiler", "signed")},
            object_cache_hit=bool(hit) if isinstance(hit, bool) else False,
            patches=[{str(k): v for k, v in p.items()} for p in raw_patches],
            donor_patch={str(k): str(v) for k, v in donor.items()} if donor is not None else None,
        )


def _str(doc: dict[str, Any], key: str, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ParseError(WHAT, key, "missing or not a string" if required else "not a string")
    return value


def built_kernels(host: Host) -> list[str]:
    """Return the installed kernels that have a readable fwman manifest (fwman built their modules), in
    installed_kernels' order; a kernel whose manifest cannot be read is left out. Never raises for one kernel."""
    from fwman.core.errors import FwmanError
    from fwman.driver.kernels import installed_kernels

    def readable(kver: str) -> bool:
        try:
            return load_manifest(host, kver) is not None
        except FwmanError:
            return False

    return [kver for kver in installed_kernels(host) if readable(kver)]


def load_manifest(host: Host, kver: str) -> Manifest | None:
    """Return the manifest of ``kver``, or None when there is none. Raises ParseError when it is corrupt."""
    path = manifest_path(kver)
    if not host.exists(path):
        return None
    return Manifest.from_json(host.read_bytes(path))


def write_manifest(host: Host, manifest: Manifest) -> None:
    """Write ``manifest`` atomically to its place."""
    host.write_bytes(manifest_path(manifest.kernel), manifest.to_json())


@dataclass
class WriteManifest:
    """Make the manifest of ``manifest.kernel`` say ``manifest`` (an action, see fwman.host.actions).

    ``built_at`` and ``object_cache_hit`` describe the build that produced the files: when only they differ,
    the same modules were rebuilt, and the manifest (with the first build's record) is left as it was.
    """

    manifest: Manifest

    def describe(self) -> str:
        """Return which manifest is written."""
        return f"write {manifest_path(self.manifest.kernel)}"

    def is_needed(self, host: Host) -> bool:
        """Return True when the manifest is absent, corrupt, or differs in more than how the build went."""
        try:
            existing = load_manifest(host, self.manifest.kernel)
        except (MissingError, ParseError):
            return True
        if existing is None:
            return True
        same_build = replace(existing, built_at=self.manifest.built_at, object_cache_hit=self.manifest.object_cache_hit)
        return same_build != self.manifest

    def apply(self, host: Host) -> None:
        """Write the manifest atomically."""
        write_manifest(host, self.manifest)


def manifest_is_current(host: Host, kver: str) -> bool:
    """Return True when ``kver`` has a readable manifest whose module files all exist with the recorded size.

    The boot-time fast path: one small read and a ``stat`` per module, no hashing (``fwman modules status``
    hashes). Never raises: a corrupt manifest or a missing file is simply "not current".
    """
    try:
        manifest = load_manifest(host, kver)
        if manifest is None:
            return False
        for entry in manifest.modules.values():
            size = host.stat_size(entry.path)
            if entry.size is not None and size != entry.size:
                return False
    except (MissingError, ParseError):
        return False
    return True


@dataclass
class Marker:
    """A failure or pending marker: why, for which source, and when."""

    kernel: str
    reason: str
    at: str = field(default_factory=now_iso)
    commit: str | None = None
    fork: str | None = None
    branch: str | None = None
    detail: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Return the marker as JSON bytes."""
        return (json.dumps(asdict(self), indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Marker:
        """Return the marker in ``data``. Raises ParseError when it is not one."""
        doc = parse_json(data, "module marker", "document")
        if not isinstance(doc, dict) or not isinstance(doc.get("kernel"), str):
            raise ParseError("module marker", "kernel", "missing")
        if not names.is_kernel_release(doc["kernel"]):
            raise ParseError("module marker", "kernel", "not a kernel release (as --kernel checks one)")
        detail = doc.get("detail") if isinstance(doc.get("detail"), dict) else {}
        return cls(
            kernel=doc["kernel"],
            reason=str(doc.get("reason", "")),
            at=str(doc.get("at", "")),
            **{key: doc.get(key) if isinstance(doc.get(key), str) else None for key in ("commit", "fork", "branch")},
            detail={str(k): str(v) for k, v in (detail or {}).items()},
        )


def read_marker(host: Host, path: str) -> Marker | None:
    """Return the marker at ``path``, or None when absent.

    A marker that cannot be read is never taken as none: it comes back as a marker whose reason says so (the
    kernel then counts as failed or pending, never as safe, and ``modules status`` shows the file and the fix).
    """
    if not host.exists(path):
        return None
    try:
        return Marker.from_json(host.read_bytes(path))
    except (MissingError, ParseError) as e:
        name = path.rsplit("/", 1)[-1]
        kver = name.rsplit(".", 1)[0]
        return Marker(kver, f"marker {path} unreadable ({e.message}): check it, then remove it", at="")


def write_marker(host: Host, path: str, marker: Marker) -> None:
    """Write ``marker`` atomically to ``path``, unless the marker there says the same (then nothing is written).

    "The same" leaves the date out: a kernel still pending for the same reason keeps the date it first was,
    so the boot-time catch-up does not rewrite the file at every boot.
    """
    existing = read_marker(host, path)
    if existing is not None and existing.at and replace(marker, at=existing.at) == existing:
        return
    host.write_bytes(path, marker.to_json())


@dataclass(frozen=True)
class KernelRecord:
    """The one owner of a kernel's state record: its manifest (fwman's modules are installed and in effect), its
    pending marker (a build that could not run yet) and its failed marker (the last build failed). The build,
    the bundle import and the lifecycle's plan (:mod:`fwman.driver.lifecycle`) write them only through here, so
    the three always agree: a manifest written clears both markers, a failure clears the pending one."""

    kver: str

    def pending(self, host: Host, marker: Marker) -> None:
        """Mark the kernel pending for ``marker.reason`` (unchanged when the marker says the same)."""
        write_marker(host, pending_path(self.kver), marker)

    def failed(self, host: Host, marker: Marker) -> None:
        """Mark the kernel's build failed for ``marker.reason``; it is no longer pending."""
        write_marker(host, failed_path(self.kver), marker)
        host.unlink(pending_path(self.kver))

    def installed(self, manifest: Manifest) -> list[Action]:
        """Return the actions that record ``manifest`` as the kernel's installed modules: the manifest written
        (when it says something new), the failed and pending markers cleared."""
        from fwman.host.actions import RemoveFile  # the readers of manifests (audit, the boot fast path) skip it

        return [WriteManifest(manifest), RemoveFile(failed_path(self.kver)), RemoveFile(pending_path(self.kver))]
