"""Docker/Podman answers and CDI specs: the parsers on the documented shapes, and hypothesis (any input gives a
model or a ParseError, never another exception)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.host.live import LiveHost
from fwman.platform.cdi import parse_spec
from fwman.platform.engines import docker_vfs_dir, parse_container, parse_inspect, parse_ps, ps_argv
from fwman.platform.mounts import Mount

# Docker Engine API ContainerInspect, trimmed to the fields fwman reads (docs.docker.com, Engine API,
# "Inspect a container"): one container started with --gpus all, one with a CDI --device, one with the nvidia
# runtime and a device node
DOCKER_GPUS: dict[str, Any] = {
    "Id": "a" * 64,
    "Name": "/vllm",
    "State": {"Status": "running", "Running": True},
    "Config": {"Image": "vllm/vllm-openai:v0.6.0", "Env": ["NCCL_P2P_LEVEL=SYS", "PATH=/usr/bin", "BROKEN"]},
    "HostConfig": {
        "Runtime": "runc",
        "Devices": [],
        "DeviceRequests": [{"Driver": "", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]]}],
    },
    "Mounts": [{"Type": "volume", "Source": "/var/lib/docker/volumes/hf/_data", "Destination": "/root/.cache"}],
    "GraphDriver": {
        "Name": "overlay2",
        "Data": {
            "LowerDir": "/var/lib/docker/overlay2/b-init/diff:/var/lib/docker/overlay2/c/diff",
            "MergedDir": "/var/lib/docker/overlay2/b/merged",
            "UpperDir": "/var/lib/docker/overlay2/b/diff",
            "WorkDir": "/var/lib/docker/overlay2/b/work",
        },
    },
}


def _docker(**changes: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(DOCKER_GPUS))
    for key, value in changes.items():
        doc[key] = value
    return doc


def test_docker_gpus_request_env_mounts_and_layers() -> None:
    c = parse_container(DOCKER_GPUS, "docker")
    assert (c.name, c.state, c.image) == ("vllm", "running", "vllm/vllm-openai:v0.6.0")
    assert c.gpu_requests == ("--gpus (all)",) and c.legacy_hook and c.uses_gpu
    assert c.env == {"NCCL_P2P_LEVEL": "SYS", "PATH": "/usr/bin"}
    assert c.merged_dir == "/var/lib/docker/overlay2/b/merged"
    assert c.lower_dirs == ("/var/lib/docker/overlay2/b-init/diff", "/var/lib/docker/overlay2/c/diff")
    assert c.mounts[0].destination == "/root/.cache"


def test_docker_cdi_request_nvidia_runtime_and_device_nodes() -> None:
    cdi = _docker(HostConfig={"DeviceRequests": [{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=all"]}]})
    c = parse_container(cdi, "docker")
    assert c.cdi_devices == ("nvidia.com/gpu=all",) and c.gpu_requests == ("cdi nvidia.com/gpu=all",)
    assert not c.legacy_hook
    runtime = _docker(HostConfig={"Runtime": "nvidia", "Devices": [{"PathOnHost": "/dev/nvidia0"}]})
    assert parse_container(runtime, "docker").gpu_requests == ("runtime nvidia", "device /dev/nvidia0")
    plain = _docker(HostConfig={"Runtime": "runc", "Devices": [{"PathOnHost": "/dev/fuse"}]})
    assert not parse_container(plain, "docker").uses_gpu


def test_nvidia_runtime_given_cdi_names_injects_by_cdi_not_by_its_hook() -> None:
    # the runtime's auto mode picks CDI when NVIDIA_VISIBLE_DEVICES holds only fully qualified CDI names
    env = ["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0,nvidia.com/gpu=1"]
    c = parse_container(_docker(HostConfig={"Runtime": "nvidia"}, Config={"Image": "x", "Env": env}), "docker")
    assert c.cdi_devices == ("nvidia.com/gpu=0", "nvidia.com/gpu=1") and not c.legacy_hook
    assert c.gpu_requests[0] == "runtime nvidia, CDI devices in NVIDIA_VISIBLE_DEVICES"
    for legacy in (["NVIDIA_VISIBLE_DEVICES=all"], ["NVIDIA_VISIBLE_DEVICES=0,nvidia.com/gpu=1"], []):
        hook = parse_container(
            _docker(HostConfig={"Runtime": "nvidia"}, Config={"Image": "x", "Env": legacy}), "docker"
        )
        assert hook.legacy_hook and hook.cdi_devices == (), legacy
    # without NVIDIA's runtime nothing reads the variable
    plain = parse_container(_docker(HostConfig={"Runtime": "runc"}, Config={"Image": "x", "Env": env}), "docker")
    assert not plain.uses_gpu


def test_podman_cdi_request_is_read_from_its_create_command() -> None:
    # Podman 4.3 keeps `--device nvidia.com/gpu=all` only in Config.CreateCommand (HostConfig.Devices is empty)
    doc = {
        "Id": "b" * 64,
        "Name": "serve",
        "State": {"Status": "created"},
        "OCIRuntime": "crun",
        "Config": {"CreateCommand": ["podman", "create", "--device=nvidia.com/gpu=0", "img"], "Env": []},
        "HostConfig": {"Runtime": "oci", "Devices": []},
        "GraphDriver": {"Name": "vfs", "Data": None},
    }
    c = parse_container(doc, "podman")
    assert c.runtime == "crun" and c.cdi_devices == ("nvidia.com/gpu=0",) and c.merged_dir is None


def _podman_created_with(*argv: str) -> dict[str, Any]:
    return {
        "Id": "c" * 64,
        "Name": "serve",
        "State": {"Status": "created"},
        "OCIRuntime": "crun",
        "Config": {"CreateCommand": ["podman", "create", *argv, "img"], "Env": []},
        "HostConfig": {"Runtime": "oci", "Devices": []},
    }


def test_podman_gpus_is_the_cdi_request_podman_makes_of_it() -> None:
    # containers/podman PR 21180: each --gpus value becomes the CDI device nvidia.com/gpu=VALUE
    every = parse_container(_podman_created_with("--gpus", "all"), "podman")
    assert every.cdi_devices == ("nvidia.com/gpu=all",) and every.gpu_requests == ("cdi nvidia.com/gpu=all",)
    assert not every.legacy_hook  # CDI injects what the spec names, not NVIDIA's hook
    two = parse_container(_podman_created_with("--gpus=0,1", "--device", "nvidia.com/gpu=1"), "podman")
    assert two.cdi_devices == ("nvidia.com/gpu=1", "nvidia.com/gpu=0")
    odd = parse_container(_podman_created_with("--gpus", "device=0"), "podman")  # Docker's syntax: no CDI name
    assert odd.cdi_devices == () and odd.gpu_requests == ("podman --gpus (device=0)",) and odd.uses_gpu
    # a Docker container's CreateCommand is not Podman's argv (Docker has none; its --gpus is a DeviceRequest)
    assert not parse_container(_podman_created_with("--gpus", "all"), "docker").uses_gpu


def test_docker_is_asked_through_its_go_template() -> None:
    # Debian 12's docker.io 20.10 prints the word "json" per container for --format json
    assert ps_argv("docker") == ["docker", "ps", "-a", "--format", "{{json .}}"]
    assert ps_argv("podman") == ["podman", "ps", "-a", "--format", "json"]
    with pytest.raises(ParseError):
        parse_ps("json\njson\n", "docker")


def test_a_mount_maps_the_container_paths_it_covers() -> None:
    m = Mount("/srv/hf", "/root/.cache/")
    assert m.host_path_of("/root/.cache/vllm/x.json") == "/srv/hf/vllm/x.json"
    assert m.host_path_of("/root/.cache") == "/srv/hf"
    assert m.host_path_of("/root/.cachex") is None and m.host_path_of("/etc") is None


def test_ps_in_both_engines_shapes() -> None:
    podman = json.dumps([{"Id": "abc", "Names": ["x"], "State": "created"}, {"Id": "def", "Names": ["y"]}])
    assert parse_ps(podman, "podman") == ["abc", "def"]
    docker = '{"ID":"0123abcd","Names":"vllm","State":"running"}\n{"ID":"4567","Names":"db","State":"exited"}\n'
    assert parse_ps(docker, "docker") == ["0123abcd", "4567"]
    assert parse_ps("", "docker") == []
    for bad in ("Cannot connect", "[1]", '{"Names": "x"}', '[{"Id": "../x"}]'):
        with pytest.raises(ParseError):
            parse_ps(bad, "docker")


def test_malformed_inspect_is_a_parse_error() -> None:
    for bad in ("{}", "[1]", '[{"Id": 3}]', '[{"Id": "x", "Config": {"Env": "A=1"}}]', "not json"):
        with pytest.raises(ParseError):
            parse_inspect(bad, "docker")


SPEC_YAML = b"""---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16
    options: [ro, nosuid, nodev, bind]
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache]
"""


def test_cdi_spec_yaml_and_json() -> None:
    spec = parse_spec(SPEC_YAML, "/etc/cdi/nvidia.yaml")
    assert (spec.version, spec.kind) == ("0.5.0", "nvidia.com/gpu")
    assert spec.qualified() == ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]
    edits = spec.edits_for("nvidia.com/gpu=all")
    assert edits is not None and edits.device_nodes == ("/dev/nvidiactl", "/dev/nvidia0")
    assert edits.mounts[0].source.endswith("libcuda.so.570.86.16")
    assert edits.mounts[0].destination == edits.mounts[0].source  # containerPath: where NVIDIA's spec mounts it
    assert edits.hooks == ("/usr/bin/nvidia-ctk hook update-ldcache",)
    assert spec.edits_for("nvidia.com/gpu=7") is None
    doc = {"cdiVersion": "0.6.0", "kind": "vendor.com/x", "devices": [{"name": "a", "containerEdits": {}}]}
    assert parse_spec(json.dumps(doc).encode(), "/var/run/cdi/x.json").devices[0].name == "a"


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"cdiVersion: 0.5.0\n",  # no kind
        b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n",  # a spec lists at least one device
        b"cdiVersion: 0.5.0\nkind: gpu\ndevices: [{name: a}]\n",  # kind is vendor/class
        b"cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: a, containerEdits: {mounts: [{hostPath: 1}]}}]\n",
        b"key: [unclosed\n",
        b"\xff\xfe",
        b"!!python/object/apply:os.system ['true']\n",  # the safe loader refuses Python objects
        # explicit tags PyYAML's own constructors cannot take (they raised AttributeError, KeyError, IndexError)
        b"!!timestamp 2001-99-99{\n",
        b"!!bool\n",
        b"devices: [{name: !!int }]\n",
        b"!!float\n",
        b"a: &x [1]\nb: &y [*x, *x, *x, *x, *x, *x, *x, *x, *x]\nc: &z [*y, *y, *y, *y, *y, *y, *y, *y, *y]\n"
        b"d: &w [*z, *z, *z, *z, *z, *z, *z, *z, *z]\ne: &v [*w, *w, *w, *w, *w, *w, *w, *w, *w]\n"
        b"f: [*v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v, *v]\n",
    ],
)
def test_malformed_cdi_spec_is_a_parse_error(text: bytes) -> None:
    with pytest.raises(ParseError):
        parse_spec(text, "/etc/cdi/bad.yaml")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)
KEYS = st.sampled_from(
    [
        "Id",
        "Name",
        "State",
        "Config",
        "HostConfig",
        "GraphDriver",
        "Mounts",
        "Env",
        "Devices",
        "DeviceRequests",
        "Data",
        "LowerDir",
        "CreateCommand",
        "Status",
        "Driver",
        "DeviceIDs",
        "Capabilities",
        "PathOnHost",
        "Runtime",
    ]
)
SHAPED = st.recursive(
    st.none()
    | st.integers()
    | st.text(max_size=20)
    | st.sampled_from(["nvidia.com/gpu=all", "/x:y", "--gpus", "--gpus=0,x", "nvidia", "NVIDIA_VISIBLE_DEVICES=a/b=c"])
    | st.just(-1),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), SHAPED.map(json.dumps), JSON_VALUES.map(json.dumps)))
def test_engine_parsers_give_a_model_or_a_parse_error(text: str) -> None:
    try:
        parse_ps(text, "docker")
    except ParseError:
        pass
    try:
        containers = parse_inspect(text, "docker") + parse_inspect(text, "podman")
    except ParseError:
        return
    for c in containers:  # what the reader hands the Host: absolute paths only (a relative one is an error there)
        for d in (c.merged_dir, c.upper_dir, *c.lower_dirs, *(m.source for m in c.mounts)):
            assert d is None or (d.startswith("/") and "\0" not in d)


CDI_KEYS = st.sampled_from(
    [
        "cdiVersion",
        "kind",
        "devices",
        "name",
        "containerEdits",
        "env",
        "deviceNodes",
        "path",
        "hostPath",
        "mounts",
        "containerPath",
        "hooks",
        "args",
    ]
)
CDI_SHAPED = st.recursive(
    st.none() | st.integers() | st.text(max_size=20) | st.just("nvidia.com/gpu"),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(CDI_KEYS, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), CDI_SHAPED.map(lambda v: json.dumps(v).encode())), st.booleans())
def test_cdi_parser_gives_a_model_or_a_parse_error(data: bytes, as_json: bool) -> None:
    try:
        parse_spec(data, "/etc/cdi/x.json" if as_json else "/etc/cdi/x.yaml")
    except ParseError:
        pass


def test_docker_vfs_directory_is_the_one_the_layer_store_names(tmp_path: Path) -> None:
    cid, mount = "a" * 64, "b" * 64
    store = tmp_path / f"var/lib/docker/image/vfs/layerdb/mounts/{cid}"
    store.mkdir(parents=True)
    (store / "mount-id").write_text(mount)  # moby writes it without a newline
    host = LiveHost(str(tmp_path))
    assert docker_vfs_dir(host, "/var/lib/docker", cid) == f"/var/lib/docker/vfs/dir/{mount}"
    assert docker_vfs_dir(host, "/var/lib/docker", "c" * 64) is None  # no such container in the store
    assert docker_vfs_dir(host, "/var/lib/docker", "../../etc") is None  # never a path built from a non-id
    (store / "mount-id").write_text("../../../etc\n")
    assert docker_vfs_dir(host, "/var/lib/docker", cid) is None
