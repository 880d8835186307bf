"""fwman's message of the day (/etc/motd.d/fwman) tells of an unsafe next boot only while it is one: once the
next boot is safe again without a pin to release, the boot check clears it (on temp roots, real GRUB tools)."""

from __future__ import annotations

from pathlib import Path

from fwman.driver.boot import pin as boot
from fwman.host.live import LiveHost
from tests.support.boot import install_safe_modules, write_grub
from tests.support.env import FwmanEnv

OLD, NEW = "6.1.0-50-amd64", "6.1.0-53-amd64"
PATH = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def _unpinnable(root: Path) -> LiveHost:
    """A root whose next boot (NEW) has no patched modules and whose menu has no entry for the safe OLD.

    The pin fails (nothing to pin to in grub.cfg), so the warning is written with no pin record: when NEW's
    modules come later, there is no pin to release, which is the case the release alone never cleaned up.
    """
    host = LiveHost(str(root), env=PATH)
    install_safe_modules(host, root, OLD)
    (root / "lib/modules" / NEW).mkdir(parents=True)
    write_grub(root, [NEW])
    check = boot.ensure_safe_boot(host)
    assert check.pinned is None and check.problem is not None and "no entry for" in check.problem
    motd = (root / "etc/motd.d/fwman").read_text()
    assert f"the next boot ({NEW}) has NO working patched NVIDIA modules" in motd
    return host


def test_the_warning_goes_once_the_next_boot_is_safe_without_a_pin(tmp_path: Path) -> None:
    host = _unpinnable(tmp_path)
    install_safe_modules(host, tmp_path, NEW)  # the modules get built for the default kernel later

    lines: list[str] = []
    check = boot.ensure_safe_boot(host, lines.append)
    assert check.safety is not None and check.safety.safe and check.problem is None
    assert not (tmp_path / "etc/motd.d/fwman").exists()
    said = f"remove the stale boot warning /etc/motd.d/fwman (the next boot, {NEW}, is safe)"
    assert check.changed == [said] and lines == [said]
    # a second run has nothing left to do and says so
    assert boot.ensure_safe_boot(host).changed == []


def test_check_boot_reports_the_cleared_warning_as_a_change(tmp_path: Path) -> None:
    host = _unpinnable(tmp_path)
    install_safe_modules(host, tmp_path, NEW)
    env = FwmanEnv(variables=PATH)
    result = env("modules", "check-boot", "--pin", "--json", "--root", str(tmp_path))
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["safe"] is True and doc["pinned"] is None
    assert doc["changed"] is True
    assert doc["actions"] == [f"remove the stale boot warning /etc/motd.d/fwman (the next boot, {NEW}, is safe)"]
    assert not (tmp_path / "etc/motd.d/fwman").exists()


def test_the_owners_text_and_other_motd_files_are_left_alone(tmp_path: Path) -> None:
    host = _unpinnable(tmp_path)
    install_safe_modules(host, tmp_path, NEW)
    motd = tmp_path / "etc/motd.d"
    (motd / "fwman").write_text("fwman: old warning\nremember: GPU 3 is on loan\n")  # the owner added a line
    (motd / "10-owner").write_text("fwman: not ours, despite the words\n")

    assert boot.ensure_safe_boot(host).changed == []
    assert (motd / "fwman").read_text() == "fwman: old warning\nremember: GPU 3 is on loan\n"
    (motd / "fwman").write_text("fwman: old warning\n")
    assert boot.ensure_safe_boot(host).changed != []
    assert not (motd / "fwman").exists() and (motd / "10-owner").read_text() == "fwman: not ours, despite the words\n"


def test_the_warning_stays_while_a_pin_is_in_place(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env=PATH)
    install_safe_modules(host, tmp_path, OLD)
    (tmp_path / "lib/modules" / NEW).mkdir(parents=True)
    write_grub(tmp_path, [NEW, OLD])
    assert boot.ensure_safe_boot(host).pinned is not None
    # the next boot is now OLD (safe), but only because of the pin: the warning tells the owner about it
    again = boot.ensure_safe_boot(host)
    assert again.changed == [] and again.default.kver == OLD
    assert "boot default pinned to" in (tmp_path / "etc/motd.d/fwman").read_text()
