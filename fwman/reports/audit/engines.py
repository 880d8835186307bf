"""Docker and Podman containers in ``fwman audit``: which user space each GPU container sees, without starting it.

A container's user-space driver comes from one of three places, and each is read where it lives:

- **CDI** (``--device nvidia.com/gpu=all``): the runtime mounts what the CDI spec names, by host path; the spec
  (``/etc/cdi``, ``/var/run/cdi``) is read and each library's version and existence checked (a spec written
  before a driver update names the old version's files);
- **NVIDIA's runtime hook** (``--runtime nvidia``, ``--gpus``): the hook mounts the host's libraries at start, so
  the container sees the host's version;
- **the image itself**: libraries shipped in the image (a ``libcuda`` of its own), read from the container's
  filesystem: the driver's merged directory when mounted, else its upper and lower layers (overlay), else
  ``podman mount`` (vfs). Whiteouts in upper layers are not applied: a file deleted in a later layer may still
  be reported.

Also read from the filesystem: CUDA forward-compatibility libraries (``/usr/local/cuda*/compat``), the NCCL the
image ships (``libnccl.so.<version>`` or the pip wheel ``nvidia_nccl_cu*-<version>.dist-info``), and from
``inspect`` the environment that decides P2P (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, VLLM_SKIP_P2P_CHECK).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from fwman.core.config import load_config
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host, is_this_machine
from fwman.platform import cdi, engines
from fwman.reports.audit.model import CdiSpecAudit, ContainerAudit
from fwman.reports.audit.userspace import KEY_LIBS, LIB_DIRS, DriverLib, UserSpace, parse_lib_name, scan_userspace

#: llama.cpp's tensor split over NCCL is broken below this NCCL release (github.com/noonghunna/club-3090,
#: docs/PCIE_P2P.md, as cited in fwman issue 28); fwman reports an older NCCL as a mismatch with this fix
NCCL_MINIMUM = (2, 27, 5)
_NCCL_FILE = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)")
_NCCL_WHEEL = re.compile(r"nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)[^/]*\.dist-info")
_PY_DIRS = ("/usr/local/lib", "/usr/lib", "/opt/conda/lib")


def nccl_tuple(version: str) -> tuple[int, ...] | None:
    """Return ``"2.25.1"`` as (2, 25, 1), None when it is not a dotted version."""
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return None


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
                spec = cdi.parse_spec(host.read_bytes(path), path)
            except ParseError as e:
                out.append(CdiSpecAudit(path=path, error=e.detail))
                continue
            except (MissingError, NotRecordedError) as e:
                out.append(CdiSpecAudit(path=path, error=f"unreadable: {e.message}"))
                continue
            out.append(_spec_audit(host, spec))
    return out


def _spec_audit(host: Host, spec: cdi.CdiSpec) -> CdiSpecAudit:
    """Return a spec's library versions and the host paths it names that do not exist."""
    libs: dict[str, list[str]] = {}
    missing: list[str] = []
    every = [spec.edits, *(d.edits for d in spec.devices)]
    for edits in every:
        for m in edits.mounts:
            parsed = parse_lib_name(m.host_path.rsplit("/", 1)[-1])
            if parsed is not None:
                libs.setdefault(parsed[1], []).append(m.host_path)
            if not _exists(host, m.host_path):
                missing.append(m.host_path)
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
    )


def _exists(host: Host, path: str) -> bool:
    try:
        return host.exists(path)
    except NotRecordedError:
        return True  # a replay that did not look is no proof of absence


def _layers(host: Host, c: engines.EngineContainer, mounted: str | None) -> tuple[list[str], str]:
    """Return (the directories that make the container's filesystem, top first; how they were found)."""
    candidates: list[tuple[list[str], str]] = []
    if c.merged_dir:
        candidates.append(([c.merged_dir], "merged directory"))
    if c.upper_dir or c.lower_dirs:
        candidates.append(([d for d in (c.upper_dir, *c.lower_dirs) if d], "image layers"))
    if mounted:
        candidates.append(([mounted], "podman mount"))
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
            out.append(_one(host, c, unreadable, layer_cache))
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
    mounted = None
    if c.engine == "podman" and not c.merged_dir and not c.upper_dir and not c.lower_dirs:
        mounted = engines.podman_mount(host, c.id)
    layers, how = _layers(host, c, mounted)
    if not layers:
        audit.state = "gone"
        audit.root = c.merged_dir or c.upper_dir or mounted
        return audit, None
    audit.root = layers[0]
    audit.filesystem = how
    merged = UserSpace(root=layers[0])
    seen: set[str] = set()
    for layer in layers:
        if layer not in layer_cache:
            scanned = scan_userspace(host, layer, run_smi=False)
            unreadable.extend(scanned.unreadable)
            layer_cache[layer] = (scanned, _nccl_versions(host, layer, scanned.listings))
        us, nccl_found = layer_cache[layer]
        for lib in us.libs:
            rel = _container_path(layer, lib.path.split(" -> ")[0])
            if rel not in seen:  # the top layer's file wins
                seen.add(rel)
                merged.libs.append(DriverLib(lib.name, lib.version, rel))
        for lib in us.compat:
            rel = _container_path(layer, lib.path)
            if rel not in seen:
                seen.add(rel)
                merged.compat.append(DriverLib(lib.name, lib.version, rel))
        for version, path in nccl_found:
            if path not in audit.nccl.get(version, []):
                audit.nccl.setdefault(version, []).append(path)
    _vllm_cache(host, c, layers, audit, unreadable)
    audit.versions = {v: [lib.path for lib in libs] for v, libs in sorted(merged.versions().items())}
    audit.compat = [lib.path for lib in merged.compat]
    return audit, merged


def image_libcuda(us: UserSpace | None) -> list[DriverLib]:
    """Return the key driver libraries (libcuda, libnvidia-ml) a container's own filesystem carries."""
    return [lib for lib in (us.libs if us else []) if lib.name in KEY_LIBS]


def vllm_cache_dir(env: dict[str, str]) -> str:
    """Return the container directory vLLM keeps its cache in: ``VLLM_CACHE_ROOT``, else
    ``$XDG_CACHE_HOME/vllm``, else ``/root/.cache/vllm`` (model servers run as root in their images)."""
    for name, suffix in (("VLLM_CACHE_ROOT", ""), ("XDG_CACHE_HOME", "/vllm")):
        value = env.get(name, "")
        if value.startswith("/") and "\0" not in value and value.rstrip("/"):
            return value.rstrip("/") + suffix
    return "/root/.cache/vllm"


def parse_vllm_cache(text: str, path: str) -> dict[str, bool]:
    """Return vLLM's P2P verdicts (``{"0->1": true}``). Raises ParseError for another document."""
    doc = parse_json(text, "vLLM P2P cache", path)
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and "->" in k and isinstance(v, bool) for k, v in doc.items()
    ):
        raise ParseError("vLLM P2P cache", path, 'not a {"<gpu>-><gpu>": true|false} object')
    return dict(doc)


def _host_place(c: engines.EngineContainer, layers: list[str], container_path: str) -> list[str]:
    """Return the host paths where ``container_path`` may lie: the mount that covers it, else each layer."""
    covering = sorted(
        (m for m in c.mounts if container_path.startswith(m.destination.rstrip("/") + "/") and m.source),
        key=lambda m: -len(m.destination),
    )
    if covering:
        m = covering[0]
        return [m.source.rstrip("/") + container_path[len(m.destination.rstrip("/")) :]]
    return [layer.rstrip("/") + container_path for layer in layers]


def _vllm_cache(
    host: Host, c: engines.EngineContainer, layers: list[str], audit: ContainerAudit, unreadable: list[str]
) -> None:
    """Find vLLM's P2P cache of the container (in a volume or its layers) and record its verdicts."""
    directory = vllm_cache_dir(c.env)
    for place in _host_place(c, layers, directory):
        names = [n for n in _list(host, place) if n.startswith("gpu_p2p_access_cache_for_") and n.endswith(".json")]
        if not names:
            continue
        name = names[0]
        audit.vllm_cache_path = f"{directory}/{name}"
        audit.vllm_cache_host_path = f"{place}/{name}"
        try:
            audit.vllm_cache = parse_vllm_cache(host.read_text(f"{place}/{name}"), audit.vllm_cache_path)
        except (ParseError, MissingError, NotRecordedError) as e:
            unreadable.append(f"{place}/{name} ({e.message})")
        return
