"""A driver version move: the patched modules for every kernel and the NVIDIA user space, from one version to
another together, with a way back.

The move is a list of actions (:mod:`fwman.host.actions`), in three parts, so that a refusal changes nothing and a
rollback restores the previous set exactly:

1. **stage**: the new version's modules are built for every installed kernel (in a build directory and log of
   the move's own, against each kernel's installed headers) and staged in ``/var/lib/fwman/move/staged``; the
   new user-space packages are downloaded (``apt-get download NAME=VERSION``) next to them, and the installed
   ones too (into ``kept/debs``: the way back must not depend on the repository still offering them). A build
   that fails for one kernel stops the move here: the use case removes what was staged and nothing else was
   touched.
2. **keep**: every file the commit changes (the modules of each kernel and fwman's copy of them, the
   manifests, the depmod override, the module source record, the user-space hold's three files) is copied,
   bytes and mode (or "absent"), into ``kept/`` with an index.
3. **commit**: the staged modules installed (staged, swapped in, depmod), the user space installed from the
   downloaded packages, the hold moved to the new versions, the module source record pointing at the new
   branch (a later kernel's hook builds the new version), and the move record written.

The reboot is the owner's. ``--rollback`` installs the kept packages, writes the kept files back (or removes
those that were absent), runs depmod, and records the rollback; the kept set stays until the owner ends the move.
The record (``/var/lib/fwman/driver-move.json``) says from, to and the stage; the boot-time catch-up reads it to
name the rollback when the new module is not the one loaded (:func:`boot_note`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fwman.core import clock, names, paths
from fwman.core.errors import BlockedError, FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver import userspace_hold
from fwman.driver.aptsim import apt_root_options
from fwman.driver.build import install
from fwman.driver.build.manifest import (
    Manifest,
    WriteManifest,
    failed_path,
    install_dir,
    load_manifest,
    manifest_path,
    pending_path,
    sha256_hex,
    store_dir,
)
from fwman.driver.build.source import Source, SourceSpec
from fwman.driver.localfs import local_dir, root_prefix
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Action, RemoveFile, Report, Tracked, apply_all, silent
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


# -- the pure parts ----------------------------------------------------------------------------------------------
def upstream_version(debian_version: str) -> str:
    """Return the upstream part of a Debian package version: without the epoch (``1:``) and the Debian revision
    (after the last ``-``), as deb-version(7) splits it. ``570.86.16-1`` -> ``570.86.16``;
    ``535.216.01-1~deb12u1`` -> ``535.216.01``."""
    text = debian_version.strip()
    if ":" in text.split("-", 1)[0]:
        text = text.split(":", 1)[1]
    return text.rsplit("-", 1)[0] if "-" in text else text


def parse_madison(text: str) -> dict[str, list[str]]:
    """Return {package: [versions, in apt's order]} from ``apt-cache madison`` output
    (``NAME | VERSION | SOURCE`` lines); other lines are skipped. Never raises."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not parts[0] or not parts[1] or " " in parts[0] or " " in parts[1]:
            continue
        versions = out.setdefault(parts[0], [])
        if parts[1] not in versions:
            versions.append(parts[1])
    return out


def version_for(versions: Sequence[str], target: str) -> str | None:
    """Return the first of ``versions`` (apt lists the preferred first) whose upstream part is ``target``, or
    None."""
    return next((v for v in versions if upstream_version(v) == target), None)


def deb_file_prefix(name: str, version: str) -> str:
    """Return how the file ``apt-get download NAME=VERSION`` writes begins: ``NAME_VERSION_`` with the epoch's
    colon written ``%3a``, as apt names downloaded archives."""
    return f"{name}_{version.replace(':', '%3a')}_"


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


def staged_dir(kver: str) -> str:
    """Return the directory the new modules of ``kver`` are staged in."""
    return f"{STAGED}/modules/{kver}"


def staged_stamp(kver: str) -> str:
    """Return the file that says what the staged modules of ``kver`` were built from."""
    return f"{STAGED}/modules/{kver}.json"


def build_workdir(kver: str) -> str:
    """Return the move's own build directory for ``kver`` (the installed kernel's build state is not touched)."""
    return f"{paths.CACHE_DIR}/move/{kver}"


def build_log(kver: str) -> str:
    """Return the log of the move's build for ``kver``."""
    return f"{paths.LOG_DIR}/move-{kver}.log"


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


# -- stage ---------------------------------------------------------------------------------------------------------
@dataclass
class SourceOnce:
    """The fork branch of the target version, resolved (fetched) once for every kernel's build."""

    spec: SourceSpec
    fetch: Callable[[], Source]
    source: Source | None = None

    def get(self) -> Source:
        """Return the resolved source. Raises what the resolution raises (SourceError: the branch cannot be had)."""
        if self.source is None:
            self.source = self.fetch()
        return self.source


@dataclass
class StageModules:
    """Build the target version's modules for ``kver`` and stage them; a failed build refuses the move."""

    kver: str
    target: str
    source: SourceOnce
    report: Report = silent
    #: wall seconds of the build (the tree, the patches, make), once applied: not the move's own time
    seconds: float = 0.0

    def describe(self) -> str:
        """Return what is built and where it is staged."""
        spec = self.source.spec.describe()
        return f"build the {self.target} modules for {self.kver} ({spec}), stage them in {staged_dir(self.kver)}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless every module is staged with a stamp naming the target version."""
        try:
            stamp = parse_json(host.read_bytes(staged_stamp(self.kver)), "staged stamp")
        except (MissingError, ParseError):
            return True
        if not isinstance(stamp, dict) or stamp.get("version") != self.target:
            return True
        return not all(host.exists(f"{staged_dir(self.kver)}/{n}.ko") for n in MODULE_NAMES)

    def apply(self, host: Host) -> None:
        """Build and stage. Raises MoveRefused when the build fails or the branch builds another version."""
        from fwman.driver.build.kbuild import KernelTree, compile_for_kernel, kernel_patches
        from fwman.driver.build.pipeline import phase_lines
        from fwman.driver.build.source import source_version
        from fwman.driver.kernels import headers_present
        from fwman.driver.kmod import sign
        from fwman.driver.kmod.kofile import read_module

        if not headers_present(host, self.kver):
            raise MoveRefused(
                f"kernel {self.kver} has no headers: the {self.target} modules cannot be built for it, so the move "
                "would leave it without working modules",
                hint=f"install its headers (apt install linux-headers-{self.kver}) or remove the kernel, then move",
            )
        source = self.source.get()
        version = source_version(host, source)
        if version != self.target:
            raise MoveRefused(f"{source.label} builds driver {version or 'unknown'}, not {self.target}")
        moddir = paths.modules_dir(self.kver)
        common = f"{moddir}/source"
        tree = KernelTree(
            f"{moddir}/build", common if host.is_dir(f"{common}/include") else None,
            build_workdir(self.kver), build_log(self.kver),
        )  # fmt: skip
        patches = kernel_patches(host, self.kver, report=self.report)
        result = compile_for_kernel(
            host, source, self.kver, self.report, progress=phase_lines(self.report), patches=patches, headers=tree
        )
        self.seconds = result.seconds
        if not result.ok:
            failure = result.failure
            where = f"{failure.file}:{failure.line}: " if failure and failure.file and failure.line else ""
            raise MoveRefused(
                f"the {self.target} modules do not build for {self.kver}: {where}"
                f"{failure.message if failure else 'make failed'}; nothing was changed",
                hint=f"the build log is {result.log_path}; every installed kernel must build before the driver moves",
            )
        built = {name: host.read_bytes(path) for name, path in result.modules.items()}
        for name, data in built.items():
            info = read_module(data)
            if info.kernel_release != self.kver:
                raise MoveRefused(f"{name}.ko built for {self.kver} has vermagic {info.vermagic!r}")
        signed: str | None = None
        key = sign.configured_key(host)
        if key is not None:
            built, signed = sign.sign_for_kernel(host, self.kver, built, key)
        host.remove_tree(staged_dir(self.kver))
        for name, data in built.items():
            host.write_bytes(f"{staged_dir(self.kver)}/{name}.ko", data)
        stamp = {
            "kernel": self.kver, "version": self.target, "fork": source.fork, "branch": source.branch,
            "commit": source.commit or source.source_id, "source": source.location, "compiler": result.compiler,
            "signed": signed, "object_cache_hit": result.cache_hit, "patches": [p.to_json() for p in result.patches],
        }  # fmt: skip
        host.write_bytes(staged_stamp(self.kver), (json.dumps(stamp, indent=2, sort_keys=True) + "\n").encode())
        host.remove_tree(result.tree)


def apt_argv(host: Host, *args: str) -> list[str]:
    """Return ``apt-get ARGS`` pointed at a temp root's configuration and lists (none for ``/``)."""
    return ["apt-get", *apt_root_options(root_prefix(host)), *args]


def staged_debs(host: Host, directory: str, packages: Mapping[str, str]) -> dict[str, str] | None:
    """Return {package: host path of its downloaded .deb} in ``directory``, None when one is missing."""
    try:
        files = host.listdir(directory) if host.is_dir(directory) else []
    except MissingError:
        files = []
    out: dict[str, str] = {}
    for name, version in packages.items():
        found = [f for f in files if f.startswith(deb_file_prefix(name, version)) and f.endswith(".deb")]
        if not found:
            return None
        out[name] = f"{directory}/{sorted(found)[0]}"
    return out


@dataclass
class DownloadDebs:
    """Download ``packages`` ({name: version}) with ``apt-get download`` into ``directory``."""

    directory: str
    packages: dict[str, str]
    what: str
    #: wall seconds apt took, once applied: not the move's own time
    seconds: float = 0.0

    def describe(self) -> str:
        """Return which packages are downloaded where."""
        names = ", ".join(f"{n} {v}" for n, v in sorted(self.packages.items()))
        return f"download {self.what} ({names}) into {self.directory}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless a .deb of every package at its version is there."""
        return staged_debs(host, self.directory, self.packages) is None

    def command(self, host: Host) -> list[str]:
        """Return the download command (for the door's check)."""
        return apt_argv(host, "download", *(f"{n}={v}" for n, v in sorted(self.packages.items())))

    def apply(self, host: Host) -> None:
        """Download. Raises MoveRefused with apt's message when a package cannot be had at its version."""
        host.mkdir(self.directory)
        began = clock.monotonic()
        result = host.run(self.command(host), timeout=1800, cwd=local_dir(host, self.directory, "download into"))
        self.seconds = clock.monotonic() - began
        if result.missing:
            raise MissingError("apt-get not found: the user space is moved with apt")
        if not result.ok or staged_debs(host, self.directory, self.packages) is None:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise MoveRefused(
                f"cannot download {self.what}: {tail[-1] if tail else f'apt-get exit {result.rc}'}",
                hint="every package must be had at its exact version before the driver moves; check `apt-cache "
                "madison NAME`",
            )


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


# -- containers with their own user space ------------------------------------------------------------------------
#: where a container root's NVIDIA libraries are (Debian's multiarch directory) and which entries are NVIDIA's
CONTAINER_LIBDIR = "/usr/lib/x86_64-linux-gnu"
CONTAINER_LIBS = r"lib(cuda|nvidia-[a-z0-9-]+)\.so(\.[0-9.]+)?"


def run_name(version: str) -> str:
    """Return the file name of NVIDIA's installer of ``version`` (``NVIDIA-Linux-x86_64-VERSION.run``)."""
    return f"NVIDIA-Linux-x86_64-{version}.run"


def container_owned(root: str) -> list[tuple[str, str]]:
    """Return the directories (and name patterns) of a container root's NVIDIA libraries and tools, kept whole."""
    base = root.rstrip("/")
    return [(f"{base}{CONTAINER_LIBDIR}", CONTAINER_LIBS), (f"{base}/usr/bin", r"nvidia-smi")]


@dataclass
class StageRun:
    """Stage NVIDIA's ``.run`` installer of ``target`` (the owner's file, read by ``read``) once its SHA-256 is the
    one the owner gave."""

    read: Callable[[], bytes]
    sha256: str
    target: str

    @property
    def path(self) -> str:
        """Return where the installer is staged."""
        return f"{STAGED}/{run_name(self.target)}"

    def describe(self) -> str:
        """Return what is staged."""
        return f"stage {run_name(self.target)} (sha256 {self.sha256[:12]}..., checked) in {STAGED}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless the staged installer hashes as given."""
        try:
            return sha256_hex(host.read_bytes(self.path)) != self.sha256
        except MissingError:
            return True

    def apply(self, host: Host) -> None:
        """Check and stage. Raises MoveRefused when the file does not hash as given."""
        data = self.read()
        if sha256_hex(data) != self.sha256:
            raise MoveRefused(f"{run_name(self.target)}: sha256 {sha256_hex(data)} is not the {self.sha256} given")
        host.write_bytes(self.path, data, 0o755)


@dataclass
class InstallRunInContainer:
    """Install the staged ``.run``'s user space in a container root: ``sh FILE --no-kernel-modules --silent``
    chrooted into it (the container's own libraries, as ``pct exec`` or ``systemd-nspawn`` would run it)."""

    root: str
    target: str
    versions: Callable[[Host, str], set[str]]

    def describe(self) -> str:
        """Return the step."""
        return (
            f"install the {self.target} user space in the container root {self.root} "
            f"(chroot: sh /tmp/{run_name(self.target)} --no-kernel-modules --silent)"
        )

    def is_needed(self, host: Host) -> bool:
        """Return True unless the container's driver libraries are all of the target version."""
        return self.versions(host, self.root) != {self.target}

    def command(self, host: Host) -> list[str]:
        """Return the installer's command line."""
        inner = f"/tmp/{run_name(self.target)}"
        return ["chroot", local_dir(host, self.root, "install into"), "sh", inner, "--no-kernel-modules", "--silent"]

    def apply(self, host: Host) -> None:
        """Copy the staged installer into the container, run it, remove the copy. Raises FwmanError when it fails or
        the container's libraries are not all of the target version afterwards."""
        from fwman.core.errors import VerificationError

        inside = f"{self.root.rstrip('/')}/tmp/{run_name(self.target)}"
        host.write_bytes(inside, host.read_bytes(f"{STAGED}/{run_name(self.target)}"), 0o755)
        try:
            result = host.run(self.command(host), timeout=1800)
        finally:
            host.unlink(inside)
        if not result.ok:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise FwmanError(
                f"{run_name(self.target)} in {self.root} failed (exit {result.rc}): {tail[-1] if tail else ''}"
            )
        found = self.versions(host, self.root)
        if found != {self.target}:
            raise VerificationError(
                f"{self.root}: the driver libraries are {', '.join(sorted(found))} after the install"
            )


# -- commit --------------------------------------------------------------------------------------------------------
@dataclass
class InstallStaged:
    """Install the staged modules of ``kver`` (staged, swapped in, depmod, verified) and write its manifest."""

    kver: str
    target: str
    branch: str | None

    def describe(self) -> str:
        """Return what is installed."""
        return (
            f"install the staged {self.target} modules for {self.kver} into {install_dir(self.kver)} (depmod, manifest)"
        )

    def _stamp(self, host: Host) -> dict[str, Any] | None:
        try:
            doc = parse_json(host.read_bytes(staged_stamp(self.kver)), "staged stamp")
        except (MissingError, ParseError):
            return None
        return doc if isinstance(doc, dict) else None

    def is_needed(self, host: Host) -> bool:
        """Return True unless the installed manifest names the staged build (or, before staging, the branch)."""
        try:
            manifest = load_manifest(host, self.kver)
        except (ParseError, MissingError):
            return True
        if manifest is None:
            return True
        stamp = self._stamp(host)
        if stamp is None:
            return manifest.branch != self.branch
        return (manifest.commit, manifest.branch) != (stamp.get("commit"), stamp.get("branch"))

    def apply(self, host: Host) -> None:
        """Install. Raises MissingError when nothing is staged, VerificationError when the set is not in effect."""
        from fwman.core.errors import VerificationError
        from fwman.driver.build.manifest import now_iso

        stamp = self._stamp(host)
        if stamp is None:
            raise MissingError(f"nothing staged for {self.kver} in {staged_dir(self.kver)}")
        built = {n: host.read_bytes(f"{staged_dir(self.kver)}/{n}.ko") for n in MODULE_NAMES}
        actions, entries = install.install_actions(self.kver, built)
        apply_all(host, actions)
        manifest = Manifest(
            kernel=self.kver, fork=stamp.get("fork"), branch=stamp.get("branch"), commit=stamp.get("commit"),
            modules=entries, built_at=now_iso(), source=stamp.get("source"), compiler=stamp.get("compiler"),
            signed=stamp.get("signed"), object_cache_hit=bool(stamp.get("object_cache_hit")),
            patches=list(stamp.get("patches") or []),
        )  # fmt: skip
        bad = [c for c in install.check_installed(host, manifest) if not c.ok]
        if bad:
            raise VerificationError(f"{self.kver}: installed but not in effect: {bad[0].name}: {bad[0].problem}")
        apply_all(
            host, [WriteManifest(manifest), RemoveFile(failed_path(self.kver)), RemoveFile(pending_path(self.kver))]
        )


@dataclass
class InstallDebs:
    """Install the packages downloaded in ``directory`` ({name: version}) with apt (downgrades allowed: a
    rollback goes back)."""

    directory: str
    packages: dict[str, str]
    why: str
    #: wall seconds apt took, once applied: not the move's own time
    seconds: float = 0.0

    def describe(self) -> str:
        """Return which versions are installed."""
        names = ", ".join(f"{n} {v}" for n, v in sorted(self.packages.items()))
        return f"install {names} from {self.directory} ({self.why})"

    def is_needed(self, host: Host) -> bool:
        """Return True when an installed version differs from the wanted one."""
        installed = userspace_hold.installed_packages(host) or {}
        return any(installed.get(n) != v for n, v in self.packages.items())

    def command(self, host: Host) -> list[str]:
        """Return the install command (the .deb files, or the directory where they are not there yet)."""
        debs = staged_debs(host, self.directory, self.packages)
        files = [local_dir(host, p, "install from") for p in debs.values()] if debs else [f"{self.directory}/*.deb"]
        return apt_argv(host, "install", "-y", "-q", "--allow-downgrades", "--no-install-recommends", *sorted(files))

    def apply(self, host: Host) -> None:
        """Install. Raises MissingError when a package is not downloaded, FwmanError with apt's message."""
        if staged_debs(host, self.directory, self.packages) is None:
            raise MissingError(
                f"the packages {', '.join(sorted(self.packages))} are not downloaded in {self.directory}"
            )
        began = clock.monotonic()
        result = host.run(self.command(host), timeout=1800, env={"DEBIAN_FRONTEND": "noninteractive"})
        self.seconds = clock.monotonic() - began
        if not result.ok:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise FwmanError(f"apt-get install failed (exit {result.rc}): {tail[-1] if tail else 'no output'}")


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


@dataclass
class RemoveTree:
    """Remove a directory fwman made (``what`` names it)."""

    path: str
    what: str

    def describe(self) -> str:
        """Return what goes."""
        return f"remove {self.what} {self.path}"

    def is_needed(self, host: Host) -> bool:
        """Return True while it is there."""
        return host.exists(self.path)

    def apply(self, host: Host) -> None:
        """Remove it."""
        host.remove_tree(self.path)


# -- rollback ------------------------------------------------------------------------------------------------------
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
        from fwman.core.errors import VerificationError

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


def phases(actions: Sequence[Action], total: float) -> dict[str, float]:
    """Return where a move's ``total`` wall seconds went: ``builds`` (make, per kernel), ``packages`` (apt's
    downloads and installs), ``own`` (the rest: staging, keeping, installing the modules, depmod, the records)."""
    builds = sum(a.seconds for a in actions if isinstance(a, StageModules))
    packages = sum(a.seconds for a in actions if isinstance(a, DownloadDebs | InstallDebs))
    return {
        "builds": round(builds, 3),
        "packages": round(packages, 3),
        "own": round(total - builds - packages, 3),
        "total": round(total, 3),
    }


def _is_root_path(value: object) -> bool:
    """Return True when ``value`` is an absolute, normalised path (no ``..``, no empty or ``.`` parts)."""
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        return False
    parts = value.split("/")[1:]
    return all(part not in ("", ".", "..") for part in parts) or value == "/"
