"""A real Podman (Debian's 4.3) with private storage inside a test root, and the files of a GPU host.

Podman is pointed at the root through its own configuration variables (``CONTAINERS_CONF``,
``CONTAINERS_STORAGE_CONF``), never a system-wide file: graph root, run root and temp directory live under the
root, containers are made from tarballs the test builds (``podman import``, no registry), and CDI specs are
read from the root's /etc/cdi and /var/run/cdi. The engine prints machine paths (``ROOT/var/lib/...``); the
root holds a link from that path back to its own ``/``, so a Host rooted there reads them as a real host
(whose root is ``/``) would.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

from fwman.host.base import CommandResult
from fwman.host.recording import SnapshotWriter

DRIVER = "570.86.16"
OLD_DRIVER = "550.54.15"
LIBDIR = "/usr/lib/x86_64-linux-gnu"


#: run a command in a private mount namespace with an empty tmpfs over /var/lib (see Podman.__call__)
_ISOLATE = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount -t tmpfs fwman-test /var/lib && exec "$@"',
    "sh",
]


class Podman:
    """Podman acting on ``root``'s private storage."""

    isolated: bool | None = None  # whether commands run in a private mount namespace (probed on first use)

    def __init__(self, root: Path, driver: str = "overlay") -> None:
        self.root = root
        self.conf = root / "podman/containers.conf"
        self.storage = root / "podman/storage.conf"
        self.conf.parent.mkdir(parents=True, exist_ok=True)
        for d in ("var/lib/containers/storage", "run/containers/storage", "podman/tmp", "etc/cdi", "var/run/cdi"):
            (root / d).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            "[engine]\n"
            f'cdi_spec_dirs = ["{root}/etc/cdi", "{root}/var/run/cdi"]\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'events_logfile_path = "{root}/podman/events.log"\n'
            f'tmp_dir = "{root}/podman/tmp"\n'
            "[engine.runtimes]\n"
            # NVIDIA's runtime is runc/crun plus its hook; creating a container only needs the name to resolve
            'nvidia = ["/usr/bin/crun"]\n'
        )
        self.storage.write_text(
            "[storage]\n"
            f'driver = "{driver}"\n'
            f'graphroot = "{root}/var/lib/containers/storage"\n'
            f'runroot = "{root}/run/containers/storage"\n'
        )
        # the engine's paths are machine paths under the root: link the root's own path inside it back to "/"
        inside = root / str(root).lstrip("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        if not inside.is_symlink():
            inside.symlink_to("/")

    def env(self) -> dict[str, str]:
        """Return the variables that point podman at the private storage."""
        return {"CONTAINERS_CONF": str(self.conf), "CONTAINERS_STORAGE_CONF": str(self.storage)}

    def __call__(self, *args: str) -> str:
        """Run ``podman args...`` and return its stdout (asserting it succeeded).

        Rootful podman keeps a blob-info cache in /var/lib/containers/cache whatever its storage settings
        (containers/image's system default for root): the test's podman runs in a private mount namespace with
        a tmpfs over /var/lib, so that cache never lands on this machine. Where no mount namespace can be made
        podman runs plainly.
        """
        argv = ["podman", *args]
        if self.isolated is None:
            probe = subprocess.run([*_ISOLATE, "true"], capture_output=True, timeout=30, check=False)
            self.isolated = probe.returncode == 0
        if self.isolated:
            argv = [*_ISOLATE, *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **self.env()}, timeout=120)
        assert proc.returncode == 0, f"podman {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def image(self, tag: str, files: dict[str, bytes]) -> str:
        """Build a root filesystem tarball of ``files`` (container paths) and ``podman import`` it as ``tag``."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, data in sorted(files.items()):
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        tarball = self.root.parent / f"{tag.replace('/', '_').replace(':', '_')}.tar"
        tarball.write_bytes(buf.getvalue())
        self("import", str(tarball), tag)
        return tag


#: Debian's docker.io (20.10): its own client, not whatever other `docker` a PATH finds first
DOCKER = "/usr/bin/docker"
DOCKERD = "/usr/sbin/dockerd"
#: the daemon.json `nvidia-ctk runtime configure --runtime=docker` writes (nvidia-container-toolkit,
#: pkg/config/engine/docker/docker.go, AddRuntime: {"path": ..., "args": []} under "runtimes", 4-space indent);
#: dockerd registers the name without looking for the binary, which only a container start would run
NVIDIA_DAEMON_JSON = {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
#: dockerd in a private mount namespace: tmpfs over /etc/docker (20.10 writes its key.json there) and /run (its
#: plugin directory /run/docker/plugins), so nothing it writes outside the test's directories reaches this machine
_DOCKERD_NS = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount -t tmpfs fwman-test /etc/docker && mount -t tmpfs fwman-test /run && exec "$@"',
    "sh",
]


def overlay_works(where: Path) -> tuple[bool, str]:
    """Return (whether an overlay mount works on ``where``'s filesystem here, what was seen).

    Tried in a private mount namespace, so the probe mount never shows on this machine.
    """
    base = where / "overlay-probe"
    for d in ("lower", "upper", "work", "merged"):
        (base / d).mkdir(parents=True, exist_ok=True)
    opts = f"lowerdir={base}/lower,upperdir={base}/upper,workdir={base}/work"
    probe = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            opts,
            str(base / "merged"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    shutil.rmtree(base, ignore_errors=True)
    seen = (probe.stderr or probe.stdout).strip() or "mounted"
    return probe.returncode == 0, seen


class Docker:
    """A private dockerd (Debian's docker.io) for one test, started by hand, never the machine's service.

    Its data root is ``root``/var/lib/docker (so a Host rooted at ``root`` reads the paths it prints, as for
    :class:`Podman`), its exec root, pid file and socket are in ``work`` (a unix socket path must stay under 108
    bytes), no iptables, no bridge; it starts its own managed containerd (no --containerd). The storage driver is
    ``storage_driver`` when given, else overlay2 where an overlay mount works here, else vfs (``storage_note``
    says which and why). :meth:`stop`
    ends it and checks that no process of it is left.
    """

    def __init__(
        self, root: Path, work: Path, daemon_json: dict[str, Any] | None = None, storage_driver: str | None = None
    ) -> None:
        self.root = root
        self.work = work
        self.data_root = root / "var/lib/docker"
        self.exec_root = work / "dx"
        self.pidfile = work / "docker.pid"
        self.socket = work / "docker.sock"
        self.config = work / "daemon.json"
        self.log = work / "dockerd.log"
        assert len(str(self.socket)) < 100, f"socket path too long for a unix socket: {self.socket}"
        self.data_root.mkdir(parents=True, exist_ok=True)
        self.config.write_text(json.dumps(daemon_json or NVIDIA_DAEMON_JSON, indent=4) + "\n")
        if storage_driver is None:
            ok, seen = overlay_works(work)
            self.storage_driver = "overlay2" if ok else "vfs"
            self.storage_note = f"overlay mount here: {seen}; storage driver {self.storage_driver}"
        else:
            self.storage_driver, self.storage_note = storage_driver, f"storage driver {storage_driver}, as asked"
        inside = root / str(root).lstrip("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        if not inside.is_symlink():
            inside.symlink_to("/")
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Return the variables that point the docker CLI (and fwman, which runs it) at this daemon."""
        return {"DOCKER_HOST": f"unix://{self.socket}"}

    def start(self, timeout: float = 90.0) -> None:
        """Start dockerd and wait until it answers. Raises AssertionError with its log when it does not."""
        argv = [
            *_DOCKERD_NS,
            DOCKERD,
            "--config-file", str(self.config),
            "--data-root", str(self.data_root),
            "--exec-root", str(self.exec_root),
            "--pidfile", str(self.pidfile),
            "-H", f"unix://{self.socket}",
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--storage-driver", self.storage_driver,
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dockerd exited {self.proc.returncode}:\n{self._log_tail()}")
            if self.socket.exists():
                probe = subprocess.run(
                    [DOCKER, "version", "--format", "{{.Server.Version}}"],
                    capture_output=True,
                    text=True,
                    env={**os.environ, **self.env()},
                    timeout=30,
                    check=False,
                )
                if probe.returncode == 0:
                    return
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"dockerd did not answer within {timeout:.0f} s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:]) if self.log.exists() else ""

    def processes(self) -> list[str]:
        """Return the command lines of the processes that belong to this daemon (its exec root or socket)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(self.exec_root) in cmdline or str(self.socket) in cmdline:
                found.append(f"{entry.name}: {cmdline[:200]}")
        return found

    def stop(self) -> None:
        """Stop dockerd (SIGTERM: it stops its containerd), wait, and assert that no process of it is left."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc = None
        deadline = time.monotonic() + 30
        while self.processes() and time.monotonic() < deadline:  # containerd exits after its parent
            time.sleep(0.2)
        left = self.processes()
        assert not left, f"dockerd left processes: {left}"

    def __call__(self, *args: str) -> str:
        """Run ``docker args...`` (Debian's client) against this daemon and return its stdout."""
        proc = subprocess.run(
            [DOCKER, *args], capture_output=True, text=True, env={**os.environ, **self.env()}, timeout=120
        )
        assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def image(self, tag: str, files: dict[str, bytes]) -> str:
        """Build a root filesystem tarball of ``files`` (container paths) and ``docker import`` it as ``tag``."""
        tarball = self.work / f"{tag.replace('/', '_').replace(':', '_')}.tar"
        tarball.write_bytes(rootfs_tar(files))
        self("import", str(tarball), tag)
        return tag


def rootfs_tar(files: dict[str, bytes]) -> bytes:
    """Return a tar of ``files`` (container path -> bytes), the parent directories included."""
    buf = io.BytesIO()
    dirs = sorted({p.lstrip("/").rsplit("/", n)[0] for p in files for n in range(1, p.count("/"))} - {""})
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def image_archive(tag: str, layers: list[dict[str, bytes]]) -> bytes:
    """Return an image of ``layers`` (bottom first; container path -> bytes) in ``docker save``'s format, which
    ``docker load`` and ``podman load`` read: ``manifest.json`` naming the config and the layer tarballs, the
    config's ``rootfs.diff_ids`` the SHA-256 of each (moby, image/spec/v1.2.md). A file named ``.wh.NAME`` in a
    layer deletes NAME of the layers below, ``.wh..wh..opq`` makes its directory opaque (the whiteouts a
    ``RUN rm`` leaves in a layer tarball; the engine stores them as overlay whiteouts)."""
    blobs = [rootfs_tar(layer) for layer in layers]
    diff_ids = [f"sha256:{hashlib.sha256(b).hexdigest()}" for b in blobs]
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": f"layer {n}"} for n in range(len(blobs))],
        }
    ).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    names = [f"{d.split(':')[1]}/layer.tar" for d in diff_ids]
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": names}]).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in [(config_name, config), *zip(names, blobs, strict=True), ("manifest.json", manifest)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


#: an image whose second layer deletes what its first shipped: the driver's libraries (whiteouts), the old NCCL
#: for a new one, and the CUDA compat directory's content (opaque)
SLIM_LAYERS = [
    {
        f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
        f"{LIBDIR}/libnvidia-ml.so.{OLD_DRIVER}": b"\x7fELF",
        f"{LIBDIR}/libnccl.so.2.25.1": b"nccl",
        f"/usr/local/cuda-12.8/compat/libcuda.so.{OLD_DRIVER}": b"\x7fELF",
    },
    {
        f"{LIBDIR}/.wh.libcuda.so.{OLD_DRIVER}": b"",
        f"{LIBDIR}/.wh.libnvidia-ml.so.{OLD_DRIVER}": b"",
        f"{LIBDIR}/.wh.libnccl.so.2.25.1": b"",
        f"{LIBDIR}/libnccl.so.2.27.5": b"nccl",
        "/usr/local/cuda-12.8/compat/.wh..wh..opq": b"",
        "/usr/local/cuda-12.8/compat/README": b"emptied\n",
    },
]


def docker_gpu_root(tmp_path: Path) -> Path:
    """Return a new GPU host tree under ``tmp_path`` whose audit asks Docker (:func:`gpu_host`), after checking
    what a test daemon needs here: root, unshare and Debian's docker.io (a missing one skips, or fails under CI)."""
    from tests.support.tools import is_root, missing, require_tools

    require_tools("unshare")
    if not is_root():
        missing("dockerd needs root")
    for tool in (DOCKER, DOCKERD):
        if not Path(tool).exists():
            missing(f"needs {tool} (Debian package docker.io)")
    root = tmp_path / "root"
    root.mkdir()
    gpu_host(root, engines=("docker",))
    return root


def gpu_host(root: Path, driver: str = DRIVER, engines: tuple[str, ...] = ("podman",)) -> None:
    """Write the host side of a GPU box under ``root``: the loaded module and its user space; fwman's
    configuration asks ``engines``."""
    (root / "sys/module/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "sys/module/nvidia/version").write_text(driver + "\n")
    (root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-50-amd64\n")
    lib = root / LIBDIR.lstrip("/")
    lib.mkdir(parents=True, exist_ok=True)
    for name in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"):
        (lib / f"{name}.{driver}").write_bytes(b"\x7fELF")
    (root / "dev").mkdir(exist_ok=True)
    (root / "dev/nvidia0").write_text("")
    (root / "dev/nvidiactl").write_text("")
    (root / "etc/fwman").mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{e}"' for e in engines)
    (root / "etc/fwman/config.toml").write_text(f"[containers]\nengines = [{listed}]\n")


def nvidia_cdi_spec(driver: str, kind: str = "nvidia.com/gpu") -> str:
    """Return a CDI spec (YAML, the shape ``nvidia-ctk cdi generate`` writes) mounting ``driver``'s libraries."""
    mounts = "".join(
        f"  - hostPath: {LIBDIR}/{lib}.{driver}\n"
        f"    containerPath: {LIBDIR}/{lib}.{driver}\n"
        "    options: [ro, nosuid, nodev, bind]\n"
        for lib in ("libcuda.so", "libnvidia-ml.so")
    )
    return (
        "---\n"
        "cdiVersion: 0.5.0\n"
        f"kind: {kind}\n"
        "devices:\n"
        "- name: all\n"
        "  containerEdits:\n"
        "    deviceNodes:\n"
        "    - path: /dev/nvidia0\n"
        "containerEdits:\n"
        "  env:\n"
        "  - NVIDIA_VISIBLE_DEVICES=void\n"
        "  deviceNodes:\n"
        "  - path: /dev/nvidiactl\n"
        "  mounts:\n"
        f"{mounts}"
        "  hooks:\n"
        "  - hookName: createContainer\n"
        "    path: /usr/bin/nvidia-ctk\n"
        "    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]\n"
    )


def rows_by_component(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    """Return an audit JSON's rows keyed by component."""
    rows = doc["rows"]
    assert isinstance(rows, list)
    return {str(r["component"]): r for r in rows}


def dumps(doc: object) -> str:
    """Return ``doc`` as stable JSON text (for comparing a live audit with its replay)."""
    return json.dumps(doc, sort_keys=True, indent=1)


MERGED = "/var/lib/docker/overlay2/{}/merged"


def docker_container(
    name: str, cid: str, host_config: dict[str, Any], env: list[str] | None = None, state: str = "exited"
) -> dict[str, Any]:
    """Return one container in the Docker Engine API's ContainerInspect shape (the fields fwman reads)."""
    return {
        "Id": cid,
        "Name": f"/{name}",
        "State": {"Status": state},
        "Config": {"Image": f"example/{name}:1", "Env": env or []},
        "HostConfig": host_config,
        "Mounts": [],
        "GraphDriver": {"Name": "overlay2", "Data": {"MergedDir": MERGED.format(cid)}},
    }


def docker_snapshot(
    tmp_path: Path,
    *,
    ps: CommandResult | None = None,
    inspect: str | None = None,
    spec: str | None = None,
    docker: str | None = "/usr/bin/docker",
    vllm_cache: dict[str, bool] | None = None,
    state: str = "exited",
) -> Path:
    """Return a constructed snapshot of a Docker host (driver 570.86.16): containers ``hook`` (nvidia runtime),
    ``cdi`` (CDI request), ``own`` (--gpus, an image with libcuda 550.54.15 and NCCL 2.25.1), ``db`` (no GPU);
    ``ps``/``inspect`` replace the engine's answers, ``spec`` is /etc/cdi/nvidia.yaml, ``vllm_cache`` the P2P
    cache in ``hook``'s layers, ``docker`` where the client is (None: not installed)."""
    w = SnapshotWriter(redact=False, constructed=True, note="docker host, test")
    w.add_file("/sys/module/nvidia/version", DRIVER + "\n")
    w.add_dir(LIBDIR, [f"libcuda.so.{DRIVER}", f"libnvidia-ml.so.{DRIVER}"])
    w.add_tool("docker", docker)
    w.add_tool("podman", None)
    containers = [
        docker_container("hook", "1" * 12, {"Runtime": "nvidia"}, ["NCCL_P2P_LEVEL=SYS"], state),
        docker_container("cdi", "2" * 12, {"DeviceRequests": [{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=all"]}]}),
        docker_container("own", "3" * 12, {"DeviceRequests": [{"Count": -1, "Capabilities": [["gpu"]]}]}),
        docker_container("db", "4" * 12, {"Runtime": "runc"}),
    ]
    ids = [c["Id"] for c in containers]
    lines = "".join(json.dumps({"ID": c["Id"], "Names": c["Name"][1:], "State": "exited"}) + "\n" for c in containers)
    w.add_command(ps or CommandResult(("docker", "ps", "-a", "--format", "{{json .}}"), 0, lines, ""))
    w.add_command(CommandResult(("docker", "inspect", *ids), 0, inspect or json.dumps(containers), ""))
    for c in containers:
        merged = c["GraphDriver"]["Data"]["MergedDir"]
        w.add_dir(merged, ["usr"])
        if c["Id"] == "3" * 12:
            w.add_dir(merged + LIBDIR, [f"libcuda.so.{OLD_DRIVER}", "libnccl.so.2.25.1"])
            w.add_file(merged + LIBDIR + f"/libcuda.so.{OLD_DRIVER}", b"\x7fELF")
        if c["Id"] == "1" * 12 and vllm_cache is not None:
            w.add_dir(merged, ["root", "usr"])
            w.add_dir(merged + "/root/.cache/vllm", ["gpu_p2p_access_cache_for_0,1.json"])
            w.add_file(merged + "/root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json", json.dumps(vllm_cache))
    w.add_dir("/etc/cdi", ["nvidia.yaml"] if spec is not None else [])
    if spec is not None:
        w.add_file("/etc/cdi/nvidia.yaml", spec)
    return w.write(tmp_path / "snap")


def add_docker(snapshot: Path, containers: list[dict[str, Any]], files: dict[str, bytes] | None = None) -> None:
    """Add a Docker engine holding ``containers`` (ContainerInspect objects) to a copied snapshot directory, and
    ``files`` (host path -> bytes) with the listings of their directories."""
    meta_path = snapshot / "snapshot.json"
    meta = json.loads(meta_path.read_text())
    meta["tools"]["docker"] = "/usr/bin/docker"
    meta["tools"]["podman"] = None
    lines = "".join(json.dumps({"ID": c["Id"], "Names": c["Name"].lstrip("/")}) + "\n" for c in containers)
    outputs = {
        ("docker", "ps", "-a", "--format", "{{json .}}"): lines,
        ("docker", "inspect", *(c["Id"] for c in containers)): json.dumps(containers),
    }
    (snapshot / "commands").mkdir(exist_ok=True)
    for n, (argv, text) in enumerate(outputs.items()):
        name = f"docker{n}.stdout"
        (snapshot / "commands" / name).write_text(text)
        meta["commands"].append({"argv": list(argv), "rc": 0, "missing": False, "stdout": name})
    for path, data in (files or {}).items():
        dest = snapshot / "files" / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        parent, name = path.rsplit("/", 1)
        while parent:
            meta["dirs"].setdefault(parent, [])
            if name not in meta["dirs"][parent]:
                meta["dirs"][parent] = sorted([*meta["dirs"][parent], name])
            parent, name = parent.rsplit("/", 1) if "/" in parent.lstrip("/") else ("", "")
    meta_path.write_text(json.dumps(meta, indent=1))
