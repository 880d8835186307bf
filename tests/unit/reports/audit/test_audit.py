"""fwman audit on temp host roots: kernel modules via depmod, manifests, user space, CUDA compat, containers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.forge import real_branch_lists
from fixtures.tinymod.elfgen import build_module, make_signing_key, nvidia_tags, sign_module
from fwman.core import paths
from fwman.core.findings import Severity
from fwman.driver.forks.config import DEFAULT_FORKS
from fwman.driver.forks.model import Fork
from fwman.host.live import LiveHost
from fwman.platform.proxmox import lxc_uses_gpu
from fwman.reports.audit.p2p import p2p_line
from fwman.reports.audit.report import audit_host
from tests.support.env import FwmanEnv
from tests.support.tools import missing

KVER = "6.1.0-50-amd64"
KVER2 = "6.1.0-53-amd64"
VER = "570.86.16"
KEY = make_signing_key("fwman module signing")
LIBS = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-nvvm")
MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")


class Tree:
    """Builds a host tree under a temp root, file by file, the way the real places look."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root.parent / f"{root.name}-bin"
        self.bin.mkdir(parents=True, exist_ok=True)

    def write(self, path: str, data: bytes | str) -> Path:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p

    def loaded(self, version: str = VER, open_module: bool = True, kernel: str = KVER) -> Tree:
        kind = "NVIDIA UNIX Open Kernel Module for x86_64" if open_module else "NVIDIA UNIX x86_64 Kernel Module"
        self.write(
            "/proc/driver/nvidia/version",
            f"NVRM version: {kind}  {version}  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 1\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
        )
        self.write("/sys/module/nvidia/version", version + "\n")
        self.write("/proc/sys/kernel/osrelease", kernel + "\n")
        return self

    def module(self, kver: str, rel: str, version: str, built_for: str | None = None, signed: bool = True) -> bytes:
        name = rel.rsplit("/", 1)[1].split(".ko")[0]
        data = build_module(nvidia_tags(version, built_for or kver, name=name.replace("-", "_")))
        if signed:
            data = sign_module(data, *KEY)
        raw = lzma.compress(data, format=lzma.FORMAT_XZ) if rel.endswith(".xz") else data
        self.write(f"/lib/modules/{kver}/{rel}", raw)
        return raw

    def fwman_install(self, kver: str, version: str = VER, manifest: bool = True) -> None:
        """Stock modules in kernel/drivers/video, fwman's in updates/fwman with an override and a manifest."""
        entries = {}
        for m in MODULES:
            self.module(kver, f"kernel/drivers/video/{m}.ko", version, signed=False)
            raw = self.module(kver, f"updates/fwman/{m}.ko", version)
            entries[m] = {
                "path": f"/lib/modules/{kver}/updates/fwman/{m}.ko",
                "sha256": hashlib.sha256(raw).hexdigest(),
                "size": len(raw),
            }
        self.write("/etc/depmod.d/fwman.conf", "".join(f"override {m} * updates/fwman\n" for m in MODULES))
        if manifest:
            doc = {
                "kernel": kver,
                "fork": "aikitoria",
                "branch": f"{version}-p2p",
                "commit": "0" * 40,
                "modules": entries,
                "built_at": "2026-11-29T08:00:00+00:00",
            }
            self.write(f"/var/lib/fwman/modules/{kver}.json", json.dumps(doc))

    def libs(self, version: str = VER, root: str = "", libdir: str = "/usr/lib/x86_64-linux-gnu") -> None:
        for lib in LIBS:
            self.write(f"{root}{libdir}/{lib}.so.{version}", b"\x7fELF")
            link = self.root / f"{root}{libdir}/{lib}.so.1".lstrip("/")
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            link.symlink_to(f"{lib}.so.{version}")

    def firmware(self, version: str = VER) -> None:
        self.write(f"/lib/firmware/nvidia/{version}/gsp_ga10x.bin", b"fw")

    def compat(self, cuda: str, version: str) -> None:
        self.write(f"/usr/local/cuda-{cuda}/compat/libcuda.so.{version}", b"\x7fELF")
        self.write(f"/usr/local/cuda-{cuda}/compat/libnvidia-ptxjitcompiler.so.{version}", b"\x7fELF")

    def smi(self, version: str = VER) -> None:
        """nvidia-smi needs a GPU: this stand-in prints the real `nvidia-smi --version` text for ``version``."""
        script = self.bin / "nvidia-smi"
        major_minor = ".".join(version.split(".")[:2])
        script.write_text(
            "#!/bin/sh\n"
            f"printf 'NVIDIA-SMI version  : {version}\\nNVML version        : {major_minor}\\n"
            f"DRIVER version      : {version}\\nCUDA Version        : 12.8\\n'\n"
        )
        script.chmod(0o755)

    def branch_cache(self, age: timedelta = timedelta(hours=2)) -> None:
        fetched = (datetime.now(UTC) - age).isoformat()
        lists = real_branch_lists()
        forks = {
            url: {
                "fork": name,
                "branches": lists[url.removeprefix("https://github.com/")],
                "source": "api",
                "fetched_at": fetched,
            }
            for name, url in DEFAULT_FORKS.items()
        }
        self.write(paths.BRANCH_CACHE_FILE, json.dumps({"format": "fwman-branch-cache", "version": 1, "forks": forks}))

    def lxc(self, ctid: str, gpu: bool = True, mounted_version: str | None = None, hook: bool = False) -> None:
        lines = ["arch: amd64", "hostname: ct", "rootfs: local-lvm:vm-disk,size=8G"]
        if gpu:
            lines += ["lxc.cgroup2.devices.allow: c 195:* rwm", "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind"]
        if hook:
            lines += ["lxc.hook.mount: /usr/share/lxc/hooks/nvidia"]
        self.write(f"/etc/pve/lxc/{ctid}.conf", "\n".join(lines) + "\n")
        if mounted_version is not None:
            self.write(f"/var/lib/lxc/{ctid}/rootfs/etc/os-release", "ID=debian\n")
            self.libs(mounted_version, root=f"/var/lib/lxc/{ctid}/rootfs")

    def healthy(self) -> Tree:
        self.loaded()
        self.fwman_install(KVER)
        self.libs()
        self.firmware()
        self.smi()
        self.branch_cache()
        return self

    def host(self) -> LiveHost:
        return LiveHost(str(self.root), env={"PATH": f"{self.bin}:/usr/bin:/bin"})

    def run(self, *args: str):
        env = FwmanEnv(path_prepend=[self.bin])
        return env("audit", "--root", str(self.root), "--offline", *args)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "root")


def rows(doc: dict, status: str | None = None) -> list[dict]:
    return [r for r in doc["rows"] if status is None or r["status"] == status]


# -- everything matches ----------------------------------------------------------------------------------
def test_healthy_host_exit_0(tree: Tree) -> None:
    tree.healthy()
    r = tree.run("--json")
    assert r.code == 0, r.stdout + r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.audit/1"
    assert doc["ok"] is True and doc["reference"] == VER
    assert doc["loaded"]["flavour"] == "open"
    mods = {m["name"]: m for m in doc["modules"]}
    assert sorted(mods) == ["nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia_uvm"]
    nv = mods["nvidia"]
    assert nv["path"] == f"/lib/modules/{KVER}/updates/fwman/nvidia.ko"  # the override beats kernel/
    assert nv["origin"] == "patched" and nv["branch"] == f"{VER}-p2p" and nv["fork"] == "aikitoria"
    assert nv["signed"] is True and nv["signer"] == "fwman module signing"
    assert nv["vermagic"].startswith(KVER) and nv["srcversion"] == "0123456789ABCDEF0123456"
    assert doc["smi_version"] == VER and doc["firmware"] == [VER]
    assert doc["p2p"]["status"] == "available" and doc["p2p"]["forks"] == ["aikitoria"]
    assert doc["p2p"]["source"] == "cache" and 7000 < doc["p2p"]["oldest_age_seconds"] < 7400


def test_healthy_host_text(tree: Tree) -> None:
    tree.healthy()
    r = tree.run()
    assert r.code == 0, r.stderr
    assert r.stdout.startswith(f"Reference version: {VER} (loaded kernel module)")
    assert f"nvidia.ko ({KVER})" in r.stdout
    assert f"P2P branch {VER}-p2p: carried by aikitoria (cache, cached 2 h ago)" in r.stdout
    assert "patched (570.86.16-p2p from aikitoria); signed by fwman module signing" in r.stdout


# -- the real case: driver and CUDA compat library of different versions ------------------------------------
def test_cuda_compat_is_reported_as_compat_not_driver(tree: Tree) -> None:
    tree.healthy()
    tree.compat("12.9", "575.57.08")
    r = tree.run("--json")
    assert r.code == 0, r.stdout
    doc = r.json()
    assert list(doc["host_libs"]) == [VER]  # the compat copy is not a driver library
    assert doc["host_compat"] == [
        "/usr/local/cuda-12.9/compat/libcuda.so.575.57.08",
        "/usr/local/cuda-12.9/compat/libnvidia-ptxjitcompiler.so.575.57.08",
    ]
    compat_rows = [x for x in doc["rows"] if "CUDA compat" in x["component"]]
    assert {(x["version"], x["status"]) for x in compat_rows} == {("575.57.08", "info")}
    text = tree.run().stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("CUDA compat libcuda.so "))
    assert line.split()[3:6] == ["575.57.08", "info", "/usr/local/cuda-12.9/compat/libcuda.so.575.57.08"]


# -- mismatches -------------------------------------------------------------------------------------------
def test_container_root_mismatch_has_fix(tree: Tree) -> None:
    tree.healthy()
    tree.libs("565.77", root="/srv/images/vllm")
    r = tree.run("--container-root", "/srv/images/vllm", "--json")
    assert r.code == 4
    doc = r.json()
    bad = rows(doc, "mismatch")
    assert {x["component"] for x in bad} == {
        "root /srv/images/vllm: libcuda.so",
        "root /srv/images/vllm: libnvidia-ml.so",
        "root /srv/images/vllm: other driver libraries (2)",
    }
    assert all(
        x["fix"] == f"in the image at /srv/images/vllm: install the user space of {VER}: "
        f"sh NVIDIA-Linux-x86_64-{VER}.run --no-kernel-modules"
        for x in bad
    )
    assert "audit: 3 mismatch(es), 0 unknown" in r.stderr


def test_container_root_match(tree: Tree) -> None:
    tree.healthy()
    tree.libs(VER, root="/srv/images/ok", libdir="/usr/lib64")
    r = tree.run("--container-root", "/srv/images/ok", "--json")
    assert r.code == 0
    assert r.json()["containers"][0]["versions"] == {
        VER: sorted(f"/srv/images/ok/usr/lib64/{lib}.so.{VER}" for lib in LIBS)
    }


def test_container_root_absolute_link_does_not_read_the_host(tree: Tree) -> None:
    tree.healthy()
    img = tree.root / "srv/img"
    (img / "usr").mkdir(parents=True)
    (img / "usr/lib").symlink_to("/usr/lib")  # absolute: inside the image it means the image's own /usr/lib
    r = tree.run("--container-root", "/srv/img", "--json")
    doc = r.json()
    assert doc["containers"][0]["versions"] == {}
    assert any(x["component"] == "root /srv/img: driver libraries" and x["status"] == "unknown" for x in doc["rows"])


def test_proxmox_containers(tree: Tree) -> None:
    tree.healthy()
    tree.lxc("101", mounted_version=VER)
    tree.lxc("102", mounted_version="565.77")
    tree.lxc("103")  # GPU, but stopped: rootfs not mounted
    tree.lxc("104", gpu=False)
    tree.lxc("105", gpu=False, hook=True)
    r = tree.run("--json")
    doc = r.json()
    assert r.code == 4
    states = {c["name"]: c["state"] for c in doc["containers"]}
    assert states == {"101": "read", "102": "read", "103": "not-mounted", "104": "no-gpu", "105": "hook"}
    by = {x["component"]: x for x in doc["rows"]}
    assert by["container 101: libcuda.so"]["status"] == "match"
    assert by["container 102: libcuda.so"]["status"] == "mismatch"
    assert by["container 102: libcuda.so"]["fix"].startswith("inside container 102 (pct enter 102): install")
    assert by["container 103"]["status"] == "unknown" and "pct mount 103" in by["container 103"]["fix"]
    assert by["container 104"]["status"] == "info"
    assert by["container 105"]["status"] == "info"


def test_dkms_replaced_module_is_not_fwman(tree: Tree) -> None:
    tree.healthy()
    # DKMS put its own build over fwman's file: same version string, different bytes
    tree.module(KVER, "updates/fwman/nvidia.ko", VER, signed=False)
    doc = tree.run("--json").json()
    nv = next(m for m in doc["modules"] if m["name"] == "nvidia")
    assert nv["origin"] == "not-fwman" and nv["signed"] is False
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER})")
    assert row["status"] == "mismatch" and "not the one fwman installed" in row["fix"]


def test_without_manifest_origin_is_unknown(tree: Tree) -> None:
    tree.loaded()
    tree.fwman_install(KVER, manifest=False)
    tree.libs()
    tree.firmware()
    tree.smi()
    r = tree.run("--json")
    assert r.code == 0
    doc = r.json()
    assert {m["origin"] for m in doc["modules"]} == {"unknown"}
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER})")
    assert "patched/stock unknown (no fwman manifest)" in row["detail"]
    assert doc["p2p"]["status"] == "unknown"  # offline and no cache


def test_second_kernel_with_other_version_and_xz(tree: Tree) -> None:
    tree.healthy()
    tree.module(KVER2, "updates/dkms/nvidia.ko.xz", "565.77")
    doc = tree.run("--json").json()
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER2})")
    assert row["version"] == "565.77" and row["status"] == "mismatch"
    assert row["where"] == f"/lib/modules/{KVER2}/updates/dkms/nvidia.ko.xz"
    assert row["fix"] == (
        f"build and install the {VER} kernel module for {KVER2} (P2P fork branch {VER}-p2p): "
        f"`fwman modules build --kernel {KVER2} --fork aikitoria --driver-version {VER}`"  # the cached carrier
    )


def test_one_fix_line_for_every_module_file_of_every_kernel_it_repairs(tree: Tree) -> None:
    """Five module files on each of two kernels at another version: ten rows, each with its kernel's fix in --json,
    and in the text each row's detail then ONE fix, naming both kernels in a command that takes them as printed."""
    tree.healthy()
    kver3 = "6.1.0-54-amd64"
    for kver in (KVER2, kver3):
        for name in MODULES:
            tree.module(kver, f"updates/dkms/{name}.ko", "565.77")
    rows = [x for x in tree.run("--json").json()["rows"] if x["version"] == "565.77"]
    assert len(rows) == 10 and {x["fix"].split(": `")[1] for x in rows} == {
        f"fwman modules build --kernel {k} --fork aikitoria --driver-version {VER}`" for k in (KVER2, kver3)
    }
    text = tree.run().stdout
    fixes = [line for line in text.splitlines() if line.startswith("  fix: ")]
    assert fixes == [
        f"  fix: build and install the {VER} kernel module for {KVER2}, {kver3} (P2P fork branch {VER}-p2p): "
        f"`fwman modules build --kernel {KVER2} --kernel {kver3} --fork aikitoria --driver-version {VER}`"
    ]
    details = text[text.index("\n\n") :].splitlines()
    assert details.index(fixes[0]) > max(details.index(line) for line in details if line.startswith("nvidia"))


def test_module_built_for_another_kernel(tree: Tree) -> None:
    tree.healthy()
    tree.module(KVER2, "updates/fwman/nvidia.ko", VER, built_for=KVER)
    doc = tree.run("--json").json()
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER2})")
    assert row["status"] == "mismatch" and f"built for kernel {KVER}" in row["detail"]


def test_corrupt_manifest_leaves_origin_unknown_and_says_why(tree: Tree) -> None:
    tree.healthy()
    # a manifest without its kernel field is not fwman's document: no verdict from it, and the row says so
    tree.write(f"/var/lib/fwman/modules/{KVER}.json", json.dumps({"modules": {"nvidia": {"path": "/x"}}}))
    doc = tree.run("--json").json()
    assert {m["origin"] for m in doc["modules"]} == {"unknown"}
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER})")
    assert f"manifest /var/lib/fwman/modules/{KVER}.json unreadable" in row["detail"]
    assert "patched/stock unknown (no fwman manifest)" in row["detail"]


def test_corrupt_module_is_unknown_with_reason(tree: Tree) -> None:
    tree.healthy()
    tree.write(f"/lib/modules/{KVER2}/updates/nvidia.ko", b"this is not an ELF file")
    r = tree.run("--json")
    assert r.code == 4
    row = next(x for x in r.json()["rows"] if x["component"] == f"nvidia.ko ({KVER2})")
    assert row["status"] == "unknown" and "not an ELF file" in row["detail"]


def test_loaded_module_differs_from_user_space(tree: Tree) -> None:
    tree.healthy()
    tree.loaded("565.77", open_module=False)
    r = tree.run()
    assert r.code == 4
    assert "Reference version: 565.77 (loaded kernel module)" in r.stdout
    assert "loaded kernel module: proprietary" in r.stdout
    assert "fix: on the host: install the user space of 565.77: sh NVIDIA-Linux-x86_64-565.77.run" in r.stdout
    assert "P2P branch 565.77-p2p: carried by aikitoria" in r.stdout


def test_no_p2p_branch_for_version(tree: Tree) -> None:
    v = "575.51.02"
    tree.loaded(v)
    tree.libs(v)
    tree.firmware(v)
    tree.smi(v)
    tree.branch_cache(timedelta(days=3))
    r = tree.run()
    assert r.code == 0, r.stdout
    assert (
        f"P2P branch {v}-p2p: no fork carries it; nearest versions with a branch: 570.86.16 (moving means host "
        "and every container to that exact version" in r.stdout
    )
    assert "cached 3 days ago" in r.stdout


def test_not_loaded_uses_running_kernel_module(tree: Tree) -> None:
    tree.fwman_install(KVER)
    tree.write("/proc/sys/kernel/osrelease", KVER + "\n")
    tree.libs()
    tree.firmware()
    tree.smi()
    doc = tree.run("--json").json()
    assert doc["loaded"] is None
    assert doc["reference"] == VER and doc["reference_source"] == f"nvidia.ko for the running kernel {KVER}"
    assert doc["ok"] is True


def test_nothing_installed(tree: Tree) -> None:
    tree.write("/proc/sys/kernel/osrelease", KVER + "\n")
    r = tree.run("--json")
    doc = r.json()
    assert doc["reference"] is None
    assert r.code == 4
    assert any(x["component"] == "driver libraries" and x["status"] == "unknown" for x in doc["rows"])


def test_library_api_findings(tree: Tree) -> None:
    tree.healthy()
    tree.libs("565.77", root="/srv/img")
    report = audit_host(tree.host(), container_roots=["/srv/img"], offline=True, forks=[])
    assert not report.ok
    severities = {f.severity for f in report.findings()}
    assert Severity.WARN in severities
    assert any(f.fix and "NVIDIA-Linux-x86_64-570.86.16.run" in f.fix for f in report.findings())
    assert p2p_line(report.p2p).startswith("P2P branch 570.86.16-p2p: unknown")


def test_audit_with_live_local_fork(tree: Tree) -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None:
        missing("needs git (Debian package git)")
    tree.healthy()
    repo = tree.root / "srv/git/fork"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run([*git, "tag", f"{VER}-p2p"], check=True)  # a tag only: not a branch
    report = audit_host(tree.host(), forks=[Fork("local", "/srv/git/fork")])
    assert report.p2p.status == "none"
    subprocess.run([*git, "branch", f"{VER}-p2p"], check=True)
    # the first audit cached the list; a fresh cache is trusted by default, so ask for a live listing
    assert audit_host(tree.host(), forks=[Fork("local", "/srv/git/fork")]).p2p.source == "cache"
    report = audit_host(tree.host(), forks=[Fork("local", "/srv/git/fork")], max_cache_age=None)
    assert report.p2p.status == "available" and report.p2p.forks == ["local"] and report.p2p.source == "live"


def test_snapshot_example_host() -> None:
    from tests.support.env import EXAMPLE_HOST

    if not EXAMPLE_HOST.exists():
        pytest.skip("example host not present")
    r = FwmanEnv()("--snapshot", str(EXAMPLE_HOST), "audit", "--json")
    doc = r.json()
    assert doc["reference"] == doc["loaded"]["version"]
    assert doc["loaded"]["flavour"] == "proprietary"
    assert r.code in (0, 4)


# -- pure parts ----------------------------------------------------------------------------------------------
def test_a_manifest_the_strict_parser_rejects_is_reported_not_trusted(tree: Tree) -> None:
    # audit reads manifests with the one parser (driver/build/manifest.py): a sha256 that is not a digest is
    # an unreadable manifest, so no module is claimed as fwman's
    tree.loaded()
    tree.fwman_install(KVER)
    path = f"/var/lib/fwman/modules/{KVER}.json"
    tree.write(path, json.dumps({"kernel": KVER, "modules": {"nvidia": {"path": "/p", "sha256": "AB"}}}))
    out = tree.run("--json").json()
    nv = next(m for m in out["modules"] if m["name"] == "nvidia")
    assert nv["origin"] == "unknown"
    assert "modules.nvidia.sha256" in nv["error"] and path in nv["error"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_property_text_parsers_never_raise(text: str) -> None:
    assert lxc_uses_gpu(text) in {(False, False), (True, False), (False, True), (True, True)}


def test_lxc_snapshot_sections_are_ignored() -> None:
    conf = "arch: amd64\n[before-upgrade]\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
    assert lxc_uses_gpu(conf) == (False, False)
    assert lxc_uses_gpu("dev0: /dev/nvidia0\n") == (True, False)
    assert lxc_uses_gpu("lxc.hook.mount: /usr/share/lxc/hooks/nvidia\n[snap]\ndev0: /dev/nvidia0\n") == (False, True)


def test_capture_then_replay_audits_the_same(tree: Tree, tmp_path: Path) -> None:
    """`fwman capture` runs audit's collector; the replay gives the live answer (no file read beyond it)."""
    tree.healthy()
    tree.compat("12.9", "575.57.08")
    tree.lxc("101", mounted_version="565.77")
    env = FwmanEnv(path_prepend=[tree.bin])
    live = tree.run("--json")
    r = env("capture", str(tmp_path / "snap"), "--root", str(tree.root))
    assert r.code == 0, r.stderr
    replay = env("--snapshot", str(tmp_path / "snap"), "audit", "--json")
    assert replay.code == live.code == 4
    assert replay.json()["rows"] == live.json()["rows"]
    assert {x["component"] for x in replay.json()["rows"] if x["status"] == "mismatch"} == {
        "container 101: libcuda.so",
        "container 101: libnvidia-ml.so",
        "container 101: other driver libraries (2)",
    }
    assert f"nvidia-drm.ko ({KVER})" in {x["component"] for x in replay.json()["rows"]}


def test_installed_kernel_without_nvidia_module(tree: Tree) -> None:
    tree.healthy()
    tree.write(f"/lib/modules/{KVER2}/kernel/fs/ext4/ext4.ko", build_module([("name", "ext4")]))
    tree.write("/lib/modules/6.1.0-99-amd64/build/Makefile", "# headers only: not an installed kernel\n")
    doc = tree.run("--json").json()
    assert doc["kernels_without_module"] == [KVER2]
    row = next(x for x in doc["rows"] if x["component"] == f"nvidia.ko ({KVER2})")
    assert row["status"] == "mismatch" and "without a driver" in row["detail"]
    assert row["fix"] == (
        f"build and install the {VER} kernel module for {KVER2}: "
        f"`fwman modules build --kernel {KVER2} --fork aikitoria --driver-version {VER}`"
    )


def test_container_root_must_exist(tree: Tree) -> None:
    tree.healthy()
    r = tree.run("--container-root", "/srv/nothing")
    assert r.code == 2 and "--container-root /srv/nothing: not a directory" in r.stderr


def provided_user_space(tree: Tree, version: str, root: str = "") -> None:
    """The layout seen on a real VM whose user space is provided under /usr/local/nvidia (recorded on the
    project's H200 machine): /usr/lib/libcuda.so.1 -> /usr/local/nvidia/lib64/libcuda.so.1 -> libcuda.so.<ver>."""
    lib64 = tree.root / f"{root}/usr/local/nvidia/lib64".lstrip("/")
    lib64.mkdir(parents=True, exist_ok=True)
    (tree.root / f"{root}/usr/lib".lstrip("/")).mkdir(parents=True, exist_ok=True)
    for lib in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler"):
        (lib64 / f"{lib}.so.{version}").write_bytes(b"\x7fELF")
        (lib64 / f"{lib}.so.1").symlink_to(f"{lib}.so.{version}")
        if lib != "libnvidia-ptxjitcompiler":
            (tree.root / f"{root}/usr/lib/{lib}.so.1".lstrip("/")).symlink_to(f"/usr/local/nvidia/lib64/{lib}.so.1")


def test_user_space_provided_under_usr_local_nvidia(tree: Tree) -> None:
    tree.loaded("580.159.04")
    provided_user_space(tree, "580.159.04")
    tree.write("/usr/local/nvidia/firmware/nvidia/580.159.04/gsp_ga10x.bin", b"fw")
    tree.write("/sys/module/firmware_class/parameters/path", "/usr/local/nvidia/firmware\n")
    tree.smi("580.159.04")
    cuda = tree.root / "usr/local/cuda-13.0"
    tree.compat("13.0", "580.95.05")
    (tree.root / "usr/local/cuda").symlink_to(cuda)  # the alternatives link: the same compat directory
    r = tree.run("--json")
    doc = r.json()
    assert r.code == 0, r.stdout
    libcuda = [x for x in doc["rows"] if x["component"] == "libcuda.so"]
    assert [x["where"] for x in libcuda] == ["/usr/local/nvidia/lib64/libcuda.so.580.159.04"]  # once, not twice
    fw = next(x for x in doc["rows"] if x["component"] == "GSP firmware")
    assert fw["status"] == "match" and fw["where"] == "/usr/local/nvidia/firmware/nvidia/580.159.04"
    assert doc["host_compat"] == [
        "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05",
        "/usr/local/cuda-13.0/compat/libnvidia-ptxjitcompiler.so.580.95.05",
    ]


def test_link_only_layout_in_usr_lib(tree: Tree) -> None:
    """When only the .so.1 link is in a searched directory, the version comes from where it leads."""
    tree.healthy()
    img = "/srv/img"
    provided_user_space(tree, "565.77", root=img)
    (tree.root / "srv/img/usr/local/nvidia/lib64/libcuda.so.565.77").unlink()
    (tree.root / "srv/img/usr/local/nvidia/lib64/libcuda.so.1").unlink()
    (tree.root / "srv/img/usr/local/nvidia/lib64/libcuda.so.1").symlink_to("/opt/drv/libcuda.so.565.77")
    tree.write("/srv/img/opt/drv/libcuda.so.565.77", b"\x7fELF")
    tree.write("/opt/drv/libcuda.so.999.99", b"host file: must not be read for the image")
    doc = tree.run("--container-root", img, "--json").json()
    rows_img = {x["where"]: x for x in doc["rows"] if x["component"].startswith("root /srv/img")}
    # the absolute target is taken inside the image, and the chain from /usr/lib is followed to its end
    assert rows_img["/srv/img/usr/lib/libcuda.so.1 -> /srv/img/opt/drv/libcuda.so.565.77"]["status"] == "mismatch"
    assert "999.99" not in json.dumps(doc)


def test_real_h200_snapshot_driver_and_compat_differ() -> None:
    """The lead's recording of a real host: open module 580.159.04, CUDA compat libraries 580.95.05."""
    from tests.support.env import HOSTS

    snap = HOSTS / "h200-1gpu"
    if not snap.exists():
        pytest.skip("real host snapshot not present")
    doc = FwmanEnv()("--snapshot", str(snap), "audit", "--json").json()
    assert doc["reference"] == "580.159.04" and doc["loaded"]["flavour"] == "open"
    assert "580.95.05" not in doc["host_libs"]
    compat = [x for x in doc["rows"] if x["version"] == "580.95.05"]
    assert compat and all(x["status"] == "info" and x["component"].startswith("CUDA compat") for x in compat)
    assert all("/compat/" in p for p in doc["host_compat"])
    assert not [x for x in doc["rows"] if x["status"] == "mismatch"]  # unrecorded places are unknown, not wrong


def test_the_kernels_own_backlight_driver_is_not_an_nvidia_module(tree: Tree) -> None:
    """Every Debian 6.1 kernel ships drivers/platform/x86/nvidia-wmi-ec-backlight.ko: not a driver mismatch."""
    tree.healthy()
    tree.write(f"/lib/modules/{KVER}/kernel/drivers/platform/x86/nvidia-wmi-ec-backlight.ko", b"\x7fELF not NVIDIA's")
    r = tree.run("--json")
    assert r.code == 0, r.stdout + r.stderr
    assert "nvidia_wmi_ec_backlight" not in {m["name"] for m in r.json()["modules"]}


def test_a_branch_named_otherwise_carries_the_version_its_tree_builds(tree: Tree) -> None:
    # issue 26: bar1-p2p's name says no version; the tree read by `driver branches` (cached per commit) says it
    v = "575.51.02"
    tree.loaded(v)
    tree.libs(v)
    tree.firmware(v)
    tree.smi(v)
    fetched = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    old, new = "a" * 40, "b" * 40
    fork = {
        "fork": "aikitoria",
        "branches": ["main", f"{v}-p2p", "bar1-p2p"],
        "commits": {"main": "c" * 40, f"{v}-p2p": old, "bar1-p2p": new},
        "source": "git",
        "fetched_at": fetched,
    }
    trees = {
        old: {"version": v, "date": "2026-05-01T10:00:00+00:00", "error": None},
        new: {"version": v, "date": "2026-06-01T10:00:00+00:00", "error": None},
    }
    doc = {"format": "fwman-branch-cache", "version": 1, "forks": {DEFAULT_FORKS["aikitoria"]: fork}, "trees": trees}
    tree.write(paths.BRANCH_CACHE_FILE, json.dumps(doc))
    r = tree.run("--json")
    p2p = r.json()["p2p"]
    assert p2p["status"] == "available" and p2p["forks"] == ["aikitoria"]
    assert p2p["note"] == "newest branch building it: aikitoria: bar1-p2p"
    text = tree.run().stdout
    assert (
        f"P2P for {v}: carried by aikitoria (cache, cached 2 h ago); newest branch building it: aikitoria: bar1-p2p"
        in text
    )


def _misnamed_cache(tree: Tree, named: str, built: str) -> None:
    """Cache a listing of aikitoria whose ``{named}-p2p`` branch's tree builds ``built`` (read by driver branches),
    and of the other default forks with no P2P branch."""
    commit = "d" * 40
    fork = {
        "fork": "aikitoria",
        "branches": ["main", f"{named}-p2p"],
        "commits": {"main": "c" * 40, f"{named}-p2p": commit},
        "source": "git",
        "fetched_at": (datetime.now(UTC) - timedelta(hours=2)).isoformat(),
    }
    trees = {commit: {"version": built, "date": "2026-06-01T10:00:00+00:00", "error": None}}
    # the other default forks listed too, with no P2P branch: every fork has a listing, so "none" can be said
    forks = {url: {**fork, "fork": name, "branches": ["main"], "commits": {}} for name, url in DEFAULT_FORKS.items()}
    forks[DEFAULT_FORKS["aikitoria"]] = fork
    doc = {"format": "fwman-branch-cache", "version": 1, "forks": forks, "trees": trees}
    tree.write(paths.BRANCH_CACHE_FILE, json.dumps(doc))


@pytest.mark.parametrize("loaded", ["575.51.02", "570.86.16"])
def test_a_branch_named_for_one_version_carries_the_one_its_tree_builds(tree: Tree, loaded: str) -> None:
    # issue 26: 575.51.02-p2p's version.mk says 570.86.16: the audit goes by the tree, the name is only a hint
    named, built = "575.51.02", "570.86.16"
    tree.loaded(loaded)
    tree.libs(loaded)
    tree.firmware(loaded)
    tree.smi(loaded)
    _misnamed_cache(tree, named, built)
    p2p = tree.run("--json").json()["p2p"]
    if loaded == named:  # what the name says is carried by no branch
        assert p2p["status"] == "none" and p2p["forks"] == [], p2p
        assert p2p["nearest_below"] == built and p2p["nearest_above"] is None
    else:  # what the tree builds is, by the misnamed branch
        assert p2p["status"] == "available" and p2p["forks"] == ["aikitoria"], p2p
        assert p2p["note"] == f"newest branch building it: aikitoria: {named}-p2p"


def test_apt_is_asked_for_pending_upgrades_only_when_nvidia_user_space_packages_are_installed(tree: Tree) -> None:
    tree.healthy()
    queried = tree.bin.parent / "dpkg-queried"
    dpkg = tree.bin / "dpkg-query"  # the real one, noting that it was asked
    dpkg.write_text(f'#!/bin/sh\necho asked >> {queried}\nexec /usr/bin/dpkg-query "$@"\n')
    dpkg.chmod(0o755)
    assert tree.run("--json").code == 0
    assert not queried.exists()  # a tree without dpkg's database: no package to list
    status = tree.write(
        "/var/lib/dpkg/status", "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2\nArchitecture: amd64\n"
    )
    asked = tree.bin.parent / "apt-asked"
    apt = tree.bin / "apt-get"  # apt's answer in its own format; the stand-in notes that it was asked
    inst = f"Inst libcuda1 [{VER}-1] (575.57.08-1 Debian:12 [amd64])"
    apt.write_text(f"#!/bin/sh\necho asked >> {asked}\necho '{inst}'\n")
    apt.chmod(0o755)
    r = tree.run("--json")
    assert r.code == 0, r.stdout + r.stderr
    assert queried.read_text() == "asked\n"
    assert not asked.exists()  # dpkg says no NVIDIA package is installed: apt has none of them to upgrade
    assert "userspace_hold" not in r.json()
    cuda = f"Package: libcuda1\nStatus: install ok installed\nVersion: {VER}-1\nArchitecture: amd64\n"
    status.write_text(status.read_text() + "\n" + cuda)
    doc = tree.run("--json").json()
    assert asked.read_text() == "asked\n"
    assert doc["userspace_hold"]["pending_upgrades"] == {"libcuda1": {"installed": f"{VER}-1", "new": "575.57.08-1"}}
    assert "apt upgrade pending: libcuda1" in {row["component"] for row in rows(doc)}


def test_audit_imports_no_pydantic_and_no_openssl(tree: Tree) -> None:
    # fwman audit's start is most of its cost next to the engines' own commands (bench/containers.py): the
    # whole path (config file, modules with a manifest, libraries, LXC, a CDI spec, the branch cache) runs on
    # dataclasses and hand-checked input, so a fresh interpreter must never load pydantic, nor OpenSSL's hashlib
    # where no module is hashed
    import subprocess
    import sys

    tree.healthy()
    tree.lxc("101", mounted_version=VER)
    tree.write("/etc/fwman/config.toml", '[containers]\nengines = []\n[forks]\nmine = "https://example.org/f"\n')
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "all", "containerEdits": {}}]}
    tree.write("/etc/cdi/nvidia.json", json.dumps(spec))
    code = (
        "import sys\nfrom fwman.cli.app import run\n"
        f"rc = run(['--root', {str(tree.root)!r}, 'audit', '--offline', '--json'])\n"
        "print(rc, sorted(m for m in ('pydantic', 'hashlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.splitlines()[-1].split(" ", 1)[1] == "['hashlib']", out.stderr  # the manifest's hash
    tree.write(f"/var/lib/fwman/modules/{KVER}.json", "")  # no manifest to compare: nothing is hashed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.splitlines()[-1].split(" ", 1)[1] == "[]", out.stderr
