"""The final boot check's shell template (hooks/kernel-bootcheck): which calls run `check-boot --pin`, with what.

The same file is installed as /etc/kernel/postinst.d/zzz-fwman, /etc/kernel/postrm.d/zzz-fwman and
kernel-install's 99-zz-fwman.install; it tells them apart by its own name. A stand-in interpreter records the
arguments; every path exits 0 (a kernel install or removal never fails over the check).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fwman.driver.hooks.files import templates_dir

K = "6.1.0-53-amd64"


def _run(tmp_path: Path, installed_as: str, argv: list[str], params: str | None, body: str) -> tuple[int, str, str]:
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "args: $*" >&2\n{body}\n')
    python.chmod(0o755)
    script = tmp_path / installed_as
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text((templates_dir() / "kernel-bootcheck").read_text().replace("@PYTHON@", str(python)))
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DEB_MAINT_PARAMS"}
    if params is not None:
        env["DEB_MAINT_PARAMS"] = params
    proc = subprocess.run([str(script), *argv], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    ("installed_as", "argv", "params", "called"),
    [
        ("postinst.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], "'configure' ''", "--pin --origin postinst"),
        ("postinst.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], None, "--pin --origin postinst"),
        ("postinst.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], "'abort-upgrade'", None),  # zz-update-grub did nothing
        ("postrm.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], "'remove'", f"--pin --origin postrm --removed {K}"),
        ("postrm.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], "'purge'", f"--pin --origin postrm --removed {K}"),
        ("postrm.d/zzz-fwman", [K, f"/boot/vmlinuz-{K}"], "'upgrade' '6.1.0-53'", None),  # the kernel stays
        ("install.d/99-zz-fwman.install", ["add", K, "/boot/efi/x", "/boot/vmlinuz"], None, "--origin kernel-install"),
        (
            "install.d/99-zz-fwman.install",
            ["remove", K, "/boot/efi/x"],
            None,
            f"--pin --origin kernel-install --removed {K}",
        ),
        ("install.d/99-zz-fwman.install", ["inspect", K], None, None),
    ],
)
def test_which_calls_check_the_boot(
    tmp_path: Path, installed_as: str, argv: list[str], params: str | None, called: str | None
) -> None:
    rc, out, err = _run(tmp_path, installed_as, argv, params, "exit 0")
    assert (rc, out) == (0, "")
    if called is None:
        assert "args:" not in err
    else:
        assert "args: -m fwman modules check-boot" in err and called in err


@pytest.mark.parametrize(("status", "said"), [(4, "has NO working patched modules"), (1, "the boot check exited 1")])
def test_a_failed_check_never_fails_the_kernel_package(tmp_path: Path, status: int, said: str) -> None:
    rc, out, err = _run(tmp_path, "postinst.d/zzz-fwman", [K, "/boot/vmlinuz"], "'configure'", f"exit {status}")
    assert (rc, out) == (0, "") and said in err


def test_fwman_gone_is_said_and_exits_0(tmp_path: Path) -> None:
    script = tmp_path / "zzz-fwman"
    script.write_text((templates_dir() / "kernel-bootcheck").read_text().replace("@PYTHON@", str(tmp_path / "none")))
    script.chmod(0o755)
    proc = subprocess.run([str(script), K], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "fwman uninstalled?" in proc.stderr
