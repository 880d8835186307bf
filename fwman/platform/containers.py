"""Containers: which user space each GPU container sees, read from its filesystem without starting it.

Proxmox LXC containers (``/etc/pve/lxc``: the mounted root filesystem), roots given with ``--container-root``,
and Docker and Podman containers. The facts only (:class:`ContainerAudit`, :class:`CdiSpecAudit`, filled in
here; ``problems`` and ``injected`` are written by the audit's rows, :mod:`fwman.reports.audit.rows`, which
judge them); ``fwman audit`` and the module build's lockstep check both read them.

A container's user-space driver comes from one of three places, and each is read where it lives:

- **CDI** (``--device nvidia.com/gpu=all``): the runtime mounts what the CDI spec names, by host path; the spec
  (``/etc/cdi``, ``/var/run/cdi``) is read and each library's version and existence checked (a spec written
  before a driver update names the old version's files);
- **NVIDIA's runtime hook** (``--runtime nvidia``, ``--gpus``): the hook mounts the host's libraries at start, so
  the container sees the host's version;
- **the image itself**: libraries shipped in the image (a ``libcuda`` of its own), read from the container's
  filesystem: the driver's merged directory when mounted, else its upper and lower layers (overlay), else
  ``podman mount`` (Podman's vfs) or the directory Docker's layer store names (Docker's vfs). Read from layers,
  the overlay's rules are applied (the kernel's Documentation/filesystems/overlayfs.rst): a whiteout (a
  character device 0/0, or a ``.wh.NAME`` file as exported layers and AUFS-style stores keep them) hides NAME in
  every layer below, and an opaque directory (xattr ``trusted.overlay.opaque``/``user.overlay.opaque`` ``y``, or
  a ``.wh..wh..opq`` file in it) hides what the layers below hold under it, as does a file or link over a
  directory; so a library deleted in a later layer (``RUN rm``) is not reported.

Also read from the filesystem: CUDA forward-compatibility libraries (``/usr/local/cuda*/compat``), the NCCL the
image ships (``libnccl.so.<version>`` or the pip wheel ``nvidia_nccl_cu*-<version>.dist-info``), and from
``inspect`` the environment that decides P2P (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, VLLM_SKIP_P2P_CHECK).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.bounded import OverLimit
from fwman.core.config import load_config
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host, is_this_machine
from fwman.host.capped import MAX_TEXT_FILE, read_capped, read_text_capped
from fwman.platform import cdi, engines, proxmox
from fwman.platform.userspace import LIB_DIRS, DriverLib, UserSpace, parse_lib_name, scan_userspace

_NCCL_FILE = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)")
_NCCL_WHEEL = re.compile(r"nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)[^/]*\.dist-info")
_PY_DIRS = ("/usr/local/lib", "/usr/lib", "/opt/conda/lib")


@dataclass(kw_only=True)
class ContainerAudit:
    """One container: Proxmox LXC, a root given with --container-root, or a Docker/Podman container."""

    name: str
    kind: str  # "lxc" | "root" | "docker" | "podman"
    root: str | None
    # "read", "not-mounted", "no-gpu", "hook" (libraries injected by the NVIDIA hook at start), "gone" (an
    # engine's container whose filesystem is not on disk)
    state: str
    versions: dict[str, list[str]] = field(default_factory=dict)  # version -> library paths
    compat: list[str] = field(default_factory=list)
    # Docker/Podman only (None / empty for the others)
    engine_state: str | None = None  # the engine's own state: running, exited, created
    image: str | None = None
    gpu: list[str] = field(default_factory=list)  # how it gets the GPU: "runtime nvidia", "--gpus (all)", "cdi ..."
    cdi_devices: list[str] = field(default_factory=list)
    legacy_hook: bool = False  # NVIDIA's runtime hook mounts the host's libraries at start
    injected: dict[str, list[str]] = field(default_factory=dict)  # version -> host paths a CDI spec mounts
    filesystem: str | None = None  # "merged directory", "image layers", "podman mount", "docker vfs directory"
    nccl: dict[str, list[str]] = field(default_factory=dict)  # NCCL version -> where in the image
    env: dict[str, str] = field(default_factory=dict)  # the P2P environment (NCCL_P2P_LEVEL, ...)
    mounts: list[str] = field(default_factory=list)  # "source -> destination"
    problems: list[str] = field(default_factory=list)  # why its row is a mismatch, one line each
    command: str | None = None  # entrypoint and command, for people (vLLM flags are looked for in it)
    # vLLM's P2P verdict cache (VLLM_CACHE_ROOT/gpu_p2p_access_cache_for_<devices>.json): {"0->1": true, ...}
    vllm_cache: dict[str, bool] | None = None
    vllm_cache_path: str | None = None  # the container path, and where it lies on the host
    vllm_cache_host_path: str | None = None


@dataclass(kw_only=True)
class CdiSpecAudit:
    """One CDI spec file: the driver versions of the libraries it mounts, and host paths it names that are gone."""

    path: str
    version: str | None = None  # cdiVersion
    kind: str | None = None
    devices: list[str] = field(default_factory=list)  # fully qualified names
    libs: dict[str, list[str]] = field(default_factory=dict)  # driver version -> host paths
    missing: list[str] = field(default_factory=list)
    error: str | None = None  # not a spec: why
    #: device nodes whose major is not the running kernel's: (node, the spec's major, /proc/devices' major)
    stale_majors: list[tuple[str, int, int]] = field(default_factory=list)
    #: nvidia-container-toolkit's nvidia-cdi-refresh path unit is installed (it regenerates the spec)
    refresh_unit: bool = False


def read_cdi_specs(host: Host, unreadable: list[str]) -> list[CdiSpecAudit]:
    """Return every CDI spec in the spec directories, parsed (or with its parse error)."""
    out: list[CdiSpecAudit] = []
    for directory in cdi.SPEC_DIRS:
        try:
            if not host.is_dir(directory):
                continue
            names = [n for n in host.listdir(directory) if cdi.is_spec_name(n)]
        except NotRecordedError:
            if host.local_path("/") is not None:  # a replay older than CDI support did not look: nothing to say
                unreadable.append(f"{directory} (not recorded)")
            continue
        except MissingError:
            unreadable.append(directory)
            continue
        for name in names:
            path = cdi.spec_path(directory, name)
            try:
                spec = cdi.parse_spec(read_capped(host, path, MAX_TEXT_FILE, "CDI spec"), path)
            except ParseError as e:
                out.append(CdiSpecAudit(path=path, error=e.detail))
            except (MissingError, NotRecordedError) as e:
                out.append(CdiSpecAudit(path=path, error=f"unreadable: {e.message}"))
            else:
                out.append(_spec_audit(host, spec))
    return out


def _spec_audit(host: Host, spec: cdi.CdiSpec) -> CdiSpecAudit:
    """Return a spec's library versions and the host paths it names that do not exist."""
    libs: dict[str, list[str]] = {}
    missing: list[str] = []
    for edits in (spec.edits, *(d.edits for d in spec.devices)):
        for m in edits.mounts:
            parsed = parse_lib_name(m.source.rsplit("/", 1)[-1])
            if parsed is not None:
                libs.setdefault(parsed[1], []).append(m.source)
            if not _exists(host, m.source):
                missing.append(m.source)
        for node in edits.device_nodes:
            if not _exists(host, node):
                missing.append(node)
    return CdiSpecAudit(
        path=spec.path,
        version=spec.version,
        kind=spec.kind,
        devices=spec.qualified(),
        libs={v: sorted(set(p)) for v, p in libs.items()},
        missing=sorted(set(missing)),
        stale_majors=cdi.stale_majors(spec, _proc_devices(host)),
        refresh_unit=any(_exists(host, unit, unrecorded=False) for unit in paths.CDI_REFRESH_UNITS),
    )


def _proc_devices(host: Host) -> dict[str, int]:
    """Return ``/proc/devices``' character majors ({} when it cannot be read: nothing is then called stale)."""
    try:
        return cdi.parse_proc_devices(read_text_capped(host, paths.PROC_DEVICES, cdi.MAX_PROC_DEVICES, "device list"))
    except (MissingError, NotRecordedError, OverLimit):
        return {}


def _exists(host: Host, path: str, unrecorded: bool = True) -> bool:
    """Return True when ``path`` exists; ``unrecorded`` on a replay that did not record it (True by default: a
    replay that did not look is no proof of absence; False where there would be nothing to name)."""
    try:
        return host.exists(path)
    except NotRecordedError:
        return unrecorded


def _layers(
    host: Host, c: engines.EngineContainer, mounted: str | None, mounted_how: str = "podman mount"
) -> tuple[list[str], str]:
    """Return (the directories that make the container's filesystem, top first; how they were found)."""
    candidates: list[tuple[list[str], str]] = []
    if c.merged_dir:
        candidates.append(([c.merged_dir], "merged directory"))
    if c.upper_dir or c.lower_dirs:
        candidates.append(([d for d in (c.upper_dir, *c.lower_dirs) if d], "image layers"))
    if mounted:
        candidates.append(([mounted], mounted_how))
    for dirs, how in candidates:
        try:
            # resolved first: a layer path reached through a link is scanned where it really is, so the scan's
            # "a link must not leave the container root" test compares like with like
            present = [host.realpath(d) for d in dirs if host.is_dir(d)]
        except (MissingError, NotRecordedError):
            continue
        if present and (how != "merged directory" or host.listdir(present[0])):
            return present, how
    return [], "none"


#: AUFS-style whiteout names, as layer tarballs (``docker save``, registries) and some stores keep them
WHITEOUT_PREFIX = ".wh."
OPAQUE_FILE = ".wh..wh..opq"


class LayerLookups:
    """Directory listings and overlay markers of layer directories, read once for every container."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.names: dict[str, list[str] | None] = {}
        self.markers: dict[str, str | None] = {}
        self.engine_roots: dict[str, str | None] = {}  # an engine's data root, asked once (Docker's vfs)

    def listing(self, path: str) -> list[str] | None:
        """Return the names in directory ``path``, None when it is not a directory (or cannot be read)."""
        if path not in self.names:
            try:
                is_dir = self.host.is_dir(path) and not self.host.is_link(path)
                self.names[path] = self.host.listdir(path) if is_dir else None
            except (MissingError, NotRecordedError):
                self.names[path] = None
        return self.names[path]

    def marker(self, path: str) -> str | None:
        """Return the overlay marker of ``path`` (Host.overlay_marker), read once."""
        if path not in self.markers:
            self.markers[path] = self.host.overlay_marker(path)
        return self.markers[path]

    def deleted(self, layers: list[str], index: int, path: str) -> bool:
        """Return True when container path ``path`` of layer ``index`` (top first) is not what the container
        sees: a whiteout itself, or hidden by a layer above it."""
        if self.marker(layers[index].rstrip("/") + path) == "whiteout":
            return True
        return any(self._hides(layers[i].rstrip("/"), path) for i in range(index))

    def _hides(self, layer: str, path: str) -> bool:
        """Return True when ``layer`` hides ``path`` of the layers below it (a whiteout of it or of a directory
        above it, an opaque directory above it, a non-directory where a directory above it would be)."""
        parts = [p for p in path.split("/") if p]
        current = ""
        for n, part in enumerate(parts):
            names = self.listing(layer + current if current else layer)
            if names is None:
                # the previous part is in this layer but is no directory (a file, a link): it covers the rest
                return bool(current)
            if current and OPAQUE_FILE in names:
                return True
            if WHITEOUT_PREFIX + part in names:
                return True
            if part not in names:
                return False
            current += "/" + part
            marker = self.marker(layer + current)
            if marker == "whiteout":
                return True
            if n == len(parts) - 1:
                return False  # this layer's own file: it wins over the lower one (the caller keeps the top one)
            if marker == "opaque":
                return True
        return False


def _nccl_versions(host: Host, layer: str, listed: dict[str, list[str]] | None = None) -> list[tuple[str, str]]:
    """Return (version, path) of every NCCL in one layer: versioned libraries and pip wheels (``listed``: the
    library directories the layer's user-space scan listed already, not listed again)."""
    out: list[tuple[str, str]] = []
    for libdir in LIB_DIRS:
        path = layer.rstrip("/") + libdir
        names = listed[path] if listed is not None and path in listed else _list(host, path)
        for name in names:
            m = _NCCL_FILE.fullmatch(name)
            if m:
                out.append((m.group(1), f"{libdir}/{name}"))
    for base in _PY_DIRS:
        for py in (n for n in _list(host, layer.rstrip("/") + base) if n.startswith("python3")):
            for site in ("dist-packages", "site-packages"):
                rel = f"{base}/{py}/{site}"
                for name in _list(host, layer.rstrip("/") + rel):
                    m = _NCCL_WHEEL.fullmatch(name)
                    if m:
                        out.append((m.group(1), f"{rel}/{name}"))
    return out


def _list(host: Host, path: str) -> list[str]:
    try:
        return host.listdir(path) if host.is_dir(path) else []
    except (MissingError, NotRecordedError):
        return []


def _container_path(layer: str, path: str) -> str:
    return path[len(layer.rstrip("/")) :] or "/"


@dataclass
class EngineReads:
    """The engines being asked (:func:`start_engine_reads`): their ``ps`` and ``inspect`` run meanwhile."""

    #: in the order asked; an engine's name alone where a replay did not record even whether it is installed
    readings: list[engines.EngineReading | str] = field(default_factory=list)

    def advance(self, block: bool = False) -> None:
        """Start each engine's ``inspect`` once its ``ps`` has answered (``block``: wait for ``ps``; else only where
        it has answered already). Never raises: what goes wrong is reported by :func:`read_engine_containers`."""
        for reading in self.readings:
            if not isinstance(reading, str):
                with contextlib.suppress(FwmanError, NotRecordedError):  # raised again when finished
                    reading.advance(block=block)


def start_engine_reads(host: Host) -> EngineReads:
    """Start asking every engine :func:`engines_to_ask` names (``ps``, then ``inspect``). Raises UsageError for a
    malformed configuration file, as :func:`engines_to_ask`."""
    reads = EngineReads()
    for engine in engines_to_ask(host):
        try:
            reads.readings.append(engines.start_engine(host, engine))
        except NotRecordedError:
            reads.readings.append(engine)
    return reads


def read_engine_containers(
    host: Host, unreadable: list[str], problems: list[str], started: EngineReads | None = None
) -> list[tuple[ContainerAudit, UserSpace | None]]:
    """Return every Docker and Podman container with what its filesystem carries (the engines ``started`` asks,
    else those :func:`engines_to_ask` names); engine failures (not running, malformed answers) go to
    ``problems``, one line each. Never raises for them."""
    out: list[tuple[ContainerAudit, UserSpace | None]] = []
    replay = host.local_path("/") is None
    reads = started if started is not None else start_engine_reads(host)
    # containers of one image share its lower layers: each layer directory is read once
    layer_cache: dict[str, tuple[UserSpace, list[tuple[str, str]]]] = {}
    lookups = LayerLookups(host)
    for reading in reads.readings:
        read: engines.EngineRead | str
        if isinstance(reading, str):
            read = reading
        else:
            try:
                read = reading.result()
            except NotRecordedError:
                read = reading.out.engine
        if isinstance(read, str):
            if not replay or _recorded_tool(host, read):
                unreadable.append(f"{read} ps/inspect (not recorded)")
            continue  # a capture older than container support did not look: nothing to say
        if not read.installed:
            problems.append(f"{read.engine}: not installed")
        elif read.problem:
            problems.append(f"{read.engine}: {read.problem}")
        for c in read.containers:
            out.append(_one(host, c, unreadable, layer_cache, lookups))
    return out


def engines_to_ask(host: Host) -> tuple[str, ...]:
    """Return the engines to ask: ``[containers] engines`` of the configuration, else both on this machine and
    on a replay, none under ``--root DIR`` (the engines running here are not that tree's).

    Raises UsageError for a malformed configuration file (as every command reading it does).
    """
    configured = load_config(host).section("containers").get("engines")
    if isinstance(configured, list):
        return tuple(e for e in engines.ENGINES if e in configured)
    if is_this_machine(host) or host.local_path("/") is None:
        return engines.ENGINES
    return ()


def _recorded_tool(host: Host, engine: str) -> bool:
    try:
        host.which(engine)
    except NotRecordedError:
        return False
    return True


def _one(
    host: Host,
    c: engines.EngineContainer,
    unreadable: list[str],
    layer_cache: dict[str, tuple[UserSpace, list[tuple[str, str]]]],
    lookups: LayerLookups,
) -> tuple[ContainerAudit, UserSpace | None]:
    audit = ContainerAudit(
        name=c.name,
        kind=c.engine,
        root=None,
        state="no-gpu" if not c.uses_gpu else "read",
        engine_state=c.state,
        image=c.image,
        gpu=list(c.gpu_requests),
        cdi_devices=list(c.cdi_devices),
        legacy_hook=c.legacy_hook,
        env=engines.p2p_env(c.env),
        mounts=[f"{m.source} -> {m.destination}" for m in c.mounts],
        command=" ".join(c.command)[:400] or None,
    )
    if not c.uses_gpu:
        return audit, None
    mounted, mounted_how = None, "podman mount"
    no_dirs = not c.merged_dir and not c.upper_dir and not c.lower_dirs
    if c.engine == "podman" and no_dirs:
        mounted = engines.podman_mount(host, c.id)
    elif c.engine == "docker" and no_dirs and c.graph_driver == "vfs":
        # Docker has no `mount` command: its vfs directory is found through the daemon's data root (asked once)
        if "docker" not in lookups.engine_roots:
            lookups.engine_roots["docker"] = engines.docker_root(host)
        root = lookups.engine_roots["docker"]
        try:
            mounted = engines.docker_vfs_dir(host, root, c.id) if root else None
        except NotRecordedError:
            mounted = None
        mounted_how = "docker vfs directory"
    layers, how = _layers(host, c, mounted, mounted_how)
    if not layers:
        audit.state = "gone"
        audit.root = c.merged_dir or c.upper_dir or mounted
        return audit, None
    audit.root = layers[0]
    audit.filesystem = how
    merged = UserSpace(root=layers[0])
    seen: set[str] = set()

    def visible(index: int, rel: str) -> bool:
        # layers read one by one: the overlay's whiteouts and opaque directories decide (a mount applies them)
        return rel not in seen and not (how == "image layers" and lookups.deleted(layers, index, rel))

    for index, layer in enumerate(layers):
        if layer not in layer_cache:
            scanned = scan_userspace(host, layer, run_smi=False)
            unreadable.extend(scanned.unreadable)
            layer_cache[layer] = (scanned, _nccl_versions(host, layer, scanned.listings))
        us, nccl_found = layer_cache[layer]
        for found, into in ((us.libs, merged.libs), (us.compat, merged.compat)):
            for lib in found:
                rel = _container_path(layer, lib.path.split(" -> ")[0])
                if visible(index, rel):  # the top layer's file wins
                    seen.add(rel)
                    into.append(DriverLib(lib.name, lib.version, rel))
        for version, path in nccl_found:
            if path not in audit.nccl.get(version, []) and visible(index, path.split(" -> ")[0]):
                seen.add(path)
                audit.nccl.setdefault(version, []).append(path)
    _vllm_cache(
        host, c, layers, audit, unreadable, lambda i, p: how == "image layers" and lookups.deleted(layers, i, p)
    )
    audit.versions = {v: [lib.path for lib in libs] for v, libs in sorted(merged.versions().items())}
    audit.compat = [lib.path for lib in merged.compat]
    return audit, merged


def vllm_cache_dir(env: dict[str, str]) -> str:
    """Return the container directory vLLM keeps its cache in: ``VLLM_CACHE_ROOT``, else
    ``$XDG_CACHE_HOME/vllm``, else ``/root/.cache/vllm`` (model servers run as root in their images)."""
    for name, suffix in (("VLLM_CACHE_ROOT", ""), ("XDG_CACHE_HOME", "/vllm")):
        value = env.get(name, "")
        if value.startswith("/") and "\0" not in value and value.rstrip("/"):
            return value.rstrip("/") + suffix
    return "/root/.cache/vllm"


#: vLLM's P2P cache is one small object (``{"0->1": true, ...}``: a few dozen bytes per GPU pair); a file of
#: this size is someone else's doing
MAX_VLLM_CACHE = 64 * 1024


def parse_vllm_cache(text: str, path: str) -> dict[str, bool]:
    """Return vLLM's P2P verdicts (``{"0->1": true}``). Raises ParseError for another document."""
    doc = parse_json(text, "vLLM P2P cache", path)
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and "->" in k and isinstance(v, bool) for k, v in doc.items()
    ):
        raise ParseError("vLLM P2P cache", path, 'not a {"<gpu>-><gpu>": true|false} object')
    return dict(doc)


def _host_place(c: engines.EngineContainer, layers: list[str], container_path: str) -> list[tuple[str, int | None]]:
    """Return the host paths where ``container_path`` may lie, each with its layer's index: the mount that covers
    it (index None), else each layer, top first."""
    # the deepest mount that covers the path is the one the container sees there
    for m in sorted(c.mounts, key=lambda m: -len(m.destination.rstrip("/"))):
        place = m.host_path_of(container_path) if m.source else None
        if place is not None:
            return [(place, None)]
    return [(layer.rstrip("/") + container_path, n) for n, layer in enumerate(layers)]


def _vllm_cache(
    host: Host,
    c: engines.EngineContainer,
    layers: list[str],
    audit: ContainerAudit,
    unreadable: list[str],
    deleted: Callable[[int, str], bool],
) -> None:
    """Find vLLM's P2P cache of the container (in a volume or its layers) and record its verdicts; ``deleted``
    says whether a layer's file is hidden from the container (a whiteout, a layer above)."""
    directory = vllm_cache_dir(c.env)
    for place, index in _host_place(c, layers, directory):
        names = [
            n
            for n in _list(host, place)
            if n.startswith("gpu_p2p_access_cache_for_")
            and n.endswith(".json")
            and (index is None or not deleted(index, f"{directory}/{n}"))
        ]
        if not names:
            continue
        name = names[0]
        audit.vllm_cache_path = f"{directory}/{name}"
        audit.vllm_cache_host_path = f"{place}/{name}"
        try:
            audit.vllm_cache = parse_vllm_cache(
                read_text_capped(host, f"{place}/{name}", MAX_VLLM_CACHE, "vLLM P2P cache"), audit.vllm_cache_path
            )
        except (ParseError, MissingError, NotRecordedError) as e:
            unreadable.append(f"{place}/{name} ({e.message})")
        return


def read_containers(
    host: Host, roots: Sequence[str], unreadable: list[str]
) -> list[tuple[ContainerAudit, UserSpace | None]]:
    """Return the Proxmox LXC containers (from /etc/pve/lxc) and the given roots, each with its user space."""
    out: list[tuple[ContainerAudit, UserSpace | None]] = []
    names: list[str] = []
    try:
        names = proxmox.lxc_config_names(host)
    except NotRecordedError:
        unreadable.append(f"{proxmox.LXC_DIR} (not recorded)")
    except MissingError:
        unreadable.append(proxmox.LXC_DIR)
    for ct in proxmox.read_configs(host, proxmox.LXC_DIR, sorted(names, key=lambda n: (len(n), n))):
        if ct.error is not None:
            unreadable.append(f"{ct.path} (not recorded)" if isinstance(ct.error, NotRecordedError) else ct.path)
        out.append(_read_lxc(host, ct))
    for root in roots:
        out.append(_scan_container(host, root, "root", root.rstrip("/") or "/"))
    return out


def _read_lxc(host: Host, ct: proxmox.GuestConfig) -> tuple[ContainerAudit, UserSpace | None]:
    """Return container ``ct``: not audited (no GPU, or the NVIDIA hook injects the host's libraries), not
    mounted, or its user space read from the mounted root filesystem."""
    ctid = ct.guest_id
    device, hook = proxmox.lxc_uses_gpu(ct.text)
    if not device and not hook:
        return ContainerAudit(name=ctid, kind="lxc", root=None, state="no-gpu"), None
    if hook:
        return ContainerAudit(name=ctid, kind="lxc", root=None, state="hook"), None
    rootfs = proxmox.lxc_rootfs(ctid)
    try:
        mounted = host.is_dir(rootfs) and bool(host.listdir(rootfs))
    except (MissingError, NotRecordedError):
        mounted = False
    if not mounted:
        return ContainerAudit(name=ctid, kind="lxc", root=rootfs, state="not-mounted"), None
    return _scan_container(host, ctid, "lxc", rootfs)


def _scan_container(host: Host, name: str, kind: str, root: str) -> tuple[ContainerAudit, UserSpace]:
    us = scan_userspace(host, root, run_smi=False)
    audit = ContainerAudit(
        name=name,
        kind=kind,
        root=root,
        state="read",
        versions={v: [lib.path for lib in libs] for v, libs in sorted(us.versions().items())},
        compat=[lib.path for lib in us.compat],
    )
    return audit, us
