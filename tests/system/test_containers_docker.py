"""``fwman audit`` over a real Docker daemon (Debian's docker.io 20.10), started by hand for the test.

The daemon runs in a private mount namespace with its data root under the test root, its socket in the test's
directory and NVIDIA's runtime registered in its daemon.json as ``nvidia-ctk runtime configure`` writes it
(tests/support/engines.py, :class:`~tests.support.engines.Docker`); fwman reaches it as the docker CLI does,
through ``DOCKER_HOST``. Images are ``docker import`` s of tarballs the test builds (no registry). On a host whose
driver is 570.86.16:

- ``serve-ok``: NVIDIA's runtime (``--runtime nvidia``), an image with NCCL 2.27.5: match;
- ``serve-gpus``: ``--gpus all`` (a DeviceRequest with capability gpu), the same image: match;
- ``serve-cdi``: NVIDIA's runtime asked for the CDI device ``nvidia.com/gpu=all`` (``NVIDIA_VISIBLE_DEVICES``: the
  runtime's auto mode injects by CDI then) while /etc/cdi/nvidia.yaml still mounts the 550.54.15 libraries:
  mismatch, fixed by ``nvidia-ctk cdi generate``;
- ``serve-own``: ``--gpus all`` on an image that ships its own libcuda 550.54.15 and NCCL 2.25.1: mismatch,
  rebuild the image;
- ``plain``: no GPU request: info.

None is started (``docker create`` needs no GPU and no NVIDIA toolkit); audit reads their layers on disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engines import (
    DOCKERD,
    DRIVER,
    LIBDIR,
    OLD_DRIVER,
    Docker,
    docker_gpu_root,
    gpu_host,
    nvidia_cdi_spec,
    rows_by_component,
)
from tests.support.env import FwmanEnv
from tests.support.tools import is_root, missing

pytestmark = pytest.mark.system

#: fwman finds Debian's docker client (20.10), not another one earlier on this machine's PATH
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture
def docker_host(tmp_path: Path) -> Iterator[tuple[Path, Docker]]:
    root = docker_gpu_root(tmp_path)
    (root / "etc/cdi").mkdir(parents=True)
    (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(OLD_DRIVER))
    dk = Docker(root, tmp_path)
    print(dk.storage_note)  # which storage driver this machine allowed, and why (pytest -s shows it)
    dk.start()
    try:
        good = dk.image(
            "localhost/serve:good",
            {
                f"{LIBDIR}/libnccl.so.2.27.5": b"nccl",
                "/etc/os-release": b"ID=debian\n",
                f"/usr/local/cuda-12.8/compat/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
            },
        )
        own = dk.image(
            "localhost/serve:own",
            {
                f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
                f"{LIBDIR}/libnvidia-ml.so.{OLD_DRIVER}": b"\x7fELF",
                f"{LIBDIR}/libnccl.so.2.25.1": b"nccl",
            },
        )
        dk("create", "--name", "serve-ok", "--runtime", "nvidia", "-e", "NCCL_P2P_LEVEL=SYS", good, "/bin/true")
        dk("create", "--name", "serve-gpus", "--gpus", "all", good, "/bin/true")
        cdi = ["-e", "NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=all"]
        dk("create", "--name", "serve-cdi", "--runtime", "nvidia", *cdi, good, "/bin/true")
        dk("create", "--name", "serve-own", "--gpus", "all", "-e", "NCCL_P2P_DISABLE=1", own, "/bin/true")
        dk("create", "--name", "plain", good, "/bin/true")
        yield root, dk
    finally:
        dk.stop()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(tmp_path) not in mounts, "the test's dockerd left a mount on this machine"


def _env(dk: Docker | None = None) -> FwmanEnv:
    return FwmanEnv(variables={"PATH": PATH, **(dk.env() if dk else {})})


def _audit(env: FwmanEnv, *where: str) -> dict:
    r = env(*where, "audit", "--offline", "--json")
    assert r.code in (0, 4), r.stderr
    return r.json()


def _check_rows(doc: dict) -> None:
    rows = rows_by_component(doc)
    ok, gpus, cdi, own = (rows[f"docker container {n}"] for n in ("serve-ok", "serve-gpus", "serve-cdi", "serve-own"))
    assert (ok["status"], ok["version"]) == ("match", DRIVER), ok
    assert "NCCL_P2P_LEVEL=SYS" in ok["detail"] and "libnccl 2.27.5" in ok["detail"]
    assert (gpus["status"], gpus["version"]) == ("match", DRIVER), gpus
    assert cdi["status"] == "mismatch" and cdi["version"] == OLD_DRIVER, cdi
    assert cdi["fix"] == "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, then restart container serve-cdi"
    assert own["status"] == "mismatch", own
    assert f"own libcuda.so {OLD_DRIVER}" in own["detail"] and "libnccl 2.25.1" in own["detail"]
    assert own["fix"].startswith("rebuild localhost/serve:own without the driver's libraries")
    assert rows["docker container plain"]["status"] == "info"
    assert rows["CDI spec nvidia.com/gpu"]["status"] == "mismatch"
    by_name = {c["name"]: c for c in doc["containers"] if c["kind"] == "docker"}
    assert by_name["serve-own"]["nccl"] == {"2.25.1": [f"{LIBDIR}/libnccl.so.2.25.1"]}
    assert by_name["serve-own"]["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert by_name["serve-cdi"]["cdi_devices"] == ["nvidia.com/gpu=all"]
    assert by_name["serve-gpus"]["gpu"] == ["--gpus (all)"]
    assert by_name["serve-ok"]["compat"] == [f"/usr/local/cuda-12.8/compat/libcuda.so.{OLD_DRIVER}"]


def test_a_real_docker_daemon_three_containers_match_mismatch_mismatch(docker_host: tuple[Path, Docker]) -> None:
    root, dk = docker_host
    ids = json.loads(dk("inspect", "serve-own"))[0]
    # the daemon is the test's: its own data root, the storage driver probed for this machine
    assert ids["GraphDriver"]["Name"] == dk.storage_driver
    assert ids["GraphDriver"]["Data"]["UpperDir"].startswith(str(dk.data_root)) or dk.storage_driver == "vfs"
    env = _env(dk)
    doc = _audit(env, "--root", str(root))
    _check_rows(doc)
    assert {c["filesystem"] for c in doc["containers"] if c["kind"] == "docker" and c["gpu"]} == {"image layers"}

    text = env("--root", str(root), "audit", "--offline")
    assert text.code == 4, text.stderr
    lines = {ln.split()[2]: ln for ln in text.stdout.splitlines() if ln.startswith("docker container ")}
    assert "match" in lines["serve-ok"] and "mismatch" not in lines["serve-ok"]
    assert "mismatch" in lines["serve-cdi"] and "mismatch" in lines["serve-own"]
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in text.stdout
    assert "rebuild localhost/serve:own without the driver's libraries" in text.stdout

    # the driver's spec written again for 570.86.16: the CDI container matches too
    (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(DRIVER))
    again = rows_by_component(_audit(env, "--root", str(root)))
    assert again["docker container serve-cdi"]["status"] == "match"


def test_the_capture_of_a_docker_host_replays_the_same_audit(docker_host: tuple[Path, Docker], tmp_path: Path) -> None:
    root, dk = docker_host
    env = _env(dk)
    live = _audit(env, "--root", str(root))
    cap = env("--root", str(root), "capture", str(tmp_path / "snap"))
    assert cap.code in (0, 6), cap.stderr
    dk.stop()  # the replay must not ask the daemon: it is gone
    replay = _audit(_env(), "--snapshot", str(tmp_path / "snap"))
    assert replay["rows"] == live["rows"]
    assert replay["containers"] == live["containers"]
    _check_rows(replay)


def test_a_docker_daemon_that_is_not_running_is_one_unknown_row(docker_host: tuple[Path, Docker]) -> None:
    root, dk = docker_host
    dk.stop()
    r = _env(dk)("--root", str(root), "audit", "--offline", "--json")
    assert r.code == 4 and "Traceback" not in r.stderr
    engine = rows_by_component(r.json())["container engine docker"]
    assert engine["status"] == "unknown" and "Cannot connect to the Docker daemon" in engine["detail"]


def test_a_docker_vfs_container_is_read_from_the_directory_its_layer_store_names(tmp_path: Path) -> None:
    # vfs: inspect's GraphDriver.Data is null and Docker has no `mount`: the layer store names the directory
    if not is_root() or not Path(DOCKERD).exists():
        missing("needs root and dockerd (Debian package docker.io)")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root, engines=("docker",))
    dk = Docker(root, tmp_path, storage_driver="vfs")
    dk.start()
    try:
        own = dk.image("localhost/serve:own", {f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF"})
        dk("create", "--name", "vfs-own", "--gpus", "all", own, "/bin/true")
        assert json.loads(dk("inspect", "vfs-own"))[0]["GraphDriver"] == {"Data": None, "Name": "vfs"}
        env = _env(dk)
        doc = _audit(env, "--root", str(root))
        row = rows_by_component(doc)["docker container vfs-own"]
        assert row["status"] == "mismatch" and f"own libcuda.so {OLD_DRIVER}" in row["detail"], row
        assert [c["filesystem"] for c in doc["containers"] if c["name"] == "vfs-own"] == ["docker vfs directory"]
        cap = env("--root", str(root), "capture", str(tmp_path / "snap"))
        assert cap.code in (0, 6), cap.stderr
    finally:
        dk.stop()
    replay = _audit(_env(), "--snapshot", str(tmp_path / "snap"))
    assert replay["containers"] == doc["containers"]
