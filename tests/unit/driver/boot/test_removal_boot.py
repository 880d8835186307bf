"""Removing a kernel keeps the next boot honest: the removed kernel is never the one avoided, and a pin that
avoided a kernel which is gone is released (on temp roots with the real GRUB tools)."""

from __future__ import annotations

from pathlib import Path

from fwman.driver.boot import pin as boot
from fwman.driver.hooks.removal import forget_kernel
from fwman.host.live import LiveHost
from tests.support.boot import install_safe_modules, write_grub
from tests.support.env import FwmanEnv

OLD, NEW, NEWER = "6.1.0-50-amd64", "6.1.0-53-amd64", "6.1.0-54-amd64"


def _remove(root: Path, kver: str) -> None:
    """What dpkg removes of a kernel package: its module directory (fwman's own files stay for forget)."""
    for path in sorted((root / "lib/modules" / kver).rglob("*"), reverse=True):
        if "updates" not in path.parts:
            path.unlink() if path.is_file() else path.rmdir() if not any(path.iterdir()) else None


def test_removing_the_newest_kernel_does_not_pin_away_from_it(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    for k in (OLD, NEW):
        install_safe_modules(host, tmp_path, k)
    write_grub(tmp_path, [NEW, OLD])
    assert boot.ensure_safe_boot(host).pinned is None  # both safe: nothing to do

    # apt remove linux-image-NEW: postrm.d/fwman runs before zz-update-grub, so grub.cfg still boots NEW
    _remove(tmp_path, NEW)
    summary = forget_kernel(host, NEW)
    assert summary.problems == [], summary.problems
    assert boot.read_pin(host) is None  # OLD is what GRUB will boot once update-grub ran, and it is safe
    assert isinstance(summary.boot, boot.BootCheck) and summary.boot.default.kver == OLD
    assert "being removed" in summary.boot.default.how


def test_a_pin_that_avoided_a_removed_kernel_is_released(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    install_safe_modules(host, tmp_path, OLD)
    (tmp_path / "lib/modules" / NEW).mkdir(parents=True)  # no patched modules: the next boot is not safe
    write_grub(tmp_path, [NEW, OLD])
    check = boot.ensure_safe_boot(host)
    assert check.pinned is not None and (check.pinned.kernel, check.pinned.avoided) == (OLD, NEW)

    # NEW goes (its modules never built), update-grub ran, and later NEWER arrives with working modules
    _remove(tmp_path, NEW)
    (tmp_path / "lib/modules" / NEW).rmdir()
    install_safe_modules(host, tmp_path, NEWER)
    write_grub(tmp_path, [NEWER, OLD])
    lines: list[str] = []
    check = boot.ensure_safe_boot(host, lines.append)
    assert check.released is not None and boot.read_pin(host) is None
    assert f"{NEW} is no longer installed: boot pin to {OLD} released" in lines
    assert check.default.kver == NEWER and check.safety is not None and check.safety.safe
    assert "saved_entry" not in (tmp_path / "boot/grub/grubenv").read_text()


def test_journal_only_on_the_real_root(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "logger.log"
    (bin_dir / "logger").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n')
    (bin_dir / "logger").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    boot._journal(LiveHost(str(tmp_path / "root"), env=env), "on a temp root", warning=True)
    assert not log.exists()
    boot._journal(LiveHost("/", env=env), "on the real root", warning=True)
    assert log.read_text() == "-t fwman -p user.warning on the real root\n"


def test_a_damaged_pin_record_is_an_error_and_changes_nothing(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    install_safe_modules(host, tmp_path, OLD)
    (tmp_path / "lib/modules" / NEW).mkdir(parents=True)
    write_grub(tmp_path, [NEW, OLD])
    assert boot.ensure_safe_boot(host).pinned is not None
    record = tmp_path / "var/lib/fwman/boot-pin.json"
    record.write_text('{"kernel": "6.1.0-50-amd64", "avoided": "6.1.0-53-amd64"')  # cut off mid-write
    grubenv = (tmp_path / "boot/grub/grubenv").read_bytes()
    install_safe_modules(host, tmp_path, NEW)  # the reason for the pin is gone, but what it replaced is unknown

    lines: list[str] = []
    check = boot.ensure_safe_boot(host, lines.append)
    assert check.problem is not None and "boot pin record" in check.problem and check.changed == []
    assert lines and lines[0].startswith("WARNING: boot pin record: /var/lib/fwman/boot-pin.json")
    assert (tmp_path / "boot/grub/grubenv").read_bytes() == grubenv  # the loader is left as it is

    run = FwmanEnv()
    for argv in (("modules", "unpin"), ("modules", "status")):
        result = run(*argv, "--root", str(tmp_path))
        assert result.code == 4, (argv, result.stdout, result.stderr)
        assert "boot-pin.json" in result.stderr and "repair or remove the file" in result.stderr
    assert (tmp_path / "boot/grub/grubenv").read_bytes() == grubenv
