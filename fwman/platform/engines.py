"""Docker and Podman containers, read through the engines' own command-line interfaces.

Two commands per engine, both read only: ``<engine> ps -a`` with a JSON format (every container, running or not)
and one ``<engine> inspect ID...`` of all of them. The shapes:

- ``podman ps -a --format json`` (Podman 4.3, Debian 12) prints one JSON array of objects with ``Id``,
  ``Names`` (a list), ``State``, ``Image``;
- ``docker ps -a --format '{{json .}}'`` prints one JSON object per line with ``ID``, ``Names`` (a string),
  ``State``, ``Image`` (docs.docker.com, "docker container ls", Format the output). Docker's Go template is
  asked, not ``--format json``: Debian 12's docker.io 20.10.24 prints the word ``json`` once per container for
  ``--format json`` (seen on the test machine), while ``{{json .}}`` prints the objects there and in Docker 28.2.
- ``inspect`` prints a JSON array of container objects in the Docker Engine API's ContainerInspect shape, which
  Podman follows: ``Id``, ``Name``, ``State.Status``, ``Config.Image``, ``Config.Env`` (``NAME=VALUE``
  strings), ``Mounts`` (``Source``, ``Destination``), ``HostConfig.Runtime``, ``HostConfig.Devices``
  (``PathOnHost``, ``PathInContainer``), ``HostConfig.DeviceRequests`` (``Driver``, ``Count``, ``DeviceIDs``,
  ``Capabilities``: what ``--gpus`` and Docker's CDI ``--device`` requests become), ``GraphDriver`` (``Name``,
  ``Data.MergedDir``, ``Data.UpperDir``, ``Data.LowerDir`` colon-separated). Podman 4.3 keeps a CDI
  ``--device vendor/class=name`` request only in ``Config.CreateCommand`` (the argv that made the container):
  its ``HostConfig.Devices`` is empty for it, so the request is read from that argv; and Podman's
  ``HostConfig.Runtime`` says ``oci`` while ``OCIRuntime`` names the runtime (``crun``, ``nvidia``).
- Podman's ``--gpus``: Podman 4.3 refuses the option (``Error: unknown flag: --gpus``, seen on the test
  machine); by July 2023 Podman accepted it as a no-op kept for the Docker CLI's sake (NVIDIA's maintainer in
  github.com/NVIDIA/nvidia-container-runtime issue 190; from which release is not known here); since
  containers/podman PR 21180 (merged January 2024) each value becomes the CDI device ``nvidia.com/gpu=VALUE``
  (pkg/specgenutil: ``devices = append(devices, "nvidia.com/gpu="+gpu)``). fwman reads a Podman ``--gpus VALUE``
  from ``Config.CreateCommand``, as it reads ``--device`` (where Podman 4.3 keeps a CDI request; whether newer
  releases show it elsewhere in inspect is not known here), as that CDI request; a container made by a release
  where the option did nothing cannot be told apart from inspect.

The parsers are pure (text in, model or ParseError out); :func:`start_engine` is the one reader and goes through
the Host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host, PendingCommand
from fwman.host.capped import read_text_capped
from fwman.platform.mounts import Mount

ENGINES = ("docker", "podman")
#: a CDI fully qualified device name: vendor.com/class=name (CDI SPEC.md, "Kind" and device "name")
CDI_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*=[A-Za-z0-9][A-Za-z0-9_.:\-]*")
#: the environment that decides NCCL's and vLLM's peer-to-peer path inside a container
P2P_ENV = ("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "VLLM_SKIP_P2P_CHECK", "CUDA_VISIBLE_DEVICES")
#: seconds one engine command may take (an engine whose socket hangs must not hang the audit)
ENGINE_TIMEOUT = 60.0


@dataclass(frozen=True)
class EngineContainer:
    """One container as its engine's ``inspect`` describes it."""

    engine: str  # "docker" | "podman"
    id: str
    name: str
    state: str  # "running", "exited", "created", ...
    image: str
    runtime: str | None  # HostConfig.Runtime ("nvidia", "runc", "crun", ...)
    gpu_requests: tuple[str, ...]  # how it gets the GPU, for people: "runtime nvidia", "--gpus (all)", "cdi ..."
    cdi_devices: tuple[str, ...]  # requested CDI devices, fully qualified ("nvidia.com/gpu=all")
    devices: tuple[str, ...]  # host device paths given to it (/dev/nvidia0)
    env: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()  # Config.Entrypoint + Config.Cmd
    mounts: tuple[Mount, ...] = ()
    graph_driver: str | None = None
    merged_dir: str | None = None
    upper_dir: str | None = None
    lower_dirs: tuple[str, ...] = ()

    @property
    def uses_gpu(self) -> bool:
        """Return True when the container is given an NVIDIA GPU by any of the four ways."""
        return bool(self.gpu_requests)

    @property
    def legacy_hook(self) -> bool:
        """Return True when NVIDIA's runtime hook injects the host's libraries at start (no CDI spec involved)."""
        return any(r == "runtime nvidia" or r.startswith("--gpus") for r in self.gpu_requests)


def _obj(value: Any, what: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(what, where, f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(what, where, f"expected a list, got {type(value).__name__}")
    return value


def _str(value: Any, what: str, where: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ParseError(what, where, f"expected a string, got {type(value).__name__}")
    return value


def _absolute(path: str, what: str, where: str) -> None:
    """Raise ParseError when ``path`` is neither empty nor absolute (an engine names directories absolutely)."""
    if path and (not path.startswith("/") or "\0" in path):
        raise ParseError(what, where, f"not an absolute path: {path[:80]!r}")


def parse_ps(text: str, engine: str) -> list[str]:
    """Return the container ids ``<engine> ps -a`` printed as JSON (:func:`ps_argv`), in its order.

    Accepts Podman's JSON array and Docker's one object per line; empty output is no container. Raises
    ParseError for anything else (an object without an id, text that is not JSON).
    """
    what = " ".join(ps_argv(engine))
    stripped = text.strip()
    if not stripped:
        return []
    docs: list[Any]
    if stripped.startswith("["):
        docs = _list(parse_json(stripped, what), what, "output")
    else:
        docs = [parse_json(line, what, f"line {n}") for n, line in enumerate(stripped.splitlines(), 1) if line.strip()]
    ids: list[str] = []
    for n, doc in enumerate(docs, 1):
        obj = _obj(doc, what, f"container {n}")
        cid = obj.get("Id", obj.get("ID"))
        if not isinstance(cid, str) or not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z_.\-]*", cid):
            raise ParseError(what, f"container {n}", "no Id/ID string")
        ids.append(cid)
    return ids


def _env(values: list[Any], what: str) -> dict[str, str]:
    parts = (_str(v, what, "Config.Env").partition("=") for v in values)
    return {name: value for name, sep, value in parts if sep and name}


def _create_command_values(argv: list[Any], option: str) -> list[str]:
    """Return the values of ``option`` (``--device``, ``--gpus``) in the argv that created a Podman container."""
    out: list[str] = []
    words = [w for w in argv if isinstance(w, str)]
    for i, word in enumerate(words):
        if word == option and i + 1 < len(words):
            out.append(words[i + 1])
        elif word.startswith(option + "="):
            out.append(word.split("=", 1)[1])
    return out


#: the CDI kind Podman gives each ``--gpus`` value (containers/podman PR 21180)
PODMAN_GPUS_KIND = "nvidia.com/gpu"


def ps_argv(engine: str) -> list[str]:
    """Return the read-only command that lists every container of ``engine`` as JSON (see the module text for
    why Docker is asked through its Go template)."""
    if engine == "docker":
        return ["docker", "ps", "-a", "--format", "{{json .}}"]
    return [engine, "ps", "-a", "--format", "json"]


def parse_container(doc: Any, engine: str) -> EngineContainer:
    """Return one container of an ``inspect`` answer. Raises ParseError when ``doc`` is not of that shape."""
    what = f"{engine} inspect"
    obj = _obj(doc, what, "container")
    cid = _str(obj.get("Id"), what, "Id")
    if not cid:
        raise ParseError(what, "Id", "missing")
    name = _str(obj.get("Name"), what, "Name").lstrip("/") or cid[:12]
    state = _str(_obj(obj.get("State"), what, "State").get("Status"), what, "State.Status", "unknown")
    config = _obj(obj.get("Config"), what, "Config")
    host_config = _obj(obj.get("HostConfig"), what, "HostConfig")
    image = _str(config.get("Image"), what, "Config.Image") or _str(obj.get("ImageName"), what, "ImageName")
    env = _env(_list(config.get("Env"), what, "Config.Env"), what)
    words: list[str] = []
    for key in ("Entrypoint", "Cmd"):
        value = config.get(key)
        # Docker prints a list (or null); an old engine may print one string
        items = value if isinstance(value, list) else [value] if value else []
        words += [_str(w, what, f"Config.{key}") for w in items]
    runtime = _str(host_config.get("Runtime"), what, "HostConfig.Runtime") or None
    if runtime in (None, "oci"):  # Podman says "oci" there and names the runtime in OCIRuntime
        runtime = _str(obj.get("OCIRuntime"), what, "OCIRuntime") or runtime
    requests: list[str] = []
    cdi: list[str] = []
    # NVIDIA's runtime in its "auto" mode switches to CDI when every device NVIDIA_VISIBLE_DEVICES names is a
    # fully qualified CDI name (nvidia-container-toolkit, internal/info/auto.go, ResolveAutoMode): the way a
    # Docker without CDI support of its own (20.10) gets a CDI-injected container
    visible = [v.strip() for v in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if runtime == "nvidia" and visible and all(CDI_NAME.fullmatch(v) for v in visible):
        requests.append("runtime nvidia, CDI devices in NVIDIA_VISIBLE_DEVICES")
        cdi += visible
    elif runtime == "nvidia":
        requests.append("runtime nvidia")
    for n, req in enumerate(_list(host_config.get("DeviceRequests"), what, "HostConfig.DeviceRequests")):
        r = _obj(req, what, f"HostConfig.DeviceRequests[{n}]")
        driver = _str(r.get("Driver"), what, "DeviceRequests.Driver")
        ids = [_str(i, what, "DeviceRequests.DeviceIDs") for i in _list(r.get("DeviceIDs"), what, "DeviceIDs")]
        caps = [c for group in _list(r.get("Capabilities"), what, "Capabilities") for c in _list(group, what, "")]
        if driver == "cdi":
            cdi += [i for i in ids if CDI_NAME.fullmatch(i)]
        elif driver == "nvidia" or "gpu" in caps:
            count = r.get("Count")
            which = ",".join(ids) if ids else ("all" if count == -1 else str(count))
            requests.append(f"--gpus ({which})")
    devices: list[str] = []
    for n, dev in enumerate(_list(host_config.get("Devices"), what, "HostConfig.Devices")):
        d = _obj(dev, what, f"HostConfig.Devices[{n}]")
        path = _str(d.get("PathOnHost"), what, "Devices.PathOnHost")
        if CDI_NAME.fullmatch(path):
            cdi.append(path)
        elif path:
            devices.append(path)
    create_command = _list(config.get("CreateCommand"), what, "Config.CreateCommand")
    for value in _create_command_values(create_command, "--device"):
        if CDI_NAME.fullmatch(value):
            cdi.append(value)
        elif value.split(":", 1)[0] not in devices and value.startswith("/dev/"):
            devices.append(value.split(":", 1)[0])
    if engine == "podman":
        for value in _create_command_values(create_command, "--gpus"):
            # Podman's flag is a list: "--gpus 0,1" is two devices, each named as CDI names them
            for one in (v.strip() for v in value.split(",")):
                name = f"{PODMAN_GPUS_KIND}={one}"
                if CDI_NAME.fullmatch(name):
                    cdi.append(name)
                elif one:
                    requests.append(f"podman --gpus ({one[:40]})")  # not a name CDI can resolve
    cdi = list(dict.fromkeys(cdi))
    requests += [f"cdi {c}" for c in cdi]
    requests += [f"device {d}" for d in devices if d.startswith("/dev/nvidia")]
    mounts: list[Mount] = []
    for n, m in enumerate(_list(obj.get("Mounts"), what, "Mounts")):
        mo = _obj(m, what, f"Mounts[{n}]")
        source, destination = _str(mo.get("Source"), what, "Mounts.Source"), _str(mo.get("Destination"), what, "")
        # a tmpfs has no source: nothing on disk
        if source.startswith("/") and destination.startswith("/") and "\0" not in source + destination:
            mounts.append(Mount(source, destination))
    graph = _obj(obj.get("GraphDriver"), what, "GraphDriver")
    data = _obj(graph.get("Data"), what, "GraphDriver.Data")
    lower = _str(data.get("LowerDir"), what, "GraphDriver.Data.LowerDir")
    for key in ("MergedDir", "UpperDir"):
        _absolute(_str(data.get(key), what, f"GraphDriver.Data.{key}"), what, f"GraphDriver.Data.{key}")
    for part in lower.split(":"):
        _absolute(part, what, "GraphDriver.Data.LowerDir")
    return EngineContainer(
        engine=engine,
        id=cid,
        name=name,
        state=state,
        image=image,
        runtime=runtime,
        gpu_requests=tuple(requests),
        cdi_devices=tuple(cdi),
        devices=tuple(devices),
        env=env,
        command=tuple(words),
        mounts=tuple(mounts),
        graph_driver=_str(graph.get("Name"), what, "GraphDriver.Name") or None,
        merged_dir=_str(data.get("MergedDir"), what, "GraphDriver.Data.MergedDir") or None,
        upper_dir=_str(data.get("UpperDir"), what, "GraphDriver.Data.UpperDir") or None,
        lower_dirs=tuple(p for p in lower.split(":") if p),
    )


def parse_inspect(text: str, engine: str) -> list[EngineContainer]:
    """Return the containers of an ``inspect`` answer (a JSON array). Raises ParseError for another shape."""
    what = f"{engine} inspect"
    docs = _list(parse_json(text, what), what, "output")
    return [parse_container(doc, engine) for doc in docs]


@dataclass
class EngineRead:
    """What one engine answered: its containers, or why it could not be asked."""

    engine: str
    installed: bool
    containers: list[EngineContainer] = field(default_factory=list)
    problem: str | None = None  # the engine is not running, or answered something fwman cannot read


@dataclass
class EngineReading:
    """One engine being read (:func:`start_engine`): ``ps`` running, then ``inspect``; :meth:`result` waits."""

    host: Host
    out: EngineRead
    ps: PendingCommand | None = None
    inspect: PendingCommand | None = None

    def advance(self, block: bool = True) -> None:
        """Once ``ps`` has answered, parse it and start ``inspect`` of its containers (``block``: wait for ``ps``;
        without it, do nothing while ``ps`` runs). Raises NotRecordedError on a replay that did not record it."""
        if self.ps is None or (not block and not self.ps.done()):
            return
        ps = self.ps.result()  # what it raises is raised again by result()
        self.ps = None
        engine = self.out.engine
        if not ps.ok:
            self.out.problem = f"`{engine} ps -a` failed (exit {ps.rc}): {_first_line(ps.stderr) or 'no message'}"
            return
        try:
            ids = parse_ps(ps.stdout, engine)
        except ParseError as e:
            self.out.problem = e.message
            return
        if ids:
            self.inspect = self.host.start([engine, "inspect", *ids], timeout=ENGINE_TIMEOUT)

    def result(self) -> EngineRead:
        """Wait for both commands and return what the engine answered: never raises for the engine's own failures
        (not installed, daemon not running, malformed answer), which are the result's ``problem``. Raises
        NotRecordedError on a replay that did not record the commands."""
        self.advance()
        if self.inspect is not None:
            inspect = self.inspect.result()
            self.inspect = None
            engine = self.out.engine
            if not inspect.ok:
                stderr = _first_line(inspect.stderr) or "no message"
                self.out.problem = f"`{engine} inspect` failed (exit {inspect.rc}): {stderr}"
            else:
                try:
                    self.out.containers = parse_inspect(inspect.stdout, engine)
                except ParseError as e:
                    self.out.problem = e.message
        return self.out


def start_engine(host: Host, engine: str) -> EngineReading:
    """Start reading ``engine``: ``ps -a`` as JSON (:func:`ps_argv`) now, one ``inspect`` of all its containers
    once ``ps`` has answered; the commands run while the caller reads other things. Raises NotRecordedError on a
    replay that did not record whether the engine is installed."""
    if host.which(engine) is None:
        return EngineReading(host, EngineRead(engine, installed=False))
    ps = host.start(ps_argv(engine), timeout=ENGINE_TIMEOUT)
    return EngineReading(host, EngineRead(engine, installed=True), ps=ps)


def podman_mount(host: Host, container_id: str) -> str | None:
    """Return the directory ``podman mount ID`` gives for a container whose driver reports no directory (vfs).

    Returns None when podman refuses (rootless without ``podman unshare``, a removed container).
    """
    try:
        res = host.run(["podman", "mount", container_id], timeout=ENGINE_TIMEOUT)
    except FwmanError:
        return None
    line = res.stdout.strip().splitlines()[0] if res.ok and res.stdout.strip() else ""
    return line if line.startswith("/") else None


#: where Docker's vfs driver keeps a container's filesystem: its data root (``docker info``'s DockerRootDir), the
#: layer store's ``image/vfs/layerdb/mounts/<container id>/mount-id`` naming the directory ``vfs/dir/<mount id>``
#: (moby, layer/filestore.go; seen with docker.io 20.10: inspect's GraphDriver.Data is null for vfs)
DOCKER_ROOT_ARGV = ("docker", "info", "--format", "{{.DockerRootDir}}")


def docker_root(host: Host) -> str | None:
    """Return the Docker daemon's data root (``docker info``), None when the daemon does not say."""
    try:
        res = host.run(list(DOCKER_ROOT_ARGV), timeout=ENGINE_TIMEOUT)
    except FwmanError:
        return None
    line = res.stdout.strip().splitlines()[0] if res.ok and res.stdout.strip() else ""
    return line if line.startswith("/") and "\0" not in line else None


def docker_vfs_dir(host: Host, root: str, container_id: str) -> str | None:
    """Return the directory that holds a Docker vfs container's whole filesystem, None when its layer store
    does not name one. Raises NotRecordedError on a replay that did not record the store."""
    if not re.fullmatch(r"[0-9a-f]{64}", container_id):
        return None
    mount_file = f"{root.rstrip('/')}/image/vfs/layerdb/mounts/{container_id}/mount-id"
    try:
        mount_id = read_text_capped(host, mount_file, 256, "Docker layer mount id").strip()
    except (MissingError, ParseError):  # absent, or far longer than an id: not a layer store fwman reads
        return None
    if not re.fullmatch(r"[0-9a-f]{64}", mount_id):
        return None
    return f"{root.rstrip('/')}/vfs/dir/{mount_id}"


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:200] if lines else ""


def p2p_env(env: dict[str, str]) -> dict[str, str]:
    """Return the variables of ``env`` that decide the peer-to-peer path (NCCL, vLLM, visible devices)."""
    return {k: env[k] for k in P2P_ENV if k in env}
