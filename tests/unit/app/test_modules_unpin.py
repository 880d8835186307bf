"""`fwman modules unpin --dry-run/--json`: the inverse of the boot pin says what it would undo, changes nothing in
a dry run, and reports ``changed`` and the kernel that boots next."""

from __future__ import annotations

from pathlib import Path

from fwman.core import paths
from fwman.driver.boot import pin as boot
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv

OLD, NEW = "6.1.0-50-amd64", "6.1.0-53-amd64"


def _pinned(tmp_path: Path) -> tuple[Path, str]:
    """Return a root booting systemd-boot, pinned by fwman from NEW to OLD, and its loader.conf before the pin."""
    loader = tmp_path / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    original = "timeout 3\ndefault abc-*\n"
    (loader / "loader.conf").write_text(original)
    boot.pin(LiveHost(str(tmp_path)), OLD, NEW, "test")
    return loader / "loader.conf", original


def test_dry_run_names_the_pin_and_changes_nothing(tmp_path: Path) -> None:
    conf, _ = _pinned(tmp_path)
    pinned = conf.read_text()
    run = FwmanEnv()
    r = run("--root", str(tmp_path), "modules", "unpin", "--dry-run")
    assert r.code == 0, r.stderr
    assert r.stdout == f"would undo the boot pin to {OLD} (systemd-boot), restoring the previous default\n"
    doc = run("--root", str(tmp_path), "modules", "unpin", "--dry-run", "--json").json()
    assert doc["schema"] == "fwman.modules-unpin/1" and doc["dry_run"] is True and doc["changed"] is False
    assert doc["pin"]["kernel"] == OLD and doc["pin"]["avoided"] == NEW and doc["pin"]["method"] == "systemd-boot"
    assert conf.read_text() == pinned and (tmp_path / paths.BOOT_PIN_STATE.lstrip("/")).is_file()


def test_json_says_what_was_undone_then_nothing(tmp_path: Path) -> None:
    conf, original = _pinned(tmp_path)
    run = FwmanEnv()
    r = run("--root", str(tmp_path), "modules", "unpin", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["changed"] is True and doc["pin"]["kernel"] == OLD
    assert doc["next_boot"]["kernel"] == NEW and doc["next_boot"]["safe"] is False  # no modules built for it
    assert conf.read_text() == original
    again = run("--root", str(tmp_path), "modules", "unpin", "--json").json()
    assert again == {"schema": "fwman.modules-unpin/1", "dry_run": False, "changed": False, "pin": None,
                     "next_boot": None}  # fmt: skip
    assert run("--root", str(tmp_path), "modules", "unpin", "--dry-run").stdout == "fwman has no boot pin in place\n"
