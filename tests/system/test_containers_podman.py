"""``fwman audit`` over real Podman containers (Debian's podman 4.3), made from tarballs the test builds.

Three GPU containers and one without a GPU, on a host whose driver is 570.86.16:

- ``serve-ok``: NVIDIA's runtime hook (``--runtime nvidia``), an image with NCCL 2.27.5: match;
- ``serve-cdi``: ``--device nvidia.com/gpu=all`` while /etc/cdi/nvidia.yaml still mounts the 550.54.15 libraries
  (written before the driver update): mismatch, fixed by ``nvidia-ctk cdi generate``;
- ``serve-own``: an image that ships its own libcuda 550.54.15 and NCCL 2.25.1: mismatch, rebuild the image;
- ``plain``: no GPU request: info.

None is started: ``podman create`` does not need the GPU, and audit reads their layers on disk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.engines import DRIVER, LIBDIR, OLD_DRIVER, Podman, gpu_host, nvidia_cdi_spec, rows_by_component
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

pytestmark = pytest.mark.system


@pytest.fixture
def podman_host(tmp_path: Path) -> tuple[Path, Podman]:
    require_tools("podman")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root)
    pm = Podman(root)
    (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(OLD_DRIVER))
    good = pm.image(
        "localhost/serve:good",
        {
            f"{LIBDIR}/libnccl.so.2.27.5": b"nccl",
            "/etc/os-release": b"ID=debian\n",
            # CUDA forward compatibility: reported, never taken for the driver
            f"/usr/local/cuda-12.8/compat/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
        },
    )
    own = pm.image(
        "localhost/serve:own",
        {
            f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
            f"{LIBDIR}/libnvidia-ml.so.{OLD_DRIVER}": b"\x7fELF",
            f"{LIBDIR}/libnccl.so.2.25.1": b"nccl",
        },
    )
    pm("create", "--name", "serve-ok", "--runtime", "nvidia", "-e", "NCCL_P2P_LEVEL=SYS", good, "/bin/true")
    pm("create", "--name", "serve-cdi", "--device", "nvidia.com/gpu=all", good, "/bin/true")
    pm("create", "--name", "serve-own", "--runtime", "nvidia", "-e", "NCCL_P2P_DISABLE=1", own, "/bin/true")
    pm("create", "--name", "plain", good, "/bin/true")
    yield root, pm
    pm("rm", "-a", "-f")
    pm("rmi", "-a", "-f")


def _audit(env: FwmanEnv, *where: str) -> dict:
    r = env(*where, "audit", "--offline", "--json")
    assert r.code in (0, 4), r.stderr
    return r.json()


def test_three_containers_match_mismatch_mismatch_with_their_fixes(podman_host: tuple[Path, Podman]) -> None:
    root, pm = podman_host
    env = FwmanEnv(variables=pm.env())
    doc = _audit(env, "--root", str(root))
    rows = rows_by_component(doc)
    ok, cdi, own = (
        rows["podman container serve-ok"],
        rows["podman container serve-cdi"],
        rows["podman container serve-own"],
    )
    assert (ok["status"], ok["version"]) == ("match", DRIVER), ok
    assert "NCCL_P2P_LEVEL=SYS" in ok["detail"] and "libnccl 2.27.5" in ok["detail"]
    assert "CUDA forward-compatibility libraries at /usr/local/cuda-12.8/compat" in ok["detail"]
    assert cdi["status"] == "mismatch" and cdi["version"] == OLD_DRIVER
    assert cdi["fix"] == "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, then restart container serve-cdi"
    assert own["status"] == "mismatch"
    assert f"own libcuda.so {OLD_DRIVER}" in own["detail"] and "libnccl 2.25.1" in own["detail"]
    assert own["fix"].startswith("rebuild localhost/serve:own without the driver's libraries")
    assert rows["podman container plain"]["status"] == "info"
    spec = rows["CDI spec nvidia.com/gpu"]
    assert spec["status"] == "mismatch" and spec["where"] == "/etc/cdi/nvidia.yaml"
    assert "host paths gone" in spec["detail"]
    by_name = {c["name"]: c for c in doc["containers"] if c["kind"] == "podman"}
    assert by_name["serve-own"]["nccl"] == {"2.25.1": [f"{LIBDIR}/libnccl.so.2.25.1"]}
    assert by_name["serve-own"]["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert by_name["serve-cdi"]["cdi_devices"] == ["nvidia.com/gpu=all"]
    assert by_name["serve-ok"]["filesystem"] == "image layers"
    assert by_name["serve-ok"]["compat"] == [f"/usr/local/cuda-12.8/compat/libcuda.so.{OLD_DRIVER}"]

    # the driver's spec written again for 570.86.16: the CDI container matches too
    (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(DRIVER))
    again = rows_by_component(_audit(env, "--root", str(root)))
    assert again["podman container serve-cdi"]["status"] == "match"
    assert again["CDI spec nvidia.com/gpu"]["status"] == "match"


def test_the_capture_of_a_podman_host_replays_the_same_audit(podman_host: tuple[Path, Podman], tmp_path: Path) -> None:
    root, pm = podman_host
    env = FwmanEnv(variables=pm.env())
    live = _audit(env, "--root", str(root))
    cap = env("--root", str(root), "capture", str(tmp_path / "snap"))
    assert cap.code in (0, 6), cap.stderr
    pm("rm", "-a", "-f")  # the replay must not ask the engine: the containers are gone from it
    replay = _audit(FwmanEnv(), "--snapshot", str(tmp_path / "snap"))
    assert replay["rows"] == live["rows"]
    assert replay["containers"] == live["containers"]


def test_a_container_whose_layers_are_gone_is_one_unknown_row(podman_host: tuple[Path, Podman]) -> None:
    root, pm = podman_host
    inspect = json.loads(pm("inspect", "serve-ok"))[0]
    shutil.rmtree(inspect["GraphDriver"]["Data"]["UpperDir"])
    for lower in inspect["GraphDriver"]["Data"]["LowerDir"].split(":"):
        shutil.rmtree(lower)
    r = FwmanEnv(variables=pm.env())("--root", str(root), "audit", "--offline", "--json")
    assert r.code == 4 and "Traceback" not in r.stderr
    row = rows_by_component(r.json())["podman container serve-ok"]
    assert row["status"] == "unknown" and row["fix"].startswith("its filesystem is gone: `podman rm serve-ok`")


def test_a_vfs_container_is_read_through_podman_mount(tmp_path: Path) -> None:
    # the vfs driver reports no directory in GraphDriver.Data: audit asks `podman mount` for it
    require_tools("podman")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root)
    pm = Podman(root, driver="vfs")
    try:
        own = pm.image("localhost/serve:own", {f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF"})
        pm("create", "--name", "vfs-own", "--runtime", "nvidia", own, "/bin/true")
        doc = _audit(FwmanEnv(variables=pm.env()), "--root", str(root))
        row = rows_by_component(doc)["podman container vfs-own"]
        assert row["status"] == "mismatch" and f"own libcuda.so {OLD_DRIVER}" in row["detail"]
        assert [c["filesystem"] for c in doc["containers"] if c["name"] == "vfs-own"] == ["podman mount"]
    finally:
        pm("rm", "-a", "-f")
        pm("rmi", "-a", "-f")


def test_podman_gpus_is_refused_by_4_3_or_read_as_the_cdi_device_it_becomes(tmp_path: Path) -> None:
    # Podman 4.3 (Debian 12) has no --gpus; a Podman that maps it (containers/podman PR 21180) makes it the CDI
    # device nvidia.com/gpu=all, and audit must then check that container against the CDI spec
    require_tools("podman")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root)
    pm = Podman(root)
    (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(OLD_DRIVER))
    try:
        image = pm.image("localhost/serve:good", {f"{LIBDIR}/libnccl.so.2.27.5": b"nccl"})
        version = pm("version", "--format", "{{.Client.Version}}").strip()
        try:
            pm("create", "--name", "gpus", "--gpus", "all", image, "/bin/true")
        except AssertionError as refused:
            assert version.startswith("4.3."), f"podman {version} refused --gpus: {refused}"
            assert "unknown flag: --gpus" in str(refused)
            return
        doc = _audit(FwmanEnv(variables=pm.env()), "--root", str(root))
        by_name = {c["name"]: c for c in doc["containers"] if c["kind"] == "podman"}
        assert by_name["gpus"]["cdi_devices"] == ["nvidia.com/gpu=all"]
        assert rows_by_component(doc)["podman container gpus"]["status"] == "mismatch"  # the spec is stale
    finally:
        pm("rm", "-a", "-f")
        pm("rmi", "-a", "-f")
