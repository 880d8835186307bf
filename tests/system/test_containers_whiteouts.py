"""A library deleted in a later image layer is not reported: real overlay whiteouts, from real engines.

The image is built as ``docker save`` writes one (two layer tarballs, the second with the ``.wh.`` entries a
``RUN rm`` leaves: tests/support/engines.py, ``image_archive`` and ``SLIM_LAYERS``) and loaded with
``docker load`` / ``podman load`` (no registry); the engine stores the deletions as overlay whiteouts (0/0
character devices) and an opaque directory (xattr ``trusted.overlay.opaque``), which the test checks on disk
before auditing. And ``Host.overlay_marker`` on a tree made by hand (``mknod``, ``setxattr``: root).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwman.host.live import LiveHost
from tests.support.engines import (
    LIBDIR,
    OLD_DRIVER,
    SLIM_LAYERS,
    Docker,
    Podman,
    docker_gpu_root,
    gpu_host,
    image_archive,
    rows_by_component,
)
from tests.support.env import FwmanEnv
from tests.support.tools import is_root, missing, require_tools

pytestmark = pytest.mark.system

PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
COMPAT = "/usr/local/cuda-12.8/compat"


def test_overlay_markers_of_a_tree_made_by_hand(tmp_path: Path) -> None:
    if not is_root():
        missing("mknod and trusted.* extended attributes need root")
    os.mknod(tmp_path / "gone", stat.S_IFCHR | 0o600, os.makedev(0, 0))
    os.mknod(tmp_path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a device, not a whiteout
    for name, attr in (("opaque", "trusted.overlay.opaque"), ("rootless", "user.overlay.opaque"), ("plain", "")):
        (tmp_path / name).mkdir()
        if attr:
            os.setxattr(tmp_path / name, attr, b"y")
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("gone")
    host = LiveHost(str(tmp_path))
    markers = {n: host.overlay_marker(f"/{n}") for n in ("gone", "null", "opaque", "rootless", "plain", "file")}
    assert markers == {
        "gone": "whiteout",
        "null": None,
        "opaque": "opaque",
        "rootless": "opaque",
        "plain": None,
        "file": None,
    }
    assert host.overlay_marker("/link") is None  # the link itself, never what it points to
    assert host.overlay_marker("/absent") is None


def _check_slim(doc: dict, kind: str) -> None:
    rows = rows_by_component(doc)
    slim = {c["name"]: c for c in doc["containers"] if c["kind"] == kind}["slim"]
    assert slim["filesystem"] == "image layers"
    assert rows[f"{kind} container slim"]["status"] == "match", rows[f"{kind} container slim"]
    assert slim["versions"] == {} and slim["compat"] == []
    assert slim["nccl"] == {"2.27.5": [f"{LIBDIR}/libnccl.so.2.27.5"]}
    assert f"own libcuda.so {OLD_DRIVER}" not in rows[f"{kind} container slim"]["detail"]


def _assert_stored_as_overlay_whiteouts(lower_dirs: list[str]) -> None:
    """The engine really stored the deletions as overlay whiteouts (else the test proves nothing)."""
    devices = [os.lstat(p) for d in lower_dirs if os.path.lexists(p := d + f"{LIBDIR}/libcuda.so.{OLD_DRIVER}")]
    assert any(stat.S_ISCHR(s.st_mode) and s.st_rdev == 0 for s in devices), "no 0/0 whiteout device stored"
    opaque = [
        d for d in lower_dirs if os.path.isdir(d + COMPAT) and "trusted.overlay.opaque" in os.listxattr(d + COMPAT)
    ]
    assert opaque and os.getxattr(opaque[0] + COMPAT, "trusted.overlay.opaque") == b"y", "no opaque directory stored"


@pytest.fixture
def docker_slim(tmp_path: Path) -> Iterator[tuple[Path, Docker]]:
    root = docker_gpu_root(tmp_path)
    dk = Docker(root, tmp_path)
    dk.start()
    try:
        (tmp_path / "slim.tar").write_bytes(image_archive("localhost/serve:slim", SLIM_LAYERS))
        dk("load", "-i", str(tmp_path / "slim.tar"))
        dk("create", "--name", "slim", "--runtime", "nvidia", "localhost/serve:slim", "/bin/true")
        yield root, dk
    finally:
        dk.stop()


def test_docker_a_library_deleted_in_a_later_layer_is_gone(docker_slim: tuple[Path, Docker], tmp_path: Path) -> None:
    root, dk = docker_slim
    if dk.storage_driver != "overlay2":
        pytest.skip(dk.storage_note)  # vfs applies deletions when it copies a layer: no whiteout is kept
    data = json.loads(dk("inspect", "slim"))[0]["GraphDriver"]["Data"]
    _assert_stored_as_overlay_whiteouts(data["LowerDir"].split(":"))
    env = FwmanEnv(variables={"PATH": PATH, **dk.env()})
    live = env("--root", str(root), "audit", "--offline", "--json")
    assert live.code in (0, 4), live.stderr
    _check_slim(live.json(), "docker")
    cap = env("--root", str(root), "capture", str(tmp_path / "snap"))
    assert cap.code in (0, 6), cap.stderr
    dk.stop()
    replay = FwmanEnv(variables={"PATH": PATH})("--snapshot", str(tmp_path / "snap"), "audit", "--offline", "--json")
    assert replay.json()["containers"] == live.json()["containers"]
    _check_slim(replay.json(), "docker")


def test_podman_a_library_deleted_in_a_later_layer_is_gone(tmp_path: Path) -> None:
    require_tools("podman")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root)
    pm = Podman(root)
    try:
        (tmp_path / "slim.tar").write_bytes(image_archive("localhost/serve:slim", SLIM_LAYERS))
        pm("load", "-i", str(tmp_path / "slim.tar"))
        pm("create", "--name", "slim", "--runtime", "nvidia", "localhost/serve:slim", "/bin/true")
        data = json.loads(pm("inspect", "slim"))[0]["GraphDriver"]["Data"]
        _assert_stored_as_overlay_whiteouts([d for d in data["LowerDir"].split(":") if d])
        r = FwmanEnv(variables=pm.env())("--root", str(root), "audit", "--offline", "--json")
        assert r.code in (0, 4), r.stderr
        _check_slim(r.json(), "podman")
    finally:
        pm("rm", "-a", "-f")
        pm("rmi", "-a", "-f")
