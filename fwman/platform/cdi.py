"""CDI specs: what a container runtime injects for a requested device (``nvidia.com/gpu=all``).

The Container Device Interface specification (github.com/cncf-tags/container-device-interface, SPEC.md,
spec version 1.1.0 on its main branch; the fields read here are unchanged since 0.5.0): a spec is one JSON or
YAML file in ``/etc/cdi`` or ``/var/run/cdi`` with ``cdiVersion`` (string, required), ``kind``
(``vendor/class``, required), ``devices`` (required, each with ``name`` and ``containerEdits``) and an optional
spec-wide ``containerEdits`` applied whenever any of its devices is requested. ``containerEdits`` holds
``env`` (``NAME=VALUE``), ``deviceNodes`` (``path``, optional ``hostPath``), ``mounts`` (``hostPath``,
``containerPath``, ``options``) and ``hooks`` (``hookName``, ``path``, ``args``). NVIDIA's spec, written by
``nvidia-ctk cdi generate``, mounts every user-space library by its versioned host path
(``/usr/lib/x86_64-linux-gnu/libcuda.so.<driver version>``): a spec written before a driver update names the
old version's files, so the container gets the old libraries or none (docs.nvidia.com, container-toolkit,
"Support for Container Device Interface": regenerate with ``nvidia-ctk cdi generate
--output=/etc/cdi/nvidia.yaml`` after a driver change).

YAML is read with PyYAML's safe loader only (no Python objects), bounded in size and in the nodes walked.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import ParseError
from fwman.core.jsontext import parse_json
from fwman.platform.mounts import Mount

SPEC_DIRS = paths.CDI_SPEC_DIRS
#: the command NVIDIA's documentation gives to write the spec again for the installed driver
REGENERATE = "nvidia-ctk cdi generate --output={path}"
#: a CDI spec is a few hundred lines; anything far larger is not one (and is not walked)
MAX_SPEC_BYTES = 4 << 20
MAX_NODES = 200_000


@dataclass(frozen=True)
class CdiEdits:
    """The edits a spec (or one of its devices) makes to a container."""

    env: dict[str, str] = field(default_factory=dict)
    device_nodes: tuple[str, ...] = ()  # host paths of the device nodes (hostPath, else path)
    mounts: tuple[Mount, ...] = ()  # hostPath as source, containerPath as destination
    hooks: tuple[str, ...] = ()  # "path args..." for people
    #: (host path, major) of the device nodes that name a ``major`` (NVIDIA's spec does: nvidia-container-toolkit
    #: issue 1934 shows ``major: 510`` for /dev/nvidia-uvm)
    majors: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class CdiDevice:
    """One device of a spec."""

    name: str
    edits: CdiEdits


@dataclass(frozen=True)
class CdiSpec:
    """One CDI spec file."""

    path: str
    version: str
    kind: str
    devices: tuple[CdiDevice, ...]
    edits: CdiEdits

    def qualified(self) -> list[str]:
        """Return the fully qualified names of the spec's devices (``nvidia.com/gpu=0``)."""
        return [f"{self.kind}={d.name}" for d in self.devices]

    def edits_for(self, qualified: str) -> CdiEdits | None:
        """Return the edits requesting device ``qualified`` makes (the spec's and the device's), None when the
        spec has no such device."""
        for d in self.devices:
            if f"{self.kind}={d.name}" == qualified:
                return CdiEdits(
                    env={**self.edits.env, **d.edits.env},
                    device_nodes=self.edits.device_nodes + d.edits.device_nodes,
                    mounts=self.edits.mounts + d.edits.mounts,
                    hooks=self.edits.hooks + d.edits.hooks,
                    majors=self.edits.majors + d.edits.majors,
                )
        return None


def _count(value: Any, budget: list[int]) -> None:
    """Walk ``value`` iteratively, raising ValueError past the node budget (YAML aliases share subtrees, so a
    small document can stand for a huge one)."""
    stack = [value]
    while stack:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("too many nodes")
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def load_document(data: bytes, path: str) -> Any:
    """Return the value of a spec file's text: JSON for ``.json``, YAML (safe loader) otherwise.

    Raises ParseError for bytes that are not UTF-8, a document too large, or text that is not JSON/YAML.
    """
    if len(data) > MAX_SPEC_BYTES:
        raise ParseError("CDI spec", path, f"larger than {MAX_SPEC_BYTES >> 20} MiB: not a spec")
    if path.endswith(".json"):
        doc = parse_json(data, "CDI spec", path)
    else:
        import yaml  # only for a YAML spec: 10 ms of import that a host without one does not pay

        try:
            text = data.decode("utf-8")
            # libyaml's safe loader where PyYAML was built with it (the PyPI wheels and Debian's python3-yaml
            # are): the same safe subset, in C (its error texts are libyaml's own words)
            doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except UnicodeDecodeError as e:
            raise ParseError("CDI spec", path, f"not UTF-8 text ({e.reason} at byte {e.start})") from e
        except yaml.YAMLError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ParseError("CDI spec", path, f"not YAML: {first}") from e
        # AttributeError, LookupError: PyYAML's own constructors on an explicit tag whose value they cannot take
        # (`!!timestamp 2001-99-99{`, an empty `!!bool` or `!!int`), with either loader
        except (RecursionError, ValueError, TypeError, OverflowError, AttributeError, LookupError) as e:
            raise ParseError("CDI spec", path, f"not YAML: {type(e).__name__}") from e
    try:
        _count(doc, [MAX_NODES])
    except ValueError as e:
        raise ParseError("CDI spec", path, f"more than {MAX_NODES} values: not a spec") from e
    return doc


def _abs(value: str, path: str, where: str) -> str:
    """Return ``value`` when it is empty or an absolute path; raise ParseError for a relative one."""
    if value and (not value.startswith("/") or "\0" in value):
        raise ParseError("CDI spec", path, f"{where}: not an absolute path")
    return value


def _s(value: Any, path: str, where: str, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ParseError("CDI spec", path, f"{where}: expected a string")
    return value


def _l(value: Any, path: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError("CDI spec", path, f"{where}: expected a list")
    return value


def _o(value: Any, path: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError("CDI spec", path, f"{where}: expected a mapping")
    return value


def _edits(value: Any, path: str, where: str) -> CdiEdits:
    obj = _o(value, path, where)
    parts = (_s(v, path, f"{where}.env").partition("=") for v in _l(obj.get("env"), path, f"{where}.env"))
    env = {name: val for name, sep, val in parts if sep and name}
    nodes: list[str] = []
    majors: list[tuple[str, int]] = []
    for n, node in enumerate(_l(obj.get("deviceNodes"), path, f"{where}.deviceNodes")):
        d = _o(node, path, f"{where}.deviceNodes[{n}]")
        cpath = _abs(_s(d.get("path"), path, f"{where}.deviceNodes[{n}].path", required=True), path, "path")
        host_path = _abs(_s(d.get("hostPath"), path, f"{where}.deviceNodes[{n}].hostPath"), path, "hostPath")
        nodes.append(host_path or cpath)
        major = d.get("major")
        if major is not None:
            if not isinstance(major, int) or isinstance(major, bool) or major < 0:
                raise ParseError("CDI spec", path, f"{where}.deviceNodes[{n}].major: expected a number")
            majors.append((host_path or cpath, major))
    mounts: list[Mount] = []
    for n, m in enumerate(_l(obj.get("mounts"), path, f"{where}.mounts")):
        mo = _o(m, path, f"{where}.mounts[{n}]")
        mounts.append(
            Mount(
                _abs(_s(mo.get("hostPath"), path, f"{where}.mounts[{n}].hostPath", required=True), path, "hostPath"),
                _s(mo.get("containerPath"), path, f"{where}.mounts[{n}].containerPath", required=True),
            )
        )
    hooks: list[str] = []
    for n, h in enumerate(_l(obj.get("hooks"), path, f"{where}.hooks")):
        ho = _o(h, path, f"{where}.hooks[{n}]")
        args = [_s(a, path, f"{where}.hooks[{n}].args") for a in _l(ho.get("args"), path, f"{where}.hooks[{n}]")]
        hooks.append(" ".join([_s(ho.get("path"), path, f"{where}.hooks[{n}].path", required=True), *args[1:]]))
    return CdiEdits(env=env, device_nodes=tuple(nodes), mounts=tuple(mounts), hooks=tuple(hooks), majors=tuple(majors))


def parse_spec(data: bytes, path: str) -> CdiSpec:
    """Return the CDI spec in ``data`` (the file at host path ``path``). Raises ParseError for anything that is
    not a spec: not JSON/YAML, ``cdiVersion``/``kind``/``devices`` missing, a field of the wrong type."""
    doc = _o(load_document(data, path), path, "document")
    if not doc:
        raise ParseError("CDI spec", path, "empty document")
    version = _s(doc.get("cdiVersion"), path, "cdiVersion", required=True)
    kind = _s(doc.get("kind"), path, "kind", required=True)
    if kind.count("/") != 1 or not all(kind.split("/")):
        raise ParseError("CDI spec", path, f"kind {kind!r} is not vendor/class")
    devices: list[CdiDevice] = []
    for n, dev in enumerate(_l(doc.get("devices"), path, "devices")):
        d = _o(dev, path, f"devices[{n}]")
        devices.append(
            CdiDevice(
                _s(d.get("name"), path, f"devices[{n}].name", required=True),
                _edits(d.get("containerEdits"), path, f"devices[{n}].containerEdits"),
            )
        )
    if not devices:
        raise ParseError("CDI spec", path, "devices: a spec must list at least one device")
    return CdiSpec(path, version, kind, tuple(devices), _edits(doc.get("containerEdits"), path, "containerEdits"))


def is_spec_name(name: str) -> bool:
    """Return True for a file name the CDI runtimes read as a spec (``.json``, ``.yaml``)."""
    return name.endswith((".json", ".yaml")) and not name.startswith(".")


def spec_path(directory: str, name: str) -> str:
    """Return the host path of spec ``name`` in ``directory``."""
    return posixpath.join(directory, name)


#: the most of ``/proc/devices`` fwman reads: a few hundred lines of ``MAJOR NAME`` on any host
MAX_PROC_DEVICES = 64 << 10


def parse_proc_devices(text: str) -> dict[str, int]:
    """Return ``{name: major}`` of the character devices in ``/proc/devices`` text (the block devices after them
    are not read). Never raises: a line that is not ``MAJOR NAME`` is skipped."""
    out: dict[str, int] = {}
    block = False
    for line in text.splitlines():
        if line.strip().lower().startswith("block devices"):
            block = True
        parts = line.split()
        if block or len(parts) != 2 or not parts[0].isascii() or not parts[0].isdigit():
            continue
        out.setdefault(parts[1], int(parts[0]))
    return out


def device_name(node: str) -> str | None:
    """Return the ``/proc/devices`` name whose major a NVIDIA device node should have, None for a node fwman does
    not know: ``/dev/nvidia-uvm`` and ``-uvm-tools`` are ``nvidia-uvm``, ``/dev/nvidia-caps/*`` ``nvidia-caps``,
    ``/dev/nvidiactl``, ``/dev/nvidia-modeset`` and ``/dev/nvidiaN`` ``nvidia`` (the driver renamed
    "nvidia-frontend" to "nvidia" and "nvidiactl" in 550.40: nvidia-container-toolkit issue 324)."""
    base = posixpath.basename(node)
    if base in ("nvidia-uvm", "nvidia-uvm-tools"):
        return "nvidia-uvm"
    if node.startswith("/dev/nvidia-caps/"):
        return "nvidia-caps"
    if base in ("nvidiactl", "nvidia-modeset") or (base.startswith("nvidia") and base[6:].isdigit() and base[6:]):
        return "nvidia"
    return None


def stale_majors(spec: CdiSpec, devices: dict[str, int]) -> list[tuple[str, int, int]]:
    """Return (node, the spec's major, the running kernel's) for each device node of ``spec`` whose major is not
    the one ``/proc/devices`` (``devices``) gives its driver now. Pure."""
    out = []
    for edits in (spec.edits, *(d.edits for d in spec.devices)):
        for node, major in edits.majors:
            name = device_name(node)
            now = devices.get(name) if name else None
            if now is None and name == "nvidia":
                now = devices.get("nvidiactl")
            if now is not None and now != major and (node, major, now) not in out:
                out.append((node, major, now))
    return out
