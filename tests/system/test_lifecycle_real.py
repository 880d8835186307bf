"""Issue 16 on the real tools: initramfs-tools' mkinitramfs and lsinitramfs, apt with a local repository of
stand-in packages (dpkg-deb), systemd's kernel-install and run-parts for the removal hook.

- initramfs: the real ``mkinitramfs`` (zstd, as Debian's default ``COMPRESS=zstd``) builds an image whose hook
  copies a stock ``nvidia.ko`` into it; fwman reads the same files ``lsinitramfs`` lists, says the patch is lost
  at boot, counts the kernel unsafe, and after the regeneration (``update-initramfs -u -k`` on a temp root is a
  thin wrapper that calls the real mkinitramfs with the root's modules) reads the patched one.
  mkinitramfs insists on ``/boot/config-KVER`` of the real root (it checks CONFIG_RD_ZSTD there): the test
  writes one for a kernel release that exists nowhere else and removes it at the end.
- hold: packages built with the real dpkg-deb, served from a ``file:`` repository; the real ``apt-get -s`` and
  ``apt-cache policy`` show the pin holding, ``apt-config dump`` the blacklist; release undoes both.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from fwman.driver.boot import initramfs
from fwman.driver.build.manifest import Manifest, ModuleEntry
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.tools import is_root, require_tools

pytestmark = pytest.mark.system

FAKE_KVER = "6.1.0-999-fwmantest"  # a release no package owns: mkinitramfs finds no modules of its own
HOOK = """#!/bin/sh
PREREQ=""
case "$1" in prereqs) echo "$PREREQ"; exit 0 ;; esac
# what a hook adding early-KMS modules does: copy nvidia*.ko of the kernel from the (root's) module tree
mkdir -p "${DESTDIR}/usr/lib/modules/${version}/updates"
cp -r "$FWMAN_TEST_MODULES/." "${DESTDIR}/usr/lib/modules/${version}/updates/"
"""


def _conf(tmp: Path) -> Path:
    conf = tmp / "initramfs-tools"
    subprocess.run(["cp", "-a", "/etc/initramfs-tools", str(conf)], check=True)
    text = (conf / "initramfs.conf").read_text().replace("MODULES=most", "MODULES=list")
    (conf / "initramfs.conf").write_text(text + "\nCOMPRESS=zstd\n")
    hook = conf / "hooks/zz-fwman-test-nvidia"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    return conf


def _mkinitramfs(conf: Path, modules: Path, out: Path) -> None:
    env = {**os.environ, "FWMAN_TEST_MODULES": str(modules)}
    subprocess.run(
        ["mkinitramfs", "-d", str(conf), "-o", str(out), FAKE_KVER], check=True, env=env, capture_output=True
    )


@pytest.fixture
def boot_config() -> object:
    path = Path(f"/boot/config-{FAKE_KVER}")
    if not is_root():
        pytest.skip("mkinitramfs needs /boot/config-KVER of the real root: root only")
    path.parent.mkdir(exist_ok=True)
    path.write_text("CONFIG_RD_ZSTD=y\nCONFIG_RD_GZIP=y\n")
    yield path
    path.unlink()


def test_initramfs_with_stock_modules_is_found_and_regenerated(tmp_path: Path, boot_config: object) -> None:
    require_tools("mkinitramfs", "lsinitramfs", "zstd", "cpio")
    root = tmp_path / "root"
    conf = _conf(tmp_path)
    stock = build_module(nvidia_tags("570.86.16", FAKE_KVER))
    patched = build_module(nvidia_tags("570.86.16", FAKE_KVER, srcversion="P2PPATCHEDP2PPATCHED000"))
    # the root: fwman's patched module installed and in its manifest, a stock copy in updates/dkms
    ours = root / f"lib/modules/{FAKE_KVER}/updates/fwman"
    ours.mkdir(parents=True)
    (ours / "nvidia.ko").write_bytes(patched)
    entry = ModuleEntry(
        f"/lib/modules/{FAKE_KVER}/updates/fwman/nvidia.ko", hashlib.sha256(patched).hexdigest(), len(patched)
    )
    manifest = Manifest(
        FAKE_KVER, "aikitoria", "570.86.16-p2p", "a" * 40, {"nvidia": entry}, "2026-12-01T10:00:00+00:00"
    )
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / f"var/lib/fwman/modules/{FAKE_KVER}.json").write_bytes(manifest.to_json())
    dkms = tmp_path / "stock/dkms"
    dkms.mkdir(parents=True)
    (dkms / "nvidia.ko").write_bytes(stock)
    (root / "boot").mkdir()
    image = root / f"boot/initrd.img-{FAKE_KVER}"
    _mkinitramfs(conf, tmp_path / "stock", image)
    assert image.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # zstd, the real generator's choice

    # fwman reads exactly the regular files lsinitramfs lists
    listed = subprocess.run(["lsinitramfs", str(image)], check=True, capture_output=True, text=True).stdout.split()
    host = LiveHost(str(root))
    members = initramfs.read_archives(image.read_bytes(), initramfs.host_decompressor(host))
    regular = {m.name for m in members}
    assert regular <= set(listed) and f"usr/lib/modules/{FAKE_KVER}/updates/dkms/nvidia.ko" in regular
    assert not (root / "var/cache/fwman/initramfs/stream").exists()  # the zstd scratch file is gone

    state = initramfs.inspect(host, FAKE_KVER)
    assert state.problem == "initramfs has stock nvidia.ko 570.86.16: the patch is lost at boot"
    assert state.generator == "initramfs-tools"

    # the regeneration: update-initramfs -u -k KVER, here a wrapper that runs the real mkinitramfs over the root
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "update-initramfs"
    wrapper.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -u ] && [ "$2" = -k ] || exit 2\n'
        f'FWMAN_TEST_MODULES={root}/lib/modules/"$3"/updates \\\n'
        f'  exec mkinitramfs -d {conf} -o {root}/boot/initrd.img-"$3" "$3"\n'
    )
    wrapper.chmod(0o755)
    # the wrapper is the root's own update-initramfs (the door runs no other from under a root)
    live = LiveHost(str(root), env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, machine_tools=[str(bin_dir)])
    action = initramfs.RegenerateInitramfs(FAKE_KVER)
    assert action.is_needed(live)
    action.apply(live)
    assert action.after is not None and action.after.problem is None
    assert [m.matches_manifest for m in action.after.modules] == [True]
    assert not action.is_needed(live)


# -- user space hold with apt and a local repository -------------------------------------------------------
def _deb(build: Path, repo: Path, name: str, version: str) -> None:
    pkg = build / f"{name}-{version}"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: fwman tests <t@example.invalid>\n"
        "Description: stand-in for an NVIDIA user-space package\n"
    )
    subprocess.run(
        ["dpkg-deb", "-b", str(pkg), str(repo / f"{name}_{version}_all.deb")], check=True, capture_output=True
    )


def _apt_root(tmp: Path) -> Path:
    root = tmp / "root"
    repo = root / "srv/repo"
    for d in (
        "etc/apt/preferences.d",
        "etc/apt/apt.conf.d",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/lib/dpkg",
    ):
        (root / d).mkdir(parents=True)
    repo.mkdir(parents=True)
    names = ("libnvidia-ml1", "nvidia-smi", "nvidia-container-toolkit")
    for name in names:
        for version in ("570.86.16-1", "575.57.08-1"):
            _deb(tmp / "build", repo, name, version)
    packages = subprocess.run(["dpkg-scanpackages", "."], cwd=repo, check=True, capture_output=True, text=True).stdout
    (repo / "Packages").write_text(packages)
    status = "".join(
        f"Package: {n}\nStatus: install ok installed\nVersion: 570.86.16-1\nArchitecture: all\n"
        f"Maintainer: fwman tests <t@example.invalid>\nDescription: stand-in\n\n"
        for n in names
    )
    (root / "var/lib/dpkg/status").write_text(status)
    (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    (root / "apt.conf").write_text(f'Dir "{root}/";\nDir::State::status "{root}/var/lib/dpkg/status";\n')
    _apt(root, "apt-get", "update")
    return root


def _apt(root: Path, *argv: str) -> str:
    env = {**os.environ, "APT_CONFIG": str(root / "apt.conf")}
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, env=env).stdout


def test_hold_pins_with_real_apt_and_release_undoes_it(tmp_path: Path) -> None:
    require_tools("apt-get", "apt-cache", "apt-config", "dpkg-deb", "dpkg-scanpackages", "dpkg-query")
    root = _apt_root(tmp_path)
    run = FwmanEnv()
    before = _apt(root, "apt-get", "-s", "dist-upgrade")
    assert "Inst libnvidia-ml1 [570.86.16-1] (575.57.08-1" in before

    st = run("userspace", "status", "--json", "--root", str(root)).json()
    assert st["schema"] == "fwman.userspace-status/1" and st["held"] is False
    assert set(st["installed"]) == {"libnvidia-ml1", "nvidia-smi"}  # the container toolkit has its own versions
    assert st["pending_upgrades"]["libnvidia-ml1"] == {"installed": "570.86.16-1", "new": "575.57.08-1"}
    assert any("an upgrade of the NVIDIA user space is pending" in w for w in st["warnings"])

    audit = run("audit", "--json", "--offline", "--root", str(root)).json()  # exit 4 here: no driver at all
    pending = [row for row in audit["rows"] if row["component"] == "apt upgrade pending: libnvidia-ml1"]
    assert pending and pending[0]["version"] == "575.57.08-1" and pending[0]["fix"] == "fwman userspace hold"
    assert "Driver/library version mismatch" in pending[0]["detail"]

    dry = run("userspace", "hold", "--dry-run", "--root", str(root))
    assert dry.code == 0 and "would write /var/lib/fwman/userspace-hold.json" in dry.stdout
    r = run("userspace", "hold", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "held libnvidia-ml1 570.86.16-1" in r.stdout
    after = _apt(root, "apt-get", "-s", "dist-upgrade")
    assert "libnvidia-ml1" not in after and "nvidia-smi" not in after
    assert "Inst nvidia-container-toolkit" in after
    policy = _apt(root, "apt-cache", "policy", "libnvidia-ml1")
    assert "Candidate: 570.86.16-1" in policy and "1001" in policy
    dump = _apt(root, "apt-config", "dump", "Unattended-Upgrade::Package-Blacklist")
    assert 'Unattended-Upgrade::Package-Blacklist:: "^libnvidia\\-ml1$";' in dump
    st = run("userspace", "status", "--json", "--root", str(root)).json()
    assert st["held"] and st["pending_upgrades"] == {} and st["packages"]["nvidia-smi"] == "570.86.16-1"
    assert run("userspace", "hold", "--root", str(root)).stdout.endswith("hold already in place and current\n")
    # the dry run previews that same run: nothing to write
    assert run("userspace", "hold", "--dry-run", "--root", str(root)).stdout == "hold already in place and current\n"
    audit = run("audit", "--json", "--offline", "--root", str(root)).json()
    assert audit["userspace_hold"]["held"] is True
    assert not [row for row in audit["rows"] if row["component"].startswith("apt upgrade pending")]
    hold_row = next(row for row in audit["rows"] if row["component"] == "user-space apt hold")
    assert hold_row["where"].startswith("2 NVIDIA packages, held since ")

    r = run("userspace", "release", "--root", str(root))
    assert r.code == 0 and "released: libnvidia-ml1, nvidia-smi" in r.stdout
    assert not any((root / "etc/apt/preferences.d").iterdir())
    assert "Candidate: 575.57.08-1" in _apt(root, "apt-cache", "policy", "libnvidia-ml1")
    assert "Package-Blacklist" not in _apt(root, "apt-config", "dump", "Unattended-Upgrade")
    assert not (root / "var/lib/fwman/userspace-hold.json").exists()


def test_hold_says_plainly_when_the_run_installer_put_the_user_space(tmp_path: Path) -> None:
    require_tools("dpkg-query")
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("")
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/nvidia-installer.log").write_text("nvidia-installer log file\n")
    r = FwmanEnv()("userspace", "hold", "--root", str(root))
    assert r.code == 5 and "no NVIDIA user-space package to hold" in r.stderr
    assert ".run installer" in r.stderr and "nothing to pin" in r.stderr


def test_kernel_install_and_postrm_hooks_share_the_code_path(tmp_path: Path) -> None:
    """The real kernel-install runs fwman's plugin (remove), the real run-parts its postrm hook."""
    require_tools("kernel-install", "run-parts")
    from fwman.driver.hooks.files import rendered

    root = tmp_path / "root"
    files = rendered()
    from fwman.core import paths

    plugin = root / paths.KERNEL_INSTALL_PLUGIN.lstrip("/")
    postrm = root / paths.POSTRM_HOOK.lstrip("/")
    for path, key in ((plugin, paths.KERNEL_INSTALL_PLUGIN), (postrm, paths.POSTRM_HOOK)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[key])
        path.chmod(0o755)
    for kver in ("6.1.0-50-amd64", "6.1.0-53-amd64"):
        state = root / "var/lib/fwman/modules"
        state.mkdir(parents=True, exist_ok=True)
        (state / f"{kver}.pending").write_text(json.dumps({"kernel": kver, "reason": "no headers"}))
        (root / f"lib/modules/{kver}").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FWMAN_ROOT": str(root), "KERNEL_INSTALL_PLUGINS": str(plugin)}
    env["KERNEL_INSTALL_CONF_ROOT"] = str(root / "etc/kernel")
    r = subprocess.run(["kernel-install", "-v", "remove", "6.1.0-53-amd64"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not (root / "var/lib/fwman/modules/6.1.0-53-amd64.pending").exists()
    assert "6.1.0-53-amd64 removed: dropped" in r.stderr
    assert "no working patched modules" in r.stderr  # 6.1.0-50 has none either: said loudly, still exit 0
    assert not (root / "lib/modules/6.1.0-53-amd64").exists()  # only empty directories were pruned
    r = subprocess.run(
        [
            "run-parts",
            "--exit-on-error",
            "--arg=6.1.0-50-amd64",
            "--arg=/boot/vmlinuz-6.1.0-50-amd64",
            str(postrm.parent),
        ],
        env={**os.environ, "FWMAN_ROOT": str(root)},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert not (root / "var/lib/fwman/modules/6.1.0-50-amd64.pending").exists()
    assert "6.1.0-50-amd64 removed: dropped" in r.stderr


# -- Secure Boot and the initramfs decide "safe to boot" (status, check-boot) ------------------------------
KVER = "6.1.0-50-amd64"


def _verified_kernel(root: Path) -> bytes:
    """Install fwman's modules for KVER in ``root`` the way a build does (real depmod); return nvidia.ko."""
    from fwman.driver.build.install import install_modules
    from fwman.driver.build.manifest import write_manifest

    host = LiveHost(str(root))
    (root / f"lib/modules/{KVER}").mkdir(parents=True)
    built = {n: build_module(nvidia_tags("570.86.16", KVER, name=n)) for n in ("nvidia", "nvidia-uvm")}
    entries, _changed = install_modules(host, KVER, built)  # depmod runs as one of its actions
    write_manifest(host, Manifest(KVER, "aikitoria", "570.86.16-p2p", "b" * 40, entries, "2026-12-01T10:00:00+00:00"))
    return built["nvidia"]


def test_secure_boot_and_initramfs_count_in_check_boot(tmp_path: Path) -> None:
    require_tools("depmod")
    root = tmp_path / "root"
    ours = _verified_kernel(root)
    run = FwmanEnv()
    r = run("modules", "check-boot", "--json", "--root", str(root))
    assert r.code == 0, r.stdout + r.stderr
    # Secure Boot on (the EFI variable as efivarfs shows it: attributes NV|BS|RT, then 1), modules unsigned
    var = root / "sys/firmware/efi/efivars" / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x06\x00\x00\x00\x01")
    r = run("modules", "check-boot", "--root", str(root))
    assert r.code == 4 and "Secure Boot is on and the modules are unsigned" in r.stdout
    doc = run("modules", "status", "--json", "--root", str(root)).json()
    assert doc["secure_boot"]["schema"] == "fwman.secureboot/1"
    assert (doc["secure_boot"]["enabled"], doc["secure_boot"]["source"]) == (True, "efivars")
    assert doc["kernels"][0]["safe_to_boot"] is False
    var.write_bytes(b"\x06\x00\x00\x00\x00")
    assert run("modules", "check-boot", "--root", str(root)).code == 0
    # an initramfs (real cpio, newc, gzip) carrying a stock nvidia.ko: the patch is lost at boot
    stage = tmp_path / "initrd" / f"usr/lib/modules/{KVER}/kernel/drivers/video"
    stage.mkdir(parents=True)
    (stage / "nvidia.ko").write_bytes(
        build_module(nvidia_tags("570.86.16", KVER, srcversion="STOCKSTOCKSTOCKSTOCK000"))
    )
    names = subprocess.run(["find", "."], cwd=tmp_path / "initrd", capture_output=True, text=True, check=True).stdout
    archive = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"],
        cwd=tmp_path / "initrd",
        input=names.encode(),
        capture_output=True,
        check=True,
    ).stdout
    (root / "boot").mkdir()
    import gzip as gz

    (root / f"boot/initrd.img-{KVER}").write_bytes(gz.compress(archive))
    r = run("modules", "check-boot", "--root", str(root))
    assert r.code == 4 and "initramfs has stock nvidia.ko 570.86.16: the patch is lost at boot" in r.stdout
    doc = run("modules", "status", "--json", "--root", str(root)).json()
    initrd = doc["kernels"][0]["initramfs"]
    assert initrd["schema"] == "fwman.initramfs/1" and initrd["modules"][0]["ours"] is False
    assert doc["userspace_hold"]["schema"] == "fwman.userspace-hold/1"
    # fwman's own copy in the initramfs: safe again
    (stage / "nvidia.ko").write_bytes(ours)
    archive = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"],
        cwd=tmp_path / "initrd",
        input=names.encode(),
        capture_output=True,
        check=True,
    ).stdout
    (root / f"boot/initrd.img-{KVER}").write_bytes(gz.compress(archive))
    assert run("modules", "check-boot", "--root", str(root)).code == 0


def test_mokutil_here_says_what_fwman_parses() -> None:
    """This machine has no EFI: the real mokutil says so, and fwman reads that as "unknown", not as "off"."""
    require_tools("mokutil")
    from fwman.driver.kmod.secureboot import parse_sb_state

    r = subprocess.run(["mokutil", "--sb-state"], capture_output=True, text=True)
    text = r.stdout + r.stderr
    if "EFI variables are not supported on this system" not in text:
        pytest.skip(f"this machine has EFI variables: {text.strip()}")
    assert parse_sb_state(text) is None


# -- version lockstep at build time (issue 15) --------------------------------------------------------------
def test_build_refuses_a_branch_the_user_space_does_not_match(tmp_path: Path) -> None:
    from tests.support.modules import FORK_TREE, SOURCE

    root = tmp_path / "root"
    (root / f"lib/modules/{KVER}").mkdir(parents=True)
    (root / "src").mkdir()
    subprocess.run(["cp", "-a", str(FORK_TREE), str(root / SOURCE.lstrip("/"))], check=True)
    libs = root / "usr/lib/x86_64-linux-gnu"
    libs.mkdir(parents=True)
    (libs / "libnvidia-ml.so.575.57.08").write_bytes(b"")
    (libs / "libcuda.so.575.57.08").write_bytes(b"")
    r = FwmanEnv()("modules", "build", "--kernel", KVER, "--source", SOURCE, "--root", str(root))
    assert r.code == 3
    assert "builds driver 570.86.16 but the user space differs (host has 575.57.08)" in r.stderr
    assert "Driver/library version mismatch" in r.stderr and "--force" in r.stderr
    assert not (root / "var/log/fwman").exists()  # refused before anything ran
    # a container with the branch's version and the host matching: no refusal (headers missing: pending, exit 5)
    for lib in libs.iterdir():
        lib.rename(libs / lib.name.replace("575.57.08", "570.86.16"))
    r = FwmanEnv()("modules", "build", "--kernel", KVER, "--source", SOURCE, "--root", str(root))
    assert r.code == 5 and "apt install linux-headers-6.1.0-50-amd64" in r.stderr
