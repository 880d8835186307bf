"""A stopped container read from its layers: the overlay's whiteouts and opaque directories decide what it sees.

Replayed from a constructed snapshot (the replay side of ``Host.overlay_marker``): two Docker containers share
the image layer that ships libcuda 550.54.15 and NCCL 2.25.1; ``slim``'s image adds a layer that deletes them
(a 0/0 character device for libcuda, ``.wh.`` files for the rest, the compat directory opaque), ``fat`` has only
the first layer. The real engines' whiteouts are in tests/system/test_containers_whiteouts.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fwman.host.base import CommandResult
from fwman.host.recording import SnapshotWriter
from fwman.platform.engines import ps_argv
from tests.support.engines import DRIVER, LIBDIR, OLD_DRIVER, rows_by_component
from tests.support.env import FwmanEnv

BASE = "/var/lib/docker/overlay2"
COMPAT = "/usr/local/cuda-12.8/compat"
VLLM = "/root/.cache/vllm"
CACHE = "gpu_p2p_access_cache_for_0,1.json"


def _container(name: str, layers: list[str]) -> dict[str, Any]:
    upper, *lower = layers
    return {
        "Id": name * 4,
        "Name": f"/{name}",
        "State": {"Status": "exited"},
        "Config": {"Image": f"example/{name}:1", "Env": []},
        "HostConfig": {"Runtime": "nvidia"},
        "GraphDriver": {"Name": "overlay2", "Data": {"UpperDir": upper, "LowerDir": ":".join(lower)}},
    }


def _tree(w: SnapshotWriter, layer: str, listing: dict[str, list[str]]) -> None:
    """Record a layer's directories (container path -> names), the root's and every parent's included."""
    for path, names in listing.items():
        w.add_dir(layer + path if path != "/" else layer, names)


def _snapshot(tmp_path: Path) -> Path:
    w = SnapshotWriter(redact=False, constructed=True, note="layers with whiteouts, test")
    w.add_file("/sys/module/nvidia/version", DRIVER + "\n")
    w.add_dir(LIBDIR, [f"libcuda.so.{DRIVER}", f"libnvidia-ml.so.{DRIVER}"])
    w.add_tool("docker", "/usr/bin/docker")
    w.add_tool("podman", None)
    w.add_dir("/etc/cdi", [])
    first, deleting = f"{BASE}/l1/diff", f"{BASE}/l2/diff"
    _tree(
        w,
        first,
        {
            "/": ["root", "usr"],
            "/root": [".cache"],
            "/root/.cache": ["vllm"],
            VLLM: [CACHE],
            "/usr": ["lib", "local"],
            "/usr/lib": ["x86_64-linux-gnu"],
            LIBDIR: [f"libcuda.so.{OLD_DRIVER}", f"libnvidia-ml.so.{OLD_DRIVER}", "libnccl.so.2.25.1"],
            "/usr/local": ["cuda-12.8"],
            "/usr/local/cuda-12.8": ["compat"],
            COMPAT: [f"libcuda.so.{OLD_DRIVER}"],
        },
    )
    _tree(
        w,
        deleting,
        {
            "/": ["root", "usr"],
            "/root": [".cache"],
            "/root/.cache": ["vllm"],
            VLLM: [f".wh.{CACHE}"],  # the image's build removed a stale P2P verdict
            "/usr": ["lib", "local"],
            "/usr/lib": ["x86_64-linux-gnu"],
            # libcuda deleted by a 0/0 device of its name, the others by AUFS-style .wh. files
            LIBDIR: [
                f"libcuda.so.{OLD_DRIVER}",
                f".wh.libnvidia-ml.so.{OLD_DRIVER}",
                ".wh.libnccl.so.2.25.1",
                "libnccl.so.2.27.5",
            ],
            "/usr/local": ["cuda-12.8"],
            "/usr/local/cuda-12.8": ["compat"],
            COMPAT: ["README"],
        },
    )
    w.add_file(f"{first}{VLLM}/{CACHE}", json.dumps({"0->1": False, "1->0": False}))
    w.add_overlay_marker(f"{deleting}{LIBDIR}/libcuda.so.{OLD_DRIVER}", "whiteout")
    w.add_overlay_marker(f"{deleting}{COMPAT}", "opaque")
    for upper in ("slim", "fat"):
        w.add_dir(f"{BASE}/{upper}/diff", [])
    containers = [
        _container("slim", [f"{BASE}/slim/diff", deleting, first]),
        _container("fat", [f"{BASE}/fat/diff", first]),
    ]
    ids = [c["Id"] for c in containers]
    lines = "".join(json.dumps({"ID": i}) + "\n" for i in ids)
    w.add_command(CommandResult(tuple(ps_argv("docker")), 0, lines, ""))
    w.add_command(CommandResult(("docker", "inspect", *ids), 0, json.dumps(containers), ""))
    return w.write(tmp_path / "snap")


def test_what_a_later_layer_deleted_is_not_reported(tmp_path: Path) -> None:
    r = FwmanEnv()("--snapshot", str(_snapshot(tmp_path)), "audit", "--offline", "--json")
    assert r.code in (0, 4) and "Traceback" not in r.stderr, r.stderr
    doc = r.json()
    rows = rows_by_component(doc)
    by_name = {c["name"]: c for c in doc["containers"]}
    slim, fat = by_name["slim"], by_name["fat"]
    # the deleting layer's whiteouts and opaque compat directory hide the first layer's files
    assert rows["docker container slim"]["status"] == "match", rows["docker container slim"]
    assert slim["nccl"] == {"2.27.5": [f"{LIBDIR}/libnccl.so.2.27.5"]}
    assert slim["compat"] == [] and slim["versions"] == {}
    # the same first layer, read for a container without the deleting layer: all of it is there
    assert rows["docker container fat"]["status"] == "mismatch"
    assert f"own libcuda.so {OLD_DRIVER}" in rows["docker container fat"]["detail"]
    assert fat["nccl"] == {"2.25.1": [f"{LIBDIR}/libnccl.so.2.25.1"]}
    assert fat["compat"] == [f"{COMPAT}/libcuda.so.{OLD_DRIVER}"]
    # vLLM's cached verdict: deleted for slim, there for fat
    assert slim["vllm_cache"] is None
    assert fat["vllm_cache"] == {"0->1": False, "1->0": False}
