"""Which kernel boots next (GRUB, systemd-boot, Proxmox pin files) and "safe to boot", on temp roots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver.boot import loaders, safety
from fwman.driver.boot import pin as boot
from fwman.driver.kernels import version_key
from fwman.host.live import LiveHost
from tests.support.boot import UUID, grub_cfg
from tests.support.env import FwmanEnv

NEW, OLD = "6.1.0-53-amd64", "6.1.0-50-amd64"


def _grubenv(**values: str) -> bytes:
    body = "# GRUB Environment Block\n" + "".join(f"{k}={v}\n" for k, v in values.items())
    return (body + "#" * (1024 - len(body))).encode()


def _root(tmp: Path, env: bytes | None = None, default_saved: bool = True) -> Path:
    for k in (OLD, NEW):
        (tmp / "lib/modules" / k).mkdir(parents=True)
    grub = tmp / "boot/grub"
    grub.mkdir(parents=True)
    cfg = grub_cfg([NEW, OLD])
    if not default_saved:
        cfg = cfg.replace('set default="${saved_entry}"', 'set default="0"')
    (grub / "grub.cfg").write_text(cfg)
    if env is not None:
        (grub / "grubenv").write_bytes(env)
    return tmp


def test_grub_menu_of_a_debian_grub_cfg() -> None:
    menu = loaders.parse_grub_cfg(grub_cfg([NEW, OLD]))
    assert menu.default == "${saved_entry}"
    assert [i.title for i in menu.items] == ["Debian GNU/Linux", "Advanced options for Debian GNU/Linux"]
    assert menu.items[0].kver == NEW
    sub = menu.items[1].children
    assert sub is not None and [c.kver for c in sub] == [NEW, NEW, OLD, OLD]
    entry = loaders.grub_entry_for(menu, OLD)
    assert entry == f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}"
    item = loaders.grub_lookup(menu, entry)
    assert item is not None and item.kver == OLD and "recovery" not in item.title
    assert loaders.grub_lookup(menu, "1>2") is item
    assert (
        loaders.grub_lookup(menu, "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux " + OLD) is item
    )
    assert loaders.grub_lookup(menu, "7") is None and loaders.grub_lookup(menu, "0>1") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_grub_cfg_parser_never_raises(text: str) -> None:
    menu = loaders.parse_grub_cfg(text)
    # the default is what a `set default=` line says, or GRUB's own default, the first entry
    assert menu.default == "0" or f"default={menu.default}" in text or f'default="{menu.default}' in text
    for index, item in enumerate(menu.items):  # every parsed entry is the one its position names
        assert loaders.grub_lookup(menu, str(index)) is item


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_grubenv_parser_gives_variables_or_a_parse_error(data: bytes) -> None:
    try:
        env = loaders.parse_grubenv(data)
    except ParseError:
        return
    assert all(isinstance(k, str) for k in env)


def test_next_boot_follows_grubenv(tmp_path: Path) -> None:
    root = _root(tmp_path, _grubenv())
    host = LiveHost(str(root))
    d = loaders.default_boot_kernel(host)
    assert (d.kver, d.loader) == (NEW, "grub")
    entry = f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}"
    (root / "boot/grub/grubenv").write_bytes(_grubenv(saved_entry=entry))
    assert loaders.default_boot_kernel(host).kver == OLD
    (root / "boot/grub/grubenv").write_bytes(_grubenv(saved_entry=entry, next_entry="0"))
    d = loaders.default_boot_kernel(host)
    assert d.kver == NEW and "next boot only" in d.how


def test_saved_entry_is_ignored_without_grub_default_saved(tmp_path: Path) -> None:
    entry = f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}"
    root = _root(tmp_path, _grubenv(saved_entry=entry), default_saved=False)
    assert loaders.default_boot_kernel(LiveHost(str(root))).kver == NEW


def test_systemd_boot_default_and_pin(tmp_path: Path) -> None:
    loader = tmp_path / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    (loader / "loader.conf").write_text("timeout 3\ndefault abc-*\n")
    host = LiveHost(str(tmp_path))
    assert loaders.default_boot_kernel(host).kver == NEW  # the glob picks the highest entry
    record = boot.pin(host, OLD, NEW, "test")
    assert record.method == "systemd-boot" and record.previous["default"] == "abc-*"
    assert (loader / "loader.conf").read_text() == f"timeout 3\ndefault abc-{OLD}.conf\n"
    assert loaders.default_boot_kernel(host).kver == OLD
    boot.unpin(host)
    assert "default abc-*" in (loader / "loader.conf").read_text()
    assert boot.read_pin(host) is None


def test_systemd_boot_pinned_twice_restores_the_first_default(tmp_path: Path) -> None:
    """A second run (hook, then the boot service) changes nothing and keeps what the owner had."""
    loader = tmp_path / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    original = "# the owner's comment\ntimeout 3\ndefault abc-*\nconsole-mode max\n"
    (loader / "loader.conf").write_text(original)
    host = LiveHost(str(tmp_path))
    action = boot.PinBoot(OLD, NEW, "test")
    assert action.is_needed(host)
    action.apply(host)
    after_first = (loader / "loader.conf").read_text()
    assert not action.is_needed(host)  # the second run reports "unchanged"
    boot.pin(host, OLD, NEW, "test")  # and pinning again anyway leaves the same file and the first record
    assert (loader / "loader.conf").read_text() == after_first
    assert [ln for ln in after_first.splitlines() if ln.startswith("default")] == [f"default abc-{OLD}.conf"]
    record = boot.read_pin(host)
    assert record is not None and record.previous["default"] == "abc-*"
    assert record.previous["loader.conf"] == original
    boot.unpin(host)
    assert (loader / "loader.conf").read_text() == original  # byte for byte: order and comments kept
    assert loaders.default_boot_kernel(host).kver == NEW


@pytest.mark.parametrize(
    "original",
    [
        "timeout 3\ndefault abc-*\n# owner: try the new kernel for now\ndefault abc-6.1.0-53-amd64\n",
        "timeout 3\ndefault  abc-*\n",  # the Arch wiki's two spaces
        "timeout 3\ndefault abc-*",  # no last newline
        "timeout 3\n",  # no default line at all
    ],
)
def test_systemd_boot_unpin_gives_the_owners_file_back_byte_for_byte(tmp_path: Path, original: str) -> None:
    loader = tmp_path / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    (loader / "loader.conf").write_text(original)
    host = LiveHost(str(tmp_path))
    boot.pin(host, OLD, NEW, "test")
    assert loaders.loader_default((loader / "loader.conf").read_text()) == f"abc-{OLD}.conf"
    boot.unpin(host)
    assert (loader / "loader.conf").read_text() == original


def test_systemd_boot_unpin_after_the_owner_edited_keeps_the_edit(tmp_path: Path) -> None:
    loader = tmp_path / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
        (loader / "entries" / f"abc-{k}.conf").write_text(f"title Debian\nversion {k}\nlinux /abc/{k}/linux\n")
    (loader / "loader.conf").write_text("timeout 3\ndefault abc-*\n")
    host = LiveHost(str(tmp_path))
    boot.pin(host, OLD, NEW, "test")
    with (loader / "loader.conf").open("a") as f:
        f.write("editor no\n")  # the owner changed something while pinned
    boot.unpin(host)
    assert (loader / "loader.conf").read_text() == "timeout 3\ndefault abc-*\neditor no\n"


def test_kernel_order_is_by_version() -> None:
    kernels = ["6.1.0-9-amd64", "6.1.0-53-amd64", "6.10.1-1-pve", "6.1.0-50-amd64"]
    assert sorted(kernels, key=version_key) == [
        "6.1.0-9-amd64",
        "6.1.0-50-amd64",
        "6.1.0-53-amd64",
        "6.10.1-1-pve",
    ]


def test_safety_reasons_and_check_boot(tmp_path: Path) -> None:
    root = _root(tmp_path, _grubenv())
    host = LiveHost(str(root))
    assert safety.kernel_safety(host, OLD).reason == "no patched modules built for this kernel"
    state = root / "var/lib/fwman/modules"
    state.mkdir(parents=True)
    (state / f"{NEW}.failed").write_text(
        json.dumps({"kernel": NEW, "reason": "too few arguments", "detail": {"file": "kernel-open/nvidia/nv-pci.c"}})
    )
    (state / f"{OLD}.pending").write_text(json.dumps({"kernel": OLD, "reason": "no headers"}))
    assert safety.kernel_safety(host, NEW).reason == "build failed: kernel-open/nvidia/nv-pci.c: too few arguments"
    assert safety.kernel_safety(host, OLD).reason == "pending: no headers"
    (state / f"{OLD}.json").write_text("{not json")
    assert safety.kernel_safety(host, OLD).reason.startswith("manifest unreadable")

    result = FwmanEnv()("modules", "check-boot", "--json", "--root", str(root))
    assert result.code == 4
    doc = json.loads(result.stdout)
    assert doc["schema"] == "fwman.modules-check-boot/2"
    assert (doc["kernel"], doc["safe"], doc["loader"]) == (NEW, False, "grub")
    assert "nv-pci.c" in result.stderr

    # no safe kernel anywhere: nothing to pin, said loudly, no change made
    check = boot.ensure_safe_boot(host, lambda line: None)
    assert check.pinned is None and check.problem is not None and "no other kernel" in check.problem
    assert boot.read_pin(host) is None


def test_unknown_loader_assumes_the_newest_kernel(tmp_path: Path) -> None:
    for k in (OLD, NEW):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
    d = loaders.default_boot_kernel(LiveHost(str(tmp_path)))
    assert (d.kver, d.loader) == (NEW, "unknown") and "not recognised" in d.how
