"""`fwman hooks install/remove/status` on temp roots, and the shell hook's promise never to fail an install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwman.driver import hooks
from fwman.host.live import LiveHost
from tests.helpers import FwmanEnv


def test_install_is_idempotent_and_remove_undoes_it(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    done = hooks.install(host)
    assert len(done) == 4
    hook = tmp_path / "etc/kernel/postinst.d/fwman"
    text = hook.read_text()
    assert f'FWMAN_PYTHON="{os.path.abspath(sys.executable)}"' in text and "@PYTHON@" not in text
    assert os.access(hook, os.X_OK)
    unit = (tmp_path / "etc/systemd/system/fwman-catchup.service").read_text()
    assert f"ExecStart={os.path.abspath(sys.executable)} -m fwman modules catchup" in unit
    assert "Before=nvidia-persistenced.service display-manager.service" in unit and "After=" in unit
    assert hooks.install(host) == []  # nothing left to do
    st = hooks.status(host)
    assert st.installed and st.enabled
    hook.write_text(text + "# local edit\n")
    st = hooks.status(host)
    assert not st.installed and st.files[0].note == "differs from this fwman's version"
    assert hooks.install(host) == [f"write {hooks.POSTINST} ({len(text)} bytes, mode 755)"]
    assert len(hooks.remove(host)) == 4
    assert not hook.exists() and not (tmp_path / "etc/systemd/system/fwman-catchup.service").exists()
    assert hooks.remove(host) == []


def test_cli_dry_run_and_status(tmp_path: Path) -> None:
    run = FwmanEnv()
    dry = run("hooks", "install", "--dry-run", "--root", str(tmp_path))
    assert dry.code == 0 and "would write /etc/kernel/postinst.d/fwman" in dry.stdout
    assert not (tmp_path / "etc").exists()
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.hooks-status/1" and doc["installed"] is False
    assert run("hooks", "install", "--root", str(tmp_path)).code == 0
    assert run("hooks", "status", "--json", "--root", str(tmp_path)).json()["installed"] is True


def _hook_with(tmp_path: Path, python_body: str | None) -> Path:
    """Return the installed hook text with a stand-in interpreter whose behaviour is ``python_body``."""
    host = LiveHost(str(tmp_path))
    python = tmp_path / "python"
    if python_body is not None:
        python.write_text(f"#!/bin/sh\n{python_body}\n")
        python.chmod(0o755)
    hooks.apply_all(host, hooks.install_actions(str(python)))
    return tmp_path / "etc/kernel/postinst.d/fwman"


@pytest.mark.parametrize(
    ("body", "rc", "said"),
    [
        (None, 0, "is gone (fwman uninstalled?)"),
        ('echo "args: $*" >&2; exit 0', 0, "args: -m fwman modules hook --kernel 6.1.0-53-amd64 --from postinst"),
        ("exit 1", 0, "unexpected exit status 1"),
        ("exit 3", 3, ""),
    ],
)
def test_shell_hook_exit_status(tmp_path: Path, body: str | None, rc: int, said: str) -> None:
    hook = _hook_with(tmp_path, body)
    proc = subprocess.run([str(hook), "6.1.0-53-amd64", "/boot/vmlinuz-6.1.0-53-amd64"], capture_output=True, text=True)
    assert proc.returncode == rc
    assert proc.stdout == ""  # everything goes to stderr
    assert said in proc.stderr


def test_shell_hook_without_a_kernel(tmp_path: Path) -> None:
    hook = _hook_with(tmp_path, "exit 1")
    proc = subprocess.run([str(hook)], capture_output=True, text=True)
    assert proc.returncode == 0 and "without a kernel version" in proc.stderr
