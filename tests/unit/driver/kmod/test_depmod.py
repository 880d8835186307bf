"""Which module file depmod picks: search order, overrides, excludes, -/_ equivalence, and real depmod."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from fwman.driver.kernels import installed_kernels
from fwman.driver.kmod.depmod import (
    DepmodConfig,
    load_config,
    modules_dir_entries,
    parse_config_text,
    resolve_all,
    resolve_module,
)
from fwman.host.live import LiveHost
from tests.support.tools import missing

KVER = "6.1.0-50-amd64"
STOCK = "kernel/drivers/video/nvidia.ko"
DKMS = "updates/dkms/nvidia.ko.xz"
OURS = "updates/fwman/nvidia.ko"


def make_root(tmp_path: Path, files: list[str], conf: dict[str, str] | None = None, kver: str = KVER) -> LiveHost:
    """Build /lib/modules/<kver>/<files> (real module files) and depmod.d configuration under tmp_path."""
    for rel in files:
        path = tmp_path / "lib/modules" / kver / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        name = rel.rsplit("/", 1)[1].split(".ko")[0]
        path.write_bytes(build_module(nvidia_tags("570.86.16", kver, name=name.replace("-", "_"))))
    for rel, text in (conf or {}).items():
        p = tmp_path / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return LiveHost(str(tmp_path))


def test_default_order_updates_beat_kernel(tmp_path: Path) -> None:
    host = make_root(tmp_path, [STOCK, DKMS])
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{DKMS}"


def test_only_stock(tmp_path: Path) -> None:
    host = make_root(tmp_path, [STOCK])
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{STOCK}"
    assert resolve_module(host, KVER, "nouveau") is None


def test_override_wins_over_search_order(tmp_path: Path) -> None:
    conf = {"/etc/depmod.d/fwman.conf": "# fwman\noverride nvidia * updates/fwman\n"}
    host = make_root(tmp_path, [STOCK, DKMS, OURS], conf)
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{OURS}"


def test_override_for_other_kernel_is_ignored(tmp_path: Path) -> None:
    conf = {"/etc/depmod.d/fwman.conf": "override nvidia 6\\.8\\..* updates/fwman\n"}
    host = make_root(tmp_path, [STOCK, "updates/fwman/nvidia.ko", "updates/zzz/nvidia.ko"], conf)
    # no override applies: two files in updates tie; kmod keeps the one found later (name order here)
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/updates/zzz/nvidia.ko"


def test_override_kernel_regex_matches(tmp_path: Path) -> None:
    conf = {"/lib/depmod.d/x.conf": "override nvidia ^6\\.1\\.0-50 kernel/drivers/video\n"}
    host = make_root(tmp_path, [STOCK, DKMS], conf)
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{STOCK}"


def test_search_line_changes_order(tmp_path: Path) -> None:
    conf = {"/etc/depmod.d/order.conf": "search built-in updates\n"}
    host = make_root(tmp_path, [STOCK, DKMS], conf)
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{STOCK}"


def test_search_specific_subdir_first(tmp_path: Path) -> None:
    conf = {"/etc/depmod.d/order.conf": "search updates/fwman updates built-in\n"}
    host = make_root(tmp_path, [STOCK, DKMS, OURS], conf)
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{OURS}"


def test_etc_file_hides_same_name_in_lib(tmp_path: Path) -> None:
    conf = {
        "/lib/depmod.d/order.conf": "search built-in updates\n",
        "/etc/depmod.d/order.conf": "search updates built-in\n",
    }
    host = make_root(tmp_path, [STOCK, DKMS], conf)
    cfg = load_config(host, KVER)
    assert cfg.files == ["/etc/depmod.d/order.conf"]
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{DKMS}"


def test_dash_underscore_equivalence(tmp_path: Path) -> None:
    host = make_root(tmp_path, ["kernel/drivers/video/nvidia-uvm.ko", "updates/fwman/nvidia-uvm.ko"])
    expected = f"/lib/modules/{KVER}/updates/fwman/nvidia-uvm.ko"
    assert resolve_module(host, KVER, "nvidia_uvm") == expected
    assert resolve_module(host, KVER, "nvidia-uvm") == expected


def test_build_source_and_excluded_dirs_are_skipped(tmp_path: Path) -> None:
    conf = {"/etc/depmod.d/ex.conf": "exclude old\n"}
    host = make_root(tmp_path, ["build/nvidia.ko", "source/x/nvidia.ko", "updates/old/nvidia.ko", STOCK], conf)
    assert modules_dir_entries(host, KVER, ["old"]) == [STOCK]
    assert resolve_module(host, KVER, "nvidia") == f"/lib/modules/{KVER}/{STOCK}"


def test_config_parsing_rules() -> None:
    cfg = DepmodConfig()
    parse_config_text(
        "search updates \\\n extra built-in\n# override nvidia * commented\noverride nvidia\nbogus line\n"
        "override nvidia-drm * updates/fwman/\n",
        KVER,
        cfg,
    )
    assert cfg.searches == ["updates", "extra", "built-in"]
    assert cfg.overrides == [("nvidia-drm", "updates/fwman")]


def test_missing_kernel_dir_and_installed_kernels(tmp_path: Path) -> None:
    host = make_root(tmp_path, [STOCK])
    (tmp_path / "lib/modules/6.8.12-4-pve").mkdir()
    assert resolve_module(host, "9.9.9", "nvidia") is None
    assert installed_kernels(host) == [KVER, "6.8.12-4-pve"]


# -- against the real depmod -------------------------------------------------------------------------------
LAYOUTS = [
    ([STOCK, DKMS], {}),
    ([STOCK, DKMS, OURS], {"etc/depmod.d/fwman.conf": "override nvidia * updates/fwman\n"}),
    ([STOCK, DKMS], {"etc/depmod.d/a.conf": "search built-in updates\n"}),
    ([STOCK, DKMS, OURS], {"etc/depmod.d/a.conf": "search updates/fwman built-in updates\n"}),
    ([STOCK, "extra/nvidia.ko"], {"etc/depmod.d/a.conf": "search extra built-in\n"}),
    ([STOCK, "extra/nvidia.ko"], {}),
    (
        [STOCK, DKMS, OURS],
        {
            "etc/depmod.d/a.conf": "override nvidia 5\\.10.* updates/fwman\n"
            "override nvidia ^6\\.1 kernel/drivers/video\n"
        },
    ),
]


@pytest.mark.parametrize(("files", "conf"), LAYOUTS)
def test_agrees_with_real_depmod(tmp_path: Path, files: list[str], conf: dict[str, str]) -> None:
    depmod = shutil.which("depmod") or "/usr/sbin/depmod"
    if not os.path.exists(depmod):
        missing("needs depmod (Debian package kmod)")
    host = make_root(tmp_path, files, {"/" + k: v for k, v in conf.items()})
    confdir = tmp_path / "etc/depmod.d"
    confdir.mkdir(parents=True, exist_ok=True)
    # -C points the real depmod at the temp root's configuration instead of this machine's
    subprocess.run([depmod, "-b", str(tmp_path), "-C", str(confdir), KVER], check=True, capture_output=True)
    dep = (tmp_path / "lib/modules" / KVER / "modules.dep").read_text()
    real = {line.split(":")[0] for line in dep.splitlines()}
    ours = resolve_all(host, KVER)
    assert {p.removeprefix(f"/lib/modules/{KVER}/") for p in ours.values()} == real


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.text(min_size=1, max_size=20))
def test_property_config_parser_never_raises(text: str, kver: str) -> None:
    cfg = DepmodConfig()
    parse_config_text(text, kver, cfg)
    assert all(" " not in entry for entry in cfg.searches)
