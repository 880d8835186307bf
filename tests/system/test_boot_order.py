"""Issue 23 row 4: whatever order dpkg configures image, headers and the boot loader's hook in, a kernel whose
modules failed is never the next boot when the packages are configured.

A temp root with two real Debian kernels (the stand-in fork builds for 6.1.0-50, fails for 6.1.0-53), fwman's
hooks installed by `fwman hooks install`, and the neighbours a Debian system has in /etc/kernel, under their real
names: `dkms` and `initramfs-tools` (recording stand-ins) and the real `zz-update-grub` of grub2-common, its one
absolute path mapped under the root. Its `update-grub` is a stand-in that writes the root's grub.cfg from the
root's /boot/vmlinuz-* (the real one probes this machine's disks), and `systemd-detect-virt` says "no
container" (the real zz-update-grub exits early in one). The real run-parts runs the directories the way the
kernel packages do (the image's postinst: `--arg=KVER --arg=IMAGE` with DEB_MAINT_PARAMS; the headers' postinst:
`--arg=KVER`). grubenv is read with the real grub-editenv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.boot import UUID, update_grub
from tests.support.env import FwmanEnv
from tests.support.modules import (
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    add_kernel,
    build_root,
    give_headers,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)
from tests.support.tools import require_tools

pytestmark = pytest.mark.system

REAL_ZZ_UPDATE_GRUB = Path("/etc/kernel/postinst.d/zz-update-grub")
REPO = Path(__file__).resolve().parents[2]
OK_ENTRY = f"gnulinux-advanced-{UUID}>gnulinux-{KERNEL_OK}-advanced-{UUID}"


def _grubenv(root: Path) -> dict[str, str]:
    out = subprocess.run(
        ["grub-editenv", str(root / "boot/grub/grubenv"), "list"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _stand_ins(tmp: Path, log: Path) -> Path:
    """Return a PATH directory: update-grub (writes the root's menu), systemd-detect-virt ("none"), logger."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    scripts = {
        "update-grub": (
            f'#!/bin/sh\necho update-grub >> {log}\necho "Generating grub configuration file ..." >&2\n'
            f"PYTHONPATH={REPO} exec {sys.executable} -c "
            '"import sys; from tests.support.boot import update_grub; update_grub(sys.argv[1])" "$FWMAN_ROOT"\n'
        ),
        "systemd-detect-virt": '#!/bin/sh\n[ "$1" = --quiet ] || echo none\nexit 1\n',
        "logger": "#!/bin/sh\nexit 0\n",
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _neighbours(root: Path, log: Path) -> None:
    """Put Debian's other kernel hooks into ``root`` under their real names (real zz-update-grub, mapped)."""
    real = REAL_ZZ_UPDATE_GRUB.read_text()
    assert "/boot/grub/grub.cfg" in real and "DEB_MAINT_PARAMS" in real  # the script this test is about
    mapped = real.replace("/boot/grub/grub.cfg", '"$FWMAN_ROOT"/boot/grub/grub.cfg')
    for directory, names in (("postinst.d", ("dkms", "initramfs-tools")), ("postrm.d", ("initramfs-tools",))):
        hooks = root / "etc/kernel" / directory
        hooks.mkdir(parents=True, exist_ok=True)
        for name in names:
            (hooks / name).write_text(f"#!/bin/sh\necho {directory}/{name} >> {log}\n")
            (hooks / name).chmod(0o755)
        (hooks / "zz-update-grub").write_text(mapped)
        (hooks / "zz-update-grub").chmod(0o755)
    (root / "etc/kernel/header_postinst.d").mkdir(parents=True, exist_ok=True)


def _run_parts(root: Path, bin_dir: Path, directory: str, *args: str, params: str | None = None) -> str:
    env = {**os.environ, "FWMAN_ROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("DEB_MAINT_PARAMS", None)
    if params is not None:
        env["DEB_MAINT_PARAMS"] = params
    proc = subprocess.run(
        ["run-parts", "--report", "--exit-on-error", *(f"--arg={a}" for a in args), str(root / directory)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _system(tmp: Path, cache: Path, grub_default: str = "saved") -> tuple[Path, Path, Path, FwmanEnv]:
    """Return (root, PATH dir, order log, env): 6.1.0-50 built and booted, fwman's hooks installed."""
    require_build_env(KERNEL_OK, KERNEL_BAD)
    require_tools("run-parts", "grub-editenv", "grub-set-default", "grub-reboot")
    log = tmp / "order.log"
    bin_dir = _stand_ins(tmp, log)
    env = FwmanEnv(path_prepend=[bin_dir])
    root = build_root(tmp, (KERNEL_OK,), cache)
    (root / "etc/apt/sources.list.d").mkdir(parents=True)  # apt: its boot check is installed
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text(f"GRUB_DEFAULT={grub_default}\n")
    (root / "etc/fwman").mkdir(parents=True, exist_ok=True)
    (root / "etc/fwman/config.toml").write_text(f'[modules]\nsource = "{SOURCE}"\n')
    (root / "boot").mkdir()
    (root / f"boot/vmlinuz-{KERNEL_OK}").write_text("kernel image\n")
    update_grub(str(root))
    subprocess.run(["grub-editenv", str(root / "boot/grub/grubenv"), "create"], check=True)
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, env=env)
    assert code == 0, out + err
    assert run_fwman(root, "hooks", "install", env=env)[0] == 0
    _neighbours(root, log)
    return root, bin_dir, log, env


def _unpack(root: Path, kver: str, headers: bool = True) -> None:
    """What dpkg's unpack leaves before any postinst: the image's files, and the headers' files if ``headers``."""
    add_kernel(root, kver, headers=headers)
    (root / f"boot/vmlinuz-{kver}").write_text("kernel image\n")


def _safe_next_boot(root: Path, env: FwmanEnv) -> None:
    code, out, err = run_fwman(root, "modules", "check-boot", "--json", env=env)
    doc = json.loads(out)
    assert code == 0 and doc["kernel"] == KERNEL_OK and doc["safe"] is True, out + err
    pin = json.loads((root / "var/lib/fwman/boot-pin.json").read_text())
    assert (pin["kernel"], pin["avoided"]) == (KERNEL_OK, KERNEL_BAD)


def test_run_parts_puts_the_final_check_after_every_boot_loader_hook(tmp_path: Path) -> None:
    """run-parts' order (C-locale bytes) of the real names, whatever the caller's locale."""
    require_tools("run-parts")
    directory = tmp_path / "postinst.d"
    directory.mkdir()
    names = ["dkms", "fwman", "initramfs-tools", "zz-proxmox-boot", "zz-systemd-boot", "zz-update-grub", "zzz-fwman"]
    for name in names:
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    for locale in ("C", "C.UTF-8"):
        proc = subprocess.run(
            ["run-parts", "--test", str(directory)],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": locale},
            check=True,
        )
        assert [Path(p).name for p in proc.stdout.split()] == names
    # kernel-install 252 orders plugins with `sort -Vu` under LC_COLLATE=C (/usr/bin/kernel-install)
    plugins = "\n".join(["99-zz-fwman.install", "90-loaderentry.install", "50-fwman.install", "85-initrd.install"])
    proc = subprocess.run(
        ["sort", "-Vu"], input=plugins, capture_output=True, text=True, env={**os.environ, "LC_COLLATE": "C"}
    )
    assert proc.stdout.split() == [
        "50-fwman.install",
        "85-initrd.install",
        "90-loaderentry.install",
        "99-zz-fwman.install",
    ]


def test_headers_then_image_grub_saved(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """The order that left the failed kernel as the next boot: the headers' hook runs before the menu lists it."""
    root, bin_dir, log, env = _system(tmp_path, object_cache)
    _unpack(root, KERNEL_BAD)

    said = _run_parts(root, bin_dir, "etc/kernel/header_postinst.d", KERNEL_BAD)
    assert "too few arguments to function" in said
    # judged on the menu as it is: it does not list 6.1.0-53 yet, so nothing needs pinning so far
    assert not (root / "var/lib/fwman/boot-pin.json").exists()

    said = _run_parts(
        root, bin_dir, "etc/kernel/postinst.d", KERNEL_BAD, f"/boot/vmlinuz-{KERNEL_BAD}", params="configure"
    )
    assert log.read_text().split() == ["postinst.d/dkms", "postinst.d/initramfs-tools", "update-grub"]
    assert f"boot default pinned to {KERNEL_OK} (grub-saved)" in said
    assert said.index("zz-update-grub") < said.index("zzz-fwman")  # run-parts --report names each part it runs
    assert _grubenv(root)["saved_entry"] == OK_ENTRY
    _safe_next_boot(root, env)
    # a kernel hook ran: apt's Post-Invoke hook checks once more, and consumes the marker
    assert (root / "var/lib/fwman/boot-check.pending").exists()
    code, out, err = run_fwman(root, "modules", "check-boot", "--pin", "--origin", "apt", env=env)
    assert code == 0 and f"next boot: {KERNEL_OK}" in out, out + err
    assert not (root / "var/lib/fwman/boot-check.pending").exists()

    # removing the failed kernel (dpkg removes its files, then runs postrm.d with "remove"): the pin goes, the
    # loader's own default is back, and the final check judges the menu zz-update-grub wrote without it
    # Debian 12's linux-image postrm runs postrm.d before it deletes modules.dep & co (that waits for purge):
    # /lib/modules/KVER is still there when the hooks run
    (root / f"boot/vmlinuz-{KERNEL_BAD}").unlink()
    for link in ("build", "source"):
        (root / f"lib/modules/{KERNEL_BAD}" / link).unlink()
    (root / f"lib/modules/{KERNEL_BAD}/modules.dep").write_text("")
    said = _run_parts(root, bin_dir, "etc/kernel/postrm.d", KERNEL_BAD, f"/boot/vmlinuz-{KERNEL_BAD}", params="remove")
    assert "boot pin to" in said and "released" in said
    assert KERNEL_BAD not in (root / "boot/grub/grub.cfg").read_text()
    assert "saved_entry" not in _grubenv(root)
    assert not (root / "var/lib/fwman/boot-pin.json").exists()
    code, out, _ = run_fwman(root, "modules", "check-boot", env=env)
    assert code == 0 and f"next boot: {KERNEL_OK}" in out


def test_image_then_headers_grub_next_entry(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """The image is configured before its headers are unpacked (pending), GRUB_DEFAULT=0 (a one-shot pin)."""
    root, bin_dir, _log, env = _system(tmp_path, object_cache, grub_default="0")
    _unpack(root, KERNEL_BAD, headers=False)
    said = _run_parts(
        root, bin_dir, "etc/kernel/postinst.d", KERNEL_BAD, f"/boot/vmlinuz-{KERNEL_BAD}", params="configure"
    )
    assert "marked pending" in said
    assert f"boot default pinned to {KERNEL_OK} (grub-next)" in said
    assert _grubenv(root)["next_entry"] == OK_ENTRY
    _safe_next_boot(root, env)

    give_headers(root, KERNEL_BAD)
    said = _run_parts(root, bin_dir, "etc/kernel/header_postinst.d", KERNEL_BAD)
    assert "too few arguments to function" in said
    assert _grubenv(root)["next_entry"] == OK_ENTRY
    _safe_next_boot(root, env)


def test_a_boot_loader_configured_after_the_kernel_is_caught_by_apts_hook(
    tmp_path: Path,
    object_cache: Path,  # noqa: F811
) -> None:
    """GRUB's menu appears only after the kernel's hooks ran (grub-pc configured later in the same apt run)."""
    root, bin_dir, _log, env = _system(tmp_path, object_cache)
    (root / "boot/grub/grub.cfg").unlink()
    (root / "boot/grub/grubenv").unlink()
    (root / "etc/kernel/postinst.d/zz-update-grub").unlink()  # grub-pc (its owner) is not configured yet
    _unpack(root, KERNEL_BAD)
    said = _run_parts(
        root, bin_dir, "etc/kernel/postinst.d", KERNEL_BAD, f"/boot/vmlinuz-{KERNEL_BAD}", params="configure"
    )
    assert "cannot pin a kernel" in said  # no boot loader yet: said, and the kernel install goes on
    # grub-pc's postinst: grub-install's environment block, then update-grub
    subprocess.run(["grub-editenv", str(root / "boot/grub/grubenv"), "create"], check=True)
    update_grub(str(root))
    assert run_fwman(root, "modules", "check-boot", env=env)[0] == 4  # the failed kernel would boot next
    # apt's DPkg::Post-Invoke line, as installed (its marker and interpreter checks are on the real root)
    conf = (root / "etc/apt/apt.conf.d/99fwman-boot-check").read_text()
    assert "modules check-boot --pin --origin apt" in conf and "/var/lib/fwman/boot-check.pending" in conf
    code, out, err = run_fwman(root, "modules", "check-boot", "--pin", "--origin", "apt", env=env)
    assert code == 0, out + err
    assert _grubenv(root)["saved_entry"] == OK_ENTRY
    _safe_next_boot(root, env)


def test_systemd_boot_kernel_install_order(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """kernel-install's plugins in its own order: the entry appears at 90-loaderentry, the check runs after it."""
    root, bin_dir, _log, env = _system(tmp_path, object_cache)
    for name in ("boot/grub/grub.cfg", "boot/grub/grubenv"):
        (root / name).unlink()
    loader = root / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    machine = "6f2c1d0e8a9b4c3d2e1f0a9b8c7d6e5f"
    (loader / "loader.conf").write_text(f"timeout 3\ndefault {machine}-*\n")

    def entry(kver: str) -> None:
        (loader / f"entries/{machine}-{kver}.conf").write_text(
            f"title Debian\nversion {kver}\nlinux /{machine}/{kver}/linux\n"
        )

    entry(KERNEL_OK)
    plugins = root / "usr/lib/kernel/install.d"
    plugins.mkdir(parents=True)
    for name in ("50-fwman.install", "99-zz-fwman.install"):
        shutil.copy(root / "etc/kernel/install.d" / name, plugins / name)
    stand_in = plugins / "90-loaderentry.install"
    stand_in.write_text(
        f'#!/bin/sh\n[ "$1" = add ] && printf "title Debian\\nversion %s\\nlinux /x\\n" "$2" '
        f'> "$FWMAN_ROOT/boot/efi/loader/entries/{machine}-$2.conf"\nexit 0\n'
    )
    stand_in.chmod(0o755)
    order = subprocess.run(
        ["sort", "-Vu"],
        input="\n".join(os.listdir(plugins)),
        capture_output=True,
        text=True,
        env={**os.environ, "LC_COLLATE": "C"},
        check=True,
    ).stdout.split()
    assert order == ["50-fwman.install", "90-loaderentry.install", "99-zz-fwman.install"]
    _unpack(root, KERNEL_BAD)
    said = ""
    for name in order:  # what kernel-install add runs, in its order
        proc = subprocess.run(
            [
                str(plugins / name),
                "add",
                KERNEL_BAD,
                f"/boot/efi/{machine}/{KERNEL_BAD}",
                f"/boot/vmlinuz-{KERNEL_BAD}",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "FWMAN_ROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"},
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr
        said += proc.stderr
    assert "too few arguments to function" in said
    assert f"boot default pinned to {KERNEL_OK} (systemd-boot)" in said
    assert f"default {machine}-{KERNEL_OK}.conf" in (loader / "loader.conf").read_text()
    _safe_next_boot(root, env)


def test_apt_reads_the_post_invoke_hook(tmp_path: Path) -> None:
    """The installed apt.conf.d file parses with the real apt-config and adds one DPkg::Post-Invoke command."""
    require_tools("apt-config")
    root = tmp_path / "root"
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    assert run_fwman(root, "hooks", "install")[0] == 0
    conf = root / "etc/apt/apt.conf.d/99fwman-boot-check"
    proc = subprocess.run(["apt-config", "-c", str(conf), "dump"], capture_output=True, text=True, check=True)
    ours = [line for line in proc.stdout.splitlines() if line.startswith("DPkg::Post-Invoke::") and "fwman" in line]
    python = sys.executable
    assert ours == [
        f'DPkg::Post-Invoke:: "if [ -e /var/lib/fwman/boot-check.pending ] && [ -x {python} ]; then {python} -m fwman '
        'modules check-boot --pin --origin apt </dev/null || true; fi";'
    ]
    # the command itself, run by sh as apt runs it: without the marker on this machine it does nothing, exit 0
    command = ours[0].split('"', 1)[1].rsplit('"', 1)[0]
    if not Path("/var/lib/fwman/boot-check.pending").exists():
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
