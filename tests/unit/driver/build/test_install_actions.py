"""Host changes of the module lifecycle as actions: applying twice changes nothing and says so.

The module install (files, depmod override, the real depmod), the manifest, and the boot pin and its release.
"""

from __future__ import annotations

from pathlib import Path

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from fwman.core import paths
from fwman.driver.boot import pin as boot
from fwman.driver.boot.loaders import default_boot_kernel
from fwman.driver.build.install import check_installed, install_actions
from fwman.driver.build.manifest import Manifest, WriteManifest, load_manifest, write_manifest
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import apply_all, pending
from fwman.host.live import LiveHost
from tests.support.tools import needs_tool

OLD, NEW = "6.1.0-50-amd64", "6.1.0-53-amd64"

needs_depmod = needs_tool("depmod", "kmod")


def _built(kver: str, version: str = "570.86.16") -> dict[str, bytes]:
    return {name: build_module(nvidia_tags(version, kver, name=name.replace("-", "_"))) for name in MODULE_NAMES}


def _install(host: LiveHost, kver: str, built: dict[str, bytes]) -> tuple[list[str], Manifest]:
    actions, entries = install_actions(kver, built)
    done = apply_all(host, actions)
    return done, Manifest(kver, "f", "570.86.16-p2p", "c" * 40, entries, "2026-01-01T00:00:00+00:00")


@needs_depmod
def test_module_install_twice_changes_nothing_the_second_time(tmp_path: Path) -> None:
    (tmp_path / "lib/modules" / OLD / "kernel").mkdir(parents=True)
    host = LiveHost(str(tmp_path))
    built = _built(OLD)
    first, manifest = _install(host, OLD, built)
    assert [d.split()[0:2] for d in first] == [
        ["install", "nvidia.ko,"],
        ["write", paths.DEPMOD_OVERRIDE],
        ["run", "depmod"],
    ]
    assert all(c.ok for c in check_installed(host, manifest))  # the real depmod resolves every name to ours
    second, _ = _install(host, OLD, built)
    assert second == []
    # one file replaced behind fwman's back: the files and depmod are redone, the override is left alone
    (tmp_path / f"lib/modules/{OLD}/updates/fwman/nvidia.ko").write_bytes(b"not ours")
    third, _ = _install(host, OLD, built)
    assert [d.split()[0] for d in third] == ["install", "run"]
    assert (tmp_path / f"lib/modules/{OLD}/updates/fwman/nvidia.ko").read_bytes() == built["nvidia"]


@needs_depmod
def test_depmod_runs_when_the_names_resolve_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "lib/modules" / OLD / "kernel").mkdir(parents=True)
    host = LiveHost(str(tmp_path))
    built = _built(OLD)
    _install(host, OLD, built)
    (tmp_path / f"lib/modules/{OLD}/modules.dep").write_text("updates/dkms/nvidia.ko:\n")  # a later depmod, elsewhere
    actions, _ = install_actions(OLD, built)
    assert [a.describe().split()[0] for a in pending(host, actions)] == ["run"]
    assert len(apply_all(host, actions)) == 1 and apply_all(host, actions) == []


def test_manifest_is_not_rewritten_for_a_new_build_record_only(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    entries = install_actions(OLD, _built(OLD))[1]
    manifest = Manifest(OLD, "f", "b", "c" * 40, entries, "2026-01-01T00:00:00+00:00")
    assert apply_all(host, [WriteManifest(manifest)]) == [f"write {paths.MODULES_STATE_DIR}/{OLD}.json"]
    later = Manifest(OLD, "f", "b", "c" * 40, entries, "2026-02-02T00:00:00+00:00", object_cache_hit=True)
    assert apply_all(host, [WriteManifest(later)]) == []
    loaded = load_manifest(host, OLD)
    assert loaded is not None and loaded.built_at == "2026-01-01T00:00:00+00:00"
    other = Manifest(OLD, "f", "b", "d" * 40, entries, "2026-02-02T00:00:00+00:00")
    assert WriteManifest(other).is_needed(host)


def _systemd_boot_root(tmp: Path) -> Path:
    loader = tmp / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    (loader / "loader.conf").write_text("timeout 3\ndefault abc-*\n")
    return loader


def test_pin_and_unpin_as_actions(tmp_path: Path) -> None:
    loader = _systemd_boot_root(tmp_path)
    host = LiveHost(str(tmp_path))
    action = boot.PinBoot(OLD, NEW, "test")
    assert apply_all(host, [action]) == [f"pin the boot default to {OLD} instead of {NEW}"]
    assert action.record is not None and action.record.method == "systemd-boot"
    assert apply_all(host, [boot.PinBoot(OLD, NEW, "test")]) == []
    # the loader's default edited back by hand: the pin is needed again, though fwman's record is still there
    (loader / "loader.conf").write_text("timeout 3\ndefault abc-*\n")
    assert boot.PinBoot(OLD, NEW, "test").is_needed(host)
    apply_all(host, [boot.PinBoot(OLD, NEW, "test")])
    assert default_boot_kernel(host).kver == OLD
    release = boot.UnpinBoot()
    assert len(apply_all(host, [release])) == 1 and release.record is not None and release.record.kernel == OLD
    assert apply_all(host, [boot.UnpinBoot()]) == []
    assert "default abc-*" in (loader / "loader.conf").read_text() and boot.read_pin(host) is None


@needs_depmod
def test_ensure_safe_boot_reports_a_change_once(tmp_path: Path) -> None:
    _systemd_boot_root(tmp_path)
    (tmp_path / "lib/modules" / OLD / "kernel").mkdir()
    host = LiveHost(str(tmp_path))
    _, manifest = _install(host, OLD, _built(OLD))
    write_manifest(host, manifest)  # OLD is safe; NEW (the default) has nothing
    first = boot.ensure_safe_boot(host)
    assert first.pinned is not None and first.pinned.kernel == OLD
    assert first.changed == [f"pin the boot default to {OLD} instead of {NEW}"]
    second = boot.ensure_safe_boot(host)
    assert second.pinned is None and second.changed == [] and second.default.kver == OLD
    # NEW gets working modules: the pin is released, once
    _, fixed = _install(host, NEW, _built(NEW))
    write_manifest(host, fixed)
    third = boot.ensure_safe_boot(host)
    assert third.released is not None and third.changed == ["undo fwman's boot pin (restore the previous default)"]
    assert boot.ensure_safe_boot(host).changed == []


def test_a_marker_saying_the_same_is_not_rewritten(tmp_path: Path) -> None:
    """The boot-time catch-up re-marks a still-pending kernel: the file keeps its first date and its bytes."""
    from fwman.driver.build.manifest import Marker, pending_path, read_marker, write_marker

    host = LiveHost(str(tmp_path))
    (tmp_path / "var/lib/fwman/modules").mkdir(parents=True)
    path = pending_path("6.1.0-53-amd64")
    write_marker(host, path, Marker("6.1.0-53-amd64", "no headers", at="2026-11-30T08:00:00Z"))
    first = (tmp_path / path.lstrip("/")).read_bytes()
    write_marker(host, path, Marker("6.1.0-53-amd64", "no headers", at="2026-12-01T08:00:00Z"))
    assert (tmp_path / path.lstrip("/")).read_bytes() == first
    write_marker(host, path, Marker("6.1.0-53-amd64", "source unavailable: x", at="2026-12-01T08:00:00Z"))
    marker = read_marker(host, path)
    assert marker is not None and (marker.reason, marker.at) == ("source unavailable: x", "2026-12-01T08:00:00Z")
