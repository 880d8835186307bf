"""`fwman hooks install/remove/status` on temp roots, and the shell hook's promise never to fail an install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwman.core import paths
from fwman.driver.hooks import files as hooks
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv


def test_install_is_idempotent_and_remove_undoes_it(tmp_path: Path) -> None:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)  # a host with apt: its boot check is installed too
    host = LiveHost(str(tmp_path))
    done = hooks.install(host)
    # postinst, header_postinst, postrm, kernel-install plugin, the three final boot checks, apt's, script,
    # unit, link
    assert len(done) == 11
    written = {line.split()[1] for line in done if line.startswith("write ")}
    for path in (paths.POSTINST_BOOT_CHECK, paths.POSTRM_BOOT_CHECK, paths.KERNEL_INSTALL_BOOT_CHECK):
        assert path in written and os.access(tmp_path / path[1:], os.X_OK)
        assert "modules check-boot --pin" in (tmp_path / path[1:]).read_text()
    apt_hook = (tmp_path / paths.APT_BOOT_CHECK[1:]).read_text()
    assert f"{os.path.abspath(sys.executable)} -m fwman modules check-boot --pin --origin apt" in apt_hook
    assert (tmp_path / paths.APT_BOOT_CHECK[1:]).stat().st_mode & 0o777 == 0o644
    hook = tmp_path / "etc/kernel/postinst.d/fwman"
    text = hook.read_text()
    assert f'FWMAN_PYTHON="{os.path.abspath(sys.executable)}"' in text and "@PYTHON@" not in text
    assert os.access(hook, os.X_OK)
    unit = (tmp_path / "etc/systemd/system/fwman-catchup.service").read_text()
    assert "ExecStart=/usr/local/lib/fwman/fwman-catchup\n" in unit
    script = (tmp_path / "usr/local/lib/fwman/fwman-catchup").read_text()
    assert f'PYTHON="{os.path.abspath(sys.executable)}"' in script and os.access(
        tmp_path / paths.CATCHUP_SCRIPT[1:], os.X_OK
    )
    assert "Before=nvidia-persistenced.service display-manager.service" in unit and "After=" in unit
    assert hooks.install(host) == []  # nothing left to do
    st = hooks.status(host)
    assert st.installed and st.enabled
    hook.write_text(text + "# local edit\n")
    st = hooks.status(host)
    assert not st.installed and st.files[0].note == "differs from this fwman's version"
    assert hooks.install(host) == [f"write {paths.POSTINST_HOOK} ({len(text)} bytes, mode 755)"]
    assert len(hooks.remove(host)) == 11
    assert not hook.exists() and not (tmp_path / "etc/systemd/system/fwman-catchup.service").exists()
    assert not (tmp_path / paths.APT_BOOT_CHECK[1:]).exists() and not (tmp_path / paths.POSTRM_BOOT_CHECK[1:]).exists()
    assert hooks.remove(host) == []


def test_cli_dry_run_and_status(tmp_path: Path) -> None:
    run = FwmanEnv()
    dry = run("hooks", "install", "--dry-run", "--root", str(tmp_path))
    assert dry.code == 0 and "would write /etc/kernel/postinst.d/fwman" in dry.stdout
    assert not (tmp_path / "etc").exists()
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.hooks-status/1" and doc["installed"] is False
    assert run("hooks", "install", "--root", str(tmp_path)).code == 0
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["installed"] is True
    listed = {f["path"] for f in doc["files"]}
    assert {paths.POSTINST_BOOT_CHECK, paths.POSTRM_BOOT_CHECK, paths.KERNEL_INSTALL_BOOT_CHECK} <= listed
    assert paths.APT_BOOT_CHECK in listed
    # run-parts order (C bytes): the final check after the boot loader's hook
    assert doc["order"]["/etc/kernel/postinst.d"] == ["fwman", "zzz-fwman"]
    (tmp_path / paths.POSTRM_BOOT_CHECK[1:]).unlink()
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["installed"] is False
    assert [f["note"] for f in doc["files"] if f["path"] == paths.POSTRM_BOOT_CHECK] == ["missing"]


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
        ('echo "args: $*" >&2; exit 0', 0, "args: -m fwman modules hook --kernel 6.1.0-53-amd64 --origin postinst"),
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


def _fast_path_root(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Return (root, installed catch-up script, file the stand-in interpreter writes when it is started)."""
    root = tmp_path / "root"
    for k in ("6.1.0-50-amd64", "6.1.0-53-amd64"):
        ko = root / "lib/modules" / k / "updates/fwman/nvidia.ko"
        ko.parent.mkdir(parents=True)
        ko.write_bytes(b"ko")
    started = tmp_path / "python-started"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$*" > {started}\n')
    python.chmod(0o755)
    hooks.apply_all(LiveHost(str(root)), hooks.install_actions(str(python)))
    return root, root / paths.CATCHUP_SCRIPT.lstrip("/"), started


def _stamp(root: Path) -> None:
    lines = ["fwman-catchup-stamp 1", "kernels 6.1.0-50-amd64 6.1.0-53-amd64"]
    lines += [f"file /lib/modules/{k}/updates/fwman/nvidia.ko" for k in ("6.1.0-50-amd64", "6.1.0-53-amd64")]
    path = root / paths.MODULES_STAMP.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _run(script: Path, root: Path) -> subprocess.CompletedProcess[str]:
    # the boot unit's environment is small: PATH and the root, never a developer's FWMAN_* variables
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FWMAN_ROOT": str(root)}
    return subprocess.run([str(script)], capture_output=True, text=True, env=env)


def test_boot_fast_path_starts_no_python_when_nothing_changed(tmp_path: Path) -> None:
    root, script, started = _fast_path_root(tmp_path)
    proc = _run(script, root)  # no stamp yet: the full catch-up runs
    assert proc.returncode == 0 and started.read_text().strip() == "-m fwman modules catchup"
    started.unlink()
    _stamp(root)
    proc = _run(script, root)
    assert proc.returncode == 0 and "nothing changed since the last full check" in proc.stdout
    assert not started.exists()


@pytest.mark.parametrize("change", ["new kernel", "module moved", "pin", "driver move committed"])
def test_boot_fast_path_runs_the_full_catchup_after_a_change(tmp_path: Path, change: str) -> None:
    root, script, started = _fast_path_root(tmp_path)
    _stamp(root)
    if change == "new kernel":
        (root / "lib/modules/6.1.0-54-amd64").mkdir()
    elif change == "module moved":
        (root / "lib/modules/6.1.0-53-amd64/updates/fwman/nvidia.ko").unlink()
    elif change == "pin":
        (root / "var/lib/fwman/boot-pin.json").write_text("{}")
    else:  # the full catch-up says whether the moved module is the one loaded (fwman.driver.move.record.boot_note)
        from fwman.driver.move.record import COMMITTED, RECORD, MoveRecord

        record = MoveRecord("565.77", "570.86.16", COMMITTED, ["6.1.0-50-amd64"])
        LiveHost(str(root)).write_bytes(RECORD, record.to_json())
    assert _run(script, root).returncode == 0
    assert started.exists()


def test_boot_fast_path_is_kept_after_a_finished_or_rolled_back_move(tmp_path: Path) -> None:
    from fwman.driver.move.record import FINISHED, RECORD, ROLLED_BACK, MoveRecord

    root, script, started = _fast_path_root(tmp_path)
    _stamp(root)
    for stage in (FINISHED, ROLLED_BACK):
        record = MoveRecord("565.77", "570.86.16", stage, ["6.1.0-50-amd64"])
        LiveHost(str(root)).write_bytes(RECORD, record.to_json())
        assert _run(script, root).returncode == 0 and not started.exists()


def test_catchup_writes_the_stamp_the_script_reads(tmp_path: Path) -> None:
    import hashlib

    from fwman.driver.build.manifest import Manifest, ModuleEntry, write_manifest
    from fwman.driver.hooks.run import catchup

    root, script, started = _fast_path_root(tmp_path)
    host = LiveHost(str(root))
    for k in ("6.1.0-50-amd64", "6.1.0-53-amd64"):
        path = f"/lib/modules/{k}/updates/fwman/nvidia.ko"
        entry = ModuleEntry(path, hashlib.sha256(b"ko").hexdigest(), 2)
        write_manifest(host, Manifest(k, None, None, "tree:x", {"nvidia": entry}, "2026-01-01T00:00:00+00:00"))
    assert catchup(host).fast_path
    assert _run(script, root).returncode == 0 and not started.exists()


def test_a_pending_kernel_without_headers_does_not_defeat_the_fast_paths(tmp_path: Path) -> None:
    import hashlib

    from fwman.driver.build.manifest import Manifest, ModuleEntry, write_manifest
    from fwman.driver.hooks.run import catchup

    root, script, started = _fast_path_root(tmp_path)
    host = LiveHost(str(root))
    path = "/lib/modules/6.1.0-50-amd64/updates/fwman/nvidia.ko"
    entry = ModuleEntry(path, hashlib.sha256(b"ko").hexdigest(), 2)
    write_manifest(host, Manifest("6.1.0-50-amd64", None, None, "x", {"nvidia": entry}, "2026-01-01T00:00:00+00:00"))
    (root / "lib/modules/6.1.0-50-amd64/build/include").mkdir(parents=True)
    (root / "lib/modules/6.1.0-50-amd64/modules.dep").write_text("updates/fwman/nvidia.ko:\n")
    # 6.1.0-53 has no headers and no manifest: the first catch-up marks it pending (and cannot pin anything)
    first = catchup(host)
    assert not first.fast_path and not first.repaired
    assert (root / "var/lib/fwman/modules/6.1.0-53-amd64.pending").exists()
    assert (root / "var/lib/fwman/modules/6.1.0-50-amd64.json").exists()
    assert catchup(host).fast_path  # pending without headers: nothing to do
    stamp = (root / "var/lib/fwman/modules/current.stamp").read_text().splitlines()
    assert "noheaders 6.1.0-53-amd64" in stamp and f"file {path}" in stamp
    assert _run(script, root).returncode == 0 and not started.exists()
    (root / "lib/modules/6.1.0-53-amd64/build/include").mkdir(parents=True)  # the headers arrive
    assert _run(script, root).returncode == 0 and started.exists()


def test_a_hook_that_lost_its_execute_bit_is_not_current_and_install_repairs_it(tmp_path: Path) -> None:
    """run-parts skips a non-executable hook: for status and install that is a difference like any other."""
    run = FwmanEnv()
    assert run("hooks", "install", "--root", str(tmp_path)).code == 0
    hook = tmp_path / "etc/kernel/postinst.d/fwman"
    hook.chmod(0o644)
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    row = next(f for f in doc["files"] if f["path"] == "/etc/kernel/postinst.d/fwman")
    assert doc["installed"] is False and row["current"] is False
    assert row["note"] == "mode 644, not 755 (run-parts skips it)"
    again = run("hooks", "install", "--root", str(tmp_path))
    assert again.code == 0 and "already installed" not in again.stdout
    assert hook.stat().st_mode & 0o777 == 0o755
    third = run("hooks", "install", "--root", str(tmp_path))
    assert "already installed and current" in third.stdout


def test_a_refused_write_names_the_host_path_and_is_not_called_a_bug(tmp_path: Path) -> None:
    (tmp_path / "usr/local/lib").mkdir(parents=True)
    (tmp_path / "usr/local/lib/fwman").write_text("a file where fwman's directory belongs\n")
    r = FwmanEnv()("hooks", "install", "--root", str(tmp_path))
    assert r.code == 1
    assert "cannot write /usr/local/lib/fwman/fwman-catchup" in r.stderr
    assert "unexpected" not in r.stderr and str(tmp_path) not in r.stderr
    assert "running the command again finishes what it started" in r.stderr


APT_SKIPPED = f"skipped {paths.APT_BOOT_CHECK}: apt is not on this host (no apt-get, no /etc/apt/sources.list(.d))"


def test_without_apt_its_boot_check_is_skipped_and_said(tmp_path: Path) -> None:
    run = FwmanEnv()
    dry = run("hooks", "install", "--dry-run", "--root", str(tmp_path))
    assert dry.code == 0 and APT_SKIPPED in dry.stdout.splitlines()
    assert f"would write {paths.APT_BOOT_CHECK}" not in dry.stdout
    done = run("hooks", "install", "--root", str(tmp_path))
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["installed", APT_SKIPPED]
    assert not (tmp_path / "etc/apt").exists()  # no /etc/apt made for an apt that is not there
    assert (tmp_path / paths.POSTINST_BOOT_CHECK[1:]).is_file()  # the kernel's own boot checks are
    doc = run("hooks", "install", "--json", "--root", str(tmp_path)).json()
    assert doc["changed"] is False and doc["skipped"] == [
        {"path": paths.APT_BOOT_CHECK, "reason": "apt is not on this host (no apt-get, no /etc/apt/sources.list(.d))"}
    ]
    # status: installed as far as this host goes, the apt file shown as skipped (not "missing")
    status = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert status["installed"] is True
    [apt] = [f for f in status["files"] if f["path"] == paths.APT_BOOT_CHECK]
    assert apt == {"path": paths.APT_BOOT_CHECK, "present": False, "current": True,
                   "note": "skipped: apt is not on this host (no apt-get, no /etc/apt/sources.list(.d))"}  # fmt: skip
    removed = run("hooks", "remove", "--json", "--root", str(tmp_path)).json()
    assert removed["changed"] is True and f"remove {paths.APT_BOOT_CHECK}" not in removed["actions"]
    assert not (tmp_path / "etc/apt").exists()


def test_apt_get_alone_is_apt_too(tmp_path: Path) -> None:
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / paths.APT_GET[1:]).write_text("#!/bin/sh\n")
    doc = FwmanEnv()("hooks", "install", "--json", "--root", str(tmp_path)).json()
    assert doc["skipped"] == [] and f"write {paths.APT_BOOT_CHECK}" in " ".join(doc["actions"])
    assert (tmp_path / paths.APT_BOOT_CHECK[1:]).is_file()
