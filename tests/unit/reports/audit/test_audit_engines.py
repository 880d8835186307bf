"""``fwman audit`` over Docker containers, replayed from a constructed snapshot that holds the engine's answers
in their documented shape (``docker ps -a --format '{{json .}}'`` lines, ``docker inspect`` ContainerInspect
objects) and the containers' merged directories: a running container's, which the real daemon of
tests/system/test_containers_docker.py (containers created, never started) does not give.
And the bad inputs, one row each: an engine not installed or not running, a malformed answer, a malformed spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fwman.host.base import CommandResult
from tests.support.engines import OLD_DRIVER, docker_snapshot, nvidia_cdi_spec, rows_by_component
from tests.support.env import FwmanEnv


def _audit(snap: Path) -> tuple[int, dict[str, Any], str]:
    r = FwmanEnv()("--snapshot", str(snap), "audit", "--offline", "--json")
    assert "Traceback" not in r.stderr
    return r.code, r.json(), r.stderr


def test_docker_host_match_mismatch_mismatch(tmp_path: Path) -> None:
    code, doc, _ = _audit(docker_snapshot(tmp_path, spec=nvidia_cdi_spec(OLD_DRIVER)))
    rows = rows_by_component(doc)
    assert rows["docker container hook"]["status"] == "match"
    assert "NCCL_P2P_LEVEL=SYS" in rows["docker container hook"]["detail"]
    cdi = rows["docker container cdi"]
    assert cdi["status"] == "mismatch"
    assert cdi["fix"] == "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, then restart container cdi"
    own = rows["docker container own"]
    assert own["status"] == "mismatch" and own["fix"].startswith("rebuild example/own:1 without")
    assert "libnccl 2.25.1" in own["detail"] and f"own libcuda.so {OLD_DRIVER}" in own["detail"]
    assert rows["docker container db"]["status"] == "info"
    assert code == 4
    assert {c["name"]: c["filesystem"] for c in doc["containers"]}["own"] == "merged directory"


def test_the_text_table_names_each_container_and_its_fix(tmp_path: Path) -> None:
    snap = docker_snapshot(tmp_path, spec=nvidia_cdi_spec(OLD_DRIVER))
    r = FwmanEnv()("--snapshot", str(snap), "audit", "--offline")
    assert "docker container cdi" in r.stdout and "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in r.stdout


def test_no_cdi_spec_for_a_requested_device(tmp_path: Path) -> None:
    _, doc, _ = _audit(docker_snapshot(tmp_path))
    cdi = rows_by_component(doc)["docker container cdi"]
    assert cdi["status"] == "mismatch" and "no CDI spec defines nvidia.com/gpu=all" in cdi["detail"]
    assert cdi["fix"] == "write NVIDIA's spec: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"


def test_docker_not_running_is_one_unknown_row(tmp_path: Path) -> None:
    down = CommandResult(
        ("docker", "ps", "-a", "--format", "{{json .}}"),
        1,
        "",
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
    )
    _, doc, _ = _audit(docker_snapshot(tmp_path, ps=down))
    engine = [r for r in doc["rows"] if r["component"] == "container engine docker"]
    assert len(engine) == 1 and engine[0]["status"] == "unknown"
    assert "Cannot connect to the Docker daemon" in engine[0]["detail"]
    assert engine[0]["fix"].startswith("start the docker service")
    assert not [r for r in doc["rows"] if r["component"].startswith("docker container")]


def test_docker_not_installed_is_one_info_row(tmp_path: Path) -> None:
    _, doc, _ = _audit(docker_snapshot(tmp_path, docker=None))
    engine = [r for r in doc["rows"] if r["component"] == "container engine docker"]
    assert [(r["status"], r["detail"]) for r in engine] == [
        ("info", "not installed: no containers of its own to audit")
    ]


def test_malformed_inspect_is_one_unknown_row(tmp_path: Path) -> None:
    _, doc, _ = _audit(docker_snapshot(tmp_path, inspect='[{"Id": "x", "Config": {"Env": "NOT A LIST"}}]'))
    engine = [r for r in doc["rows"] if r["component"] == "container engine docker"]
    assert len(engine) == 1 and "Config.Env: expected a list" in engine[0]["detail"]


def test_malformed_cdi_spec_is_one_unknown_row(tmp_path: Path) -> None:
    _, doc, _ = _audit(docker_snapshot(tmp_path, spec="cdiVersion: 0.5.0\nkind: [nvidia\n"))
    spec = rows_by_component(doc)["CDI spec"]
    assert spec["status"] == "unknown" and spec["detail"].startswith("not a CDI spec: not YAML")
    assert spec["fix"] == "write it again: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"


def test_relative_paths_in_an_answer_or_a_spec_are_refused_not_followed(tmp_path: Path) -> None:
    relative = json.dumps([{"Id": "x" * 12, "GraphDriver": {"Data": {"MergedDir": "var/lib/docker/x/merged"}}}])
    _, doc, _ = _audit(docker_snapshot(tmp_path, inspect=relative))
    engine = [r for r in doc["rows"] if r["component"] == "container engine docker"]
    assert len(engine) == 1 and "not an absolute path" in engine[0]["detail"]
    spec = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: all, containerEdits: {}}]\n"
    spec += "containerEdits: {mounts: [{hostPath: lib/libcuda.so.1, containerPath: /x}]}\n"
    _, doc, _ = _audit(docker_snapshot(tmp_path / "spec", spec=spec))
    assert rows_by_component(doc)["CDI spec"]["detail"].endswith("hostPath: not an absolute path")
