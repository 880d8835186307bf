"""Issue 16, the pure parts: initramfs cpio reader, Secure Boot/MOK parsers, the user-space hold, headers advice,
version lockstep and kernel removal (on temp roots)."""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from fwman.core.errors import BlockedError, MissingError, ParseError
from fwman.driver.boot import initramfs
from fwman.driver.build import lockstep
from fwman.driver.build.manifest import Manifest, ModuleEntry
from fwman.driver.headers import advise
from fwman.driver.hooks.removal import forget_kernel
from fwman.driver.kmod import mok, secureboot
from fwman.driver.userspace_hold import (
    is_userspace_package,
    parse_dpkg_query,
    parse_simulated_upgrade,
    render_blacklist,
    render_pin,
)
from fwman.host.live import LiveHost
from fwman.platform.distro import Distribution, parse_os_release

KVER = "6.1.0-50-amd64"


def newc(files: list[tuple[str, bytes]], dirs: tuple[str, ...] = ()) -> bytes:
    """Return a newc archive (the layout the kernel's initramfs buffer format documents) of ``files``."""
    out = bytearray()
    ino = 1

    def entry(name: str, mode: int, data: bytes) -> None:
        nonlocal ino
        encoded = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields) + encoded)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))
        ino += 1

    for d in dirs:
        entry(d, 0o40755, b"")
    for name, data in files:
        entry(name, 0o100644, data)
    entry("TRAILER!!!", 0, b"")
    return bytes(out)


def test_cpio_reader_reads_early_and_compressed_archives() -> None:
    ko = build_module(nvidia_tags("570.86.16", KVER))
    early = newc([("kernel/x86/microcode/GenuineIntel.bin", b"ucode")], dirs=("kernel",))
    main = newc([(f"usr/lib/modules/{KVER}/kernel/drivers/video/nvidia.ko", ko), ("init", b"#!/bin/sh\n")])
    for image in (early + b"\0" * 512 + gzip.compress(main), early + lzma.compress(main, format=lzma.FORMAT_XZ)):
        members = initramfs.read_archives(image)
        assert [m.name for m in members] == [
            "kernel/x86/microcode/GenuineIntel.bin",
            f"usr/lib/modules/{KVER}/kernel/drivers/video/nvidia.ko",
            "init",
        ]
        (found,) = initramfs.compare(KVER, members, {"nvidia": "0" * 64})
        assert (found.name, found.version, found.matches_manifest) == ("nvidia", "570.86.16", False)
    # another kernel's modules in the same image are not this kernel's
    assert initramfs.nvidia_members(initramfs.read_archives(main), "6.1.0-53-amd64") == []


def test_cpio_reader_names_what_is_wrong() -> None:
    good = newc([("a", b"x")])
    with pytest.raises(ParseError, match="archive ends before its trailer"):
        initramfs.read_archives(good[:-120])
    with pytest.raises(ParseError, match="neither a newc cpio archive"):
        initramfs.read_archives(b"PK\x03\x04 not an initramfs")
    with pytest.raises(MissingError, match="zstd"):
        initramfs.read_archives(b"\x28\xb5\x2f\xfd" + b"\0" * 16)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_cpio_reader_any_bytes_model_or_parse_error(data: bytes) -> None:
    try:
        initramfs.read_archives(data)
    except (ParseError, MissingError):
        pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20).filter(lambda n: "\0" not in n), st.binary(max_size=50))))
def test_cpio_reader_round_trips_any_files(files: list[tuple[str, bytes]]) -> None:
    names = [n for n, _ in files if n != "TRAILER!!!"]
    members = initramfs.read_archives(newc([(n, d) for n, d in files if n != "TRAILER!!!"]))
    assert len(members) == len(names)
    assert [m.data for m in members] == [d for n, d in files if n != "TRAILER!!!"]


def _manifest(root: Path, data: bytes) -> None:
    path = f"/lib/modules/{KVER}/updates/fwman/nvidia.ko"
    doc = Manifest(
        KVER,
        "aikitoria",
        "570.86.16-p2p",
        "c" * 40,
        {"nvidia": ModuleEntry(path, hashlib.sha256(data).hexdigest(), len(data))},
        "t",
    )
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / f"var/lib/fwman/modules/{KVER}.json").write_bytes(doc.to_json())


def test_initramfs_state_says_the_patch_is_lost_and_when_it_is_not(tmp_path: Path) -> None:
    patched = build_module(nvidia_tags("570.86.16", KVER, srcversion="PATCHEDPATCHEDPATCHED00"))
    stock = build_module(nvidia_tags("570.86.16", KVER))
    _manifest(tmp_path, patched)
    (tmp_path / "boot").mkdir()
    image = tmp_path / f"boot/initrd.img-{KVER}"
    host = LiveHost(str(tmp_path))
    image.write_bytes(gzip.compress(newc([(f"usr/lib/modules/{KVER}/updates/dkms/nvidia.ko", stock)])))
    state = initramfs.inspect(host, KVER)
    assert state.problem == "initramfs has stock nvidia.ko 570.86.16: the patch is lost at boot"
    assert state.to_dict()["schema"] == "fwman.initramfs/1"
    image.write_bytes(gzip.compress(newc([(f"usr/lib/modules/{KVER}/updates/fwman/nvidia.ko", patched)])))
    state = initramfs.inspect(host, KVER)
    assert state.problem is None and state.summary() == "carries fwman's 1 modules"
    image.write_bytes(b"garbage")
    assert "neither a newc cpio archive" in (initramfs.inspect(host, KVER).error or "")
    assert initramfs.inspect(host, "6.1.0-53-amd64").summary() == "none"


def test_regenerate_argv_per_generator() -> None:
    assert initramfs.regenerate_argv("initramfs-tools", KVER) == ["update-initramfs", "-u", "-k", KVER]
    assert initramfs.regenerate_argv("dracut", KVER) == ["dracut", "-f", "--kver", KVER]
    with pytest.raises(MissingError):
        initramfs.regenerate_argv("unknown", KVER)


# -- Secure Boot -------------------------------------------------------------------------------------------
def test_efi_secureboot_variable_layout() -> None:
    # efivarfs: 4 attribute bytes (NV|BS|RT = 0x07, little-endian) then the one data byte
    assert secureboot.parse_efi_bool(b"\x06\x00\x00\x00\x01") is True
    assert secureboot.parse_efi_bool(b"\x07\x00\x00\x00\x00") is False
    with pytest.raises(ParseError, match="expected 4 attribute bytes and 1 data byte, got 1"):
        secureboot.parse_efi_bool(b"\x01")
    with pytest.raises(ParseError, match="value 2"):
        secureboot.parse_efi_bool(b"\x06\x00\x00\x00\x02")


@given(st.binary(max_size=12))
def test_efi_bool_any_bytes(data: bytes) -> None:
    try:
        assert secureboot.parse_efi_bool(data) in (True, False)
    except ParseError:
        pass


@given(st.text(max_size=300))
def test_mokutil_parsers_any_text(text: str) -> None:
    assert secureboot.parse_sb_state(text) in (True, False, None)
    assert mok.parse_test_key(text) in (True, False, None)
    assert all(len(f) == 59 for f in mok.parse_fingerprints(text))


def test_mokutil_output_formats() -> None:
    # strings of mokutil 0.6.0 (Debian bookworm): test_key() prints "%s is already enrolled" / "%s is not enrolled"
    assert secureboot.parse_sb_state("SecureBoot enabled\n") is True
    assert secureboot.parse_sb_state("SecureBoot disabled\nPlatform is in Setup Mode\n") is False
    assert secureboot.parse_sb_state("EFI variables are not supported on this system\n") is None
    assert mok.parse_test_key("/var/lib/fwman/signing/mok.der is already enrolled\n") is True
    assert mok.parse_test_key("/var/lib/fwman/signing/mok.der is not enrolled\n") is False
    fp = mok.cert_fingerprint(b"certificate bytes")
    listing = f"[key 1]\nSHA1 Fingerprint: {fp}\nCertificate:\n    Data:\n"
    assert mok.parse_fingerprints(listing) == [fp]
    assert mok.parse_fingerprints("MokNew is empty\n") == []


def test_load_verdict_counts_only_what_the_kernel_will_reject() -> None:
    on = secureboot.SecureBootState(True, "efivars", cert="/c.der", key_state="enrolled")
    assert secureboot.module_load_verdict(on, "sha256") is None
    assert "unsigned" in (secureboot.module_load_verdict(on, None) or "")
    on.key_state = "pending"
    assert "only pending enrollment" in (secureboot.module_load_verdict(on, "sha256") or "")
    on.key_state = "not-enrolled"
    assert "mokutil --import /c.der" in (secureboot.module_load_verdict(on, "sha256") or "")
    off = secureboot.SecureBootState(False, "efivars", key_state="not-enrolled")
    assert secureboot.module_load_verdict(off, None) is None
    off.sig_enforce = True
    assert secureboot.module_load_verdict(off, None) is not None


def test_read_state_from_the_efi_variable_in_a_temp_root(tmp_path: Path) -> None:
    var = tmp_path / "sys/firmware/efi/efivars" / f"SecureBoot-{secureboot.EFI_GLOBAL_GUID}"
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x06\x00\x00\x00\x01")
    state = secureboot.read_state(LiveHost(str(tmp_path), env={"PATH": "/nonexistent"}))
    assert (state.enabled, state.source, state.key_state) == (True, "efivars", "none")
    (tmp_path / "sys/firmware/efi").rename(tmp_path / "sys/firmware/gone")
    state = secureboot.read_state(LiveHost(str(tmp_path), env={"PATH": "/nonexistent"}))
    assert (state.enabled, state.source) == (False, "bios")


# -- user-space hold ---------------------------------------------------------------------------------------
def test_which_packages_move_with_the_driver() -> None:
    held = [
        "libnvidia-ml1",
        "libcuda1:amd64",
        "nvidia-smi",
        "libnvidia-gl-570",
        "firmware-nvidia-gsp",
        "nvidia-persistenced",
    ]
    not_held = [
        "nvidia-kernel-dkms",
        "nvidia-container-toolkit",
        "libnvidia-container1",
        "nvidia-open-dkms",
        "linux-image-amd64",
        "nvtop",
    ]
    assert all(is_userspace_package(p) for p in held)
    assert not any(is_userspace_package(p) for p in not_held)


def test_dpkg_and_apt_simulation_parsers() -> None:
    text = "libnvidia-ml1\t570.86.16-1\tinstalled\nnvidia-smi\t570.86.16-1\tconfig-files\nbroken line\n"
    assert parse_dpkg_query(text) == {"libnvidia-ml1": "570.86.16-1"}
    sim = (
        "Reading package lists...\n"
        "Inst libnvidia-ml1 [570.86.16-1] (575.57.08-1 local:stable [amd64])\n"
        "Inst newpkg (1.0 local:stable [amd64])\n"
        "Conf libnvidia-ml1 (575.57.08-1 local:stable [amd64])\n"
    )
    assert parse_simulated_upgrade(sim) == {"libnvidia-ml1": ("570.86.16-1", "575.57.08-1")}


@given(st.text(max_size=400))
def test_hold_parsers_any_text(text: str) -> None:
    assert isinstance(parse_dpkg_query(text), dict)
    assert isinstance(parse_simulated_upgrade(text), dict)


def test_pin_and_blacklist_files() -> None:
    pkgs = {"libnvidia-ml1": "570.86.16-1", "libcuda1": "570.86.16-1"}
    pin = render_pin(pkgs).decode()
    assert "Package: libcuda1\nPin: version 570.86.16-1\nPin-Priority: 1001\n" in pin
    black = render_blacklist(pkgs).decode()
    assert '    "^libnvidia\\-ml1$";' in black and black.rstrip().endswith("};")


# -- headers, lockstep -------------------------------------------------------------------------------------
def test_headers_package_per_kernel_and_distribution() -> None:
    pve8, pve7 = (
        Distribution("debian", "12", "bookworm", proxmox=True),
        Distribution("debian", "11", "bullseye", proxmox=True),
    )
    debian = Distribution("debian", "12", "bookworm")
    assert advise("6.8.12-4-pve", pve8).package == "proxmox-headers-6.8.12-4-pve"
    assert advise("6.8.12-4-pve", pve8).metapackage == "proxmox-default-headers"
    assert advise("5.15.158-2-pve", pve7).package == "pve-headers-5.15.158-2-pve"
    assert advise("5.15.158-2-pve", pve7).metapackage == "pve-headers"
    assert advise(KVER, debian).package == f"linux-headers-{KVER}"
    assert advise(KVER, debian).metapackage == "linux-headers-amd64"
    assert advise("6.1.0-50-cloud-amd64", debian).metapackage == "linux-headers-cloud-amd64"
    assert parse_os_release('ID=debian\nVERSION_CODENAME="bookworm"\n# c\njunk\n')["VERSION_CODENAME"] == "bookworm"


def test_lockstep_names_both_versions_and_nvml() -> None:
    verdict = lockstep.check("575.57.08", {"host": ["570.86.16"], "container 101": ["575.57.08"]})
    with pytest.raises(BlockedError) as e:
        lockstep.refuse_unless_forced(verdict, force=False)
    assert "575.57.08" in e.value.message and "host has 570.86.16" in e.value.message
    assert "Driver/library version mismatch" in e.value.message and "101" not in e.value.message
    assert (lockstep.refuse_unless_forced(verdict, force=True) or "").startswith("WARNING (--force)")
    assert lockstep.check("570.86.16", {"host": ["570.86.16"], "container 9": []}).message() is None


def test_lockstep_gathers_the_host_and_each_gpu_container(tmp_path: Path) -> None:
    # the readers fwman audit uses: the host's libraries, and an LXC container's root filesystem (a GPU
    # container whose rootfs is mounted); a container without a GPU is not asked
    for rel in ("usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16", "var/lib/lxc/101/rootfs/usr/lib/libcuda.so.575.57.08"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    (tmp_path / "var/lib/lxc/102/rootfs/usr/lib").mkdir(parents=True)
    (tmp_path / "var/lib/lxc/102/rootfs/usr/lib/libcuda.so.550.1.1").write_bytes(b"")
    (tmp_path / "etc/pve/lxc").mkdir(parents=True)
    (tmp_path / "etc/pve/lxc/101.conf").write_text("lxc.cgroup2.devices.allow: c 195:* rwm\n")
    (tmp_path / "etc/pve/lxc/102.conf").write_text("memory: 512\n")
    verdict = lockstep.gather(LiveHost(str(tmp_path)), "570.86.16")
    assert verdict.found == {"host": ["570.86.16"], "container 101": ["575.57.08"]}
    assert verdict.mismatches == {"container 101": ["575.57.08"]}
    assert verdict.unreadable == []


# -- kernel removal ----------------------------------------------------------------------------------------
def test_forget_kernel_drops_state_and_never_raises(tmp_path: Path) -> None:
    ko = build_module(nvidia_tags("570.86.16", KVER))
    _manifest(tmp_path, ko)
    state = tmp_path / "var/lib/fwman/modules"
    (state / f"{KVER}.failed").write_text("{}")
    (state / f"{KVER}.d").mkdir()
    (state / f"{KVER}.d/nvidia.ko").write_bytes(ko)
    installed = tmp_path / f"lib/modules/{KVER}/updates/fwman"
    installed.mkdir(parents=True)
    (installed / "nvidia.ko").write_bytes(ko)
    (tmp_path / "lib/modules/6.1.0-53-amd64").mkdir(parents=True)
    lines: list[str] = []
    summary = forget_kernel(LiveHost(str(tmp_path), env={"PATH": "/usr/bin:/bin"}), KVER, lines.append)
    assert not (state / f"{KVER}.json").exists() and not (state / f"{KVER}.failed").exists()
    assert not (state / f"{KVER}.d").exists() and not (tmp_path / f"lib/modules/{KVER}").exists()
    assert any("dropped" in line for line in lines)
    assert summary.problems and "no working patched modules" in summary.problems[0]  # 6.1.0-53 has none: loud
    assert json.loads(json.dumps(summary.removed))
    assert forget_kernel(LiveHost(str(tmp_path)), "../etc").problems == ["not a kernel release: '../etc'"]


# -- the removal hook and the kernel-install plugin never fail what they hook into ------------------------
@pytest.mark.parametrize(
    ("template", "argv", "body", "rc", "said"),
    [
        ("kernel-postrm", ["6.1.0-53-amd64", "/boot/vmlinuz"], "exit 1", 0, "the removal goes on"),
        (
            "kernel-postrm",
            ["6.1.0-53-amd64"],
            'echo "args: $*" >&2',
            0,
            "modules forget --kernel 6.1.0-53-amd64 --origin postrm",
        ),
        (
            "kernel-install-plugin",
            ["add", "6.1.0-53-amd64", "/e", "/k"],
            'echo "args: $*" >&2',
            0,
            "modules hook --kernel 6.1.0-53-amd64 --origin kernel-install",
        ),
        ("kernel-install-plugin", ["add", "6.1.0-53-amd64", "/e", "/k"], "exit 3", 1, ""),
        ("kernel-install-plugin", ["add", "6.1.0-53-amd64", "/e", "/k"], "exit 5", 0, "kernel-install goes on"),
        ("kernel-install-plugin", ["remove", "6.1.0-53-amd64", "/e"], "exit 1", 0, "kernel-install goes on"),
        ("kernel-install-plugin", ["inspect", "6.1.0-53-amd64"], "exit 1", 0, ""),
    ],
)
def test_removal_and_plugin_templates(
    tmp_path: Path, template: str, argv: list[str], body: str, rc: int, said: str
) -> None:
    import subprocess

    from fwman.driver.hooks.files import templates_dir

    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{body}\n")
    python.chmod(0o755)
    script = tmp_path / template
    script.write_text((templates_dir() / template).read_text().replace("@PYTHON@", str(python)))
    script.chmod(0o755)
    proc = subprocess.run([str(script), *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert (proc.returncode, proc.stdout) == (rc, "")
    assert said in proc.stderr


@pytest.mark.parametrize(
    ("params", "forgets"),
    [
        ("remove", True),
        ("purge", False),  # apt purge: "remove" ran first and left nothing (the next test)
        ("upgrade 6.1.0-53-amd64-1", False),  # the old package's postrm during an upgrade of the same ABI
        ("failed-upgrade 6.1.0-53-amd64-2", False),
        ("abort-install", False),
        (None, True),  # no DEB_MAINT_PARAMS: kernel-install or a manual run-parts says it is removed
    ],
)
def test_postrm_hook_forgets_only_a_removed_kernel(tmp_path: Path, params: str | None, forgets: bool) -> None:
    """Debian runs postrm.d on upgrades and reinstalls too: a kernel that stays keeps its modules."""
    import os
    import subprocess

    from fwman.driver.hooks.files import templates_dir

    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "args: $*" >&2\n')
    python.chmod(0o755)
    script = tmp_path / "kernel-postrm"
    script.write_text((templates_dir() / "kernel-postrm").read_text().replace("@PYTHON@", str(python)))
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DEB_MAINT_PARAMS"}
    env["FWMAN_ROOT"] = str(tmp_path / "root")  # an empty root: fwman holds nothing for the kernel
    if params is not None:
        env["DEB_MAINT_PARAMS"] = params
    proc = subprocess.run(
        [str(script), "6.1.0-53-amd64", "/boot/vmlinuz-6.1.0-53-amd64"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    assert ("modules forget --kernel 6.1.0-53-amd64" in proc.stderr) is forgets, proc.stderr
    if not forgets and params != "purge":
        assert "its patched modules stay" in proc.stderr
    if params == "purge":
        assert proc.stderr == ""  # nothing left to do, nothing said: its "remove" spoke


def test_apt_purge_runs_the_removal_once(tmp_path: Path) -> None:
    """dpkg runs a kernel's postrm with "remove" and then "purge": fwman forgets the kernel once; a purge of a
    kernel fwman still holds state for (removed before the hook was there) forgets it then."""
    import os
    import subprocess

    from fwman.driver.hooks.files import templates_dir

    root = tmp_path / "root"
    state = root / "var/lib/fwman/modules"
    state.mkdir(parents=True)
    log = tmp_path / "forgets"
    python = tmp_path / "python"
    # the stand-in fwman forgets as the real one does: the kernel's manifest goes
    python.write_text(f'#!/bin/sh\necho "$*" >> {log}\nrm -f {state}/6.1.0-53-amd64.json\n')
    python.chmod(0o755)
    script = tmp_path / "kernel-postrm"
    script.write_text((templates_dir() / "kernel-postrm").read_text().replace("@PYTHON@", str(python)))
    script.chmod(0o755)

    def postrm(action: str) -> None:
        env = {**os.environ, "FWMAN_ROOT": str(root), "DEB_MAINT_PARAMS": action}
        proc = subprocess.run([str(script), "6.1.0-53-amd64", "/boot/vmlinuz-6.1.0-53-amd64"], env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert (proc.returncode, proc.stdout) == (0, "")

    (state / "6.1.0-53-amd64.json").write_text("{}")
    postrm("remove")
    postrm("purge")
    assert log.read_text().count("modules forget --kernel 6.1.0-53-amd64") == 1
    (state / "6.1.0-53-amd64.json").write_text("{}")  # a kernel removed while the hook was not there
    postrm("purge")
    assert log.read_text().count("modules forget --kernel 6.1.0-53-amd64") == 2


def _stand_in_generator(tmp_path: Path, root: Path, image: bytes, rc: int = 0) -> Path:
    """A stand-in ``update-initramfs -u -k KVER`` for the root's machine: logs its arguments, then writes
    ``image`` as ROOT/boot/initrd.img-KVER (or fails with ``rc``)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "new-image").write_bytes(image)
    script = f'#!/bin/sh\necho "$@" >> {tmp_path / "argv"}\n'
    script += f"echo 'update-initramfs: no space left' >&2\nexit {rc}\n" if rc else ""
    script += f'cp {tmp_path / "new-image"} {root}/boot/initrd.img-"$3"\n'
    (bindir / "update-initramfs").write_text(script)
    (bindir / "update-initramfs").chmod(0o755)
    return bindir


@pytest.mark.parametrize("generator_rc", [0, 1])
def test_refresh_initramfs_regenerates_a_stale_image_once_and_never_raises(tmp_path: Path, generator_rc: int) -> None:
    # the one refresh every build path runs (modules build, the kernel hook, the catch-up)
    patched = build_module(nvidia_tags("570.86.16", KVER, srcversion="PATCHEDPATCHEDPATCHED00"))
    stock = build_module(nvidia_tags("570.86.16", KVER))
    root = tmp_path / "root"
    _manifest(root, patched)
    (root / "boot").mkdir()
    image = root / f"boot/initrd.img-{KVER}"
    image.write_bytes(gzip.compress(newc([(f"usr/lib/modules/{KVER}/updates/dkms/nvidia.ko", stock)])))
    fresh = gzip.compress(newc([(f"usr/lib/modules/{KVER}/updates/fwman/nvidia.ko", patched)]))
    bindir = _stand_in_generator(tmp_path, root, fresh, generator_rc)
    host = LiveHost(str(root), env={"PATH": f"{bindir}:/usr/bin:/bin"}, machine_tools=[str(bindir)])
    lines: list[str] = []
    state = initramfs.refresh_initramfs(host, KVER, lines.append)
    assert (tmp_path / "argv").read_text() == f"-u -k {KVER}\n"
    if generator_rc:
        assert state.problem == "initramfs has stock nvidia.ko 570.86.16: the patch is lost at boot"
        assert (
            lines[-1]
            == f"WARNING: {KVER}: update-initramfs -u -k {KVER} failed (exit 1): update-initramfs: no space left"
        )
        return
    assert state.problem is None and state.summary() == "carries fwman's 1 modules"
    assert lines[-1] == f"{KVER}: initramfs regenerated; it now carries fwman's modules"
    again: list[str] = []
    assert initramfs.refresh_initramfs(host, KVER, again.append).problem is None
    assert again == [] and (tmp_path / "argv").read_text().count("\n") == 1  # current: the generator is not run
