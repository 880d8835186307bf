"""Ubuntu's prebuilt NVIDIA module packages: names, dpkg's status file, and what an Ubuntu-shaped root holds.

The names are real ones from Ubuntu's Packages indexes (docs/ubuntu.md); the root is made with the real
``dpkg --root --unpack`` of stand-in packages laid out like Ubuntu's (tests/support/ubuntu.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver import dkms
from fwman.driver.prebuilt import PIN_PATTERNS, PrebuiltName, classify, module_dirs, read_prebuilt
from fwman.host.live import LiveHost
from fwman.platform.dpkg import parse_dpkg_status
from tests.support import ubuntu
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "linux-modules-nvidia-580-open-6.8.0-149-generic",
            PrebuiltName("modules", "580", True, "6.8.0-149-generic", "generic"),
        ),
        (
            "linux-modules-nvidia-550-6.8.0-31-generic",
            PrebuiltName("modules", "550", False, "6.8.0-31-generic", "generic"),
        ),
        (
            "linux-modules-nvidia-535-server-open-6.8.0-31-generic",
            PrebuiltName("modules", "535-server", True, "6.8.0-31-generic", "generic"),
        ),
        (
            "linux-modules-nvidia-580-open-6.8.0-149-lowlatency",
            PrebuiltName("modules", "580", True, "6.8.0-149-lowlatency", "lowlatency"),
        ),
        (
            "linux-modules-nvidia-580-open-generic-hwe-22.04",
            PrebuiltName("metapackage", "580", True, None, "generic-hwe-22.04"),
        ),
        ("linux-modules-nvidia-580-open-generic", PrebuiltName("metapackage", "580", True, None, "generic")),
        ("linux-modules-nvidia-570-generic-6.14", PrebuiltName("metapackage", "570", False, None, "generic-6.14")),
        (
            "linux-signatures-nvidia-6.8.0-149-generic",
            PrebuiltName("signatures", None, False, "6.8.0-149-generic", "generic"),
        ),
        (
            "linux-objects-nvidia-550-open-6.8.0-31-generic",
            PrebuiltName("objects", "550", True, "6.8.0-31-generic", "generic"),
        ),
    ],
)
def test_ubuntu_package_names_are_classified(name: str, expected: PrebuiltName) -> None:
    assert classify(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-dkms-580-open",
        "linux-modules-6.8.0-31-generic",
        "nvidia-driver-580-open",
        "linux-headers-6.8.0-31-generic",
        "libnvidia-compute-580",
        "linux-modules-nvidia",
    ],
)
def test_other_packages_are_not_prebuilt_modules(name: str) -> None:
    assert classify(name) is None


@given(st.text(max_size=80))
def test_classify_any_name_never_raises(name: str) -> None:
    found = classify(name)
    assert found is None or found.kind in ("modules", "metapackage", "objects", "signatures")


def test_dpkg_status_paragraphs_fields_and_continuations() -> None:
    text = (
        "Package: linux-modules-nvidia-580-open-generic-hwe-22.04\nStatus: install ok installed\n"
        "Provides: nvidia-dkms-580-open (= 580.178.04-0ubuntu0.22.04.1), nvidia-prebuilt-kernel\n"
        "Version: 6.8.0-149.149~22.04.1\nDescription: Extra drivers\n more text\n .\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n"
    )
    meta, gone = parse_dpkg_status(text)
    assert meta.provides == ("nvidia-dkms-580-open", "nvidia-prebuilt-kernel") and meta.on_disk
    assert meta.version == "6.8.0-149.149~22.04.1" and not gone.on_disk


@pytest.mark.parametrize(
    ("text", "line"),
    [(" orphan continuation\n", 1), ("Package: a\nnot a field\n", 2), ("Status: install ok installed\n", 1)],
)
def test_dpkg_status_errors_name_the_line(text: str, line: int) -> None:
    with pytest.raises(ParseError) as e:
        parse_dpkg_status(text)
    assert e.value.offset == line


@given(st.text(max_size=300))
def test_dpkg_status_any_text_gives_packages_or_parse_error(text: str) -> None:
    try:
        packages = parse_dpkg_status(text)
    except ParseError:
        return
    assert all(p.name for p in packages)


def test_module_dirs_from_a_file_list() -> None:
    listed = [
        "/.",
        "/lib/modules/kernel/nvidia-580-open",
        "/lib/modules/6.8.0-149-generic/kernel/nvidia-580-open",
        "/lib/modules/6.8.0-149-generic/kernel/nvidia-580-open/nvidia.ko",
        "/lib/modules/6.8.0-31-generic/kernel/nvidia-550/bits/BUILD",
    ]
    assert module_dirs(listed) == [
        "/lib/modules/6.8.0-149-generic/kernel/nvidia-580-open",
        "/lib/modules/6.8.0-31-generic/kernel/nvidia-550",
    ]


@given(st.lists(st.text(max_size=60), max_size=20))
def test_module_dirs_any_list_never_raises(listed: list[str]) -> None:
    assert all("/kernel/nvidia" in d for d in module_dirs(listed))


def test_real_dpkg_unpack_of_ubuntu_shaped_packages_is_read(tmp_path: Path) -> None:
    require_tools("dpkg", "dpkg-deb")
    root = ubuntu.ubuntu_root(tmp_path / "root")
    kver, version = ubuntu.NEW_ABI, ubuntu.NEW_VERSION
    pkgs = [
        ubuntu.prebuilt_modules(kver, version),
        ubuntu.prebuilt_meta(kver, version),
        ubuntu.signatures(kver, version),
    ]
    ubuntu.unpack_into(root, [*pkgs, ubuntu.driver_packages()[2]], tmp_path / "work")
    found = {p.name: p for p in read_prebuilt(LiveHost(str(root))) or []}
    assert set(found) == {p.name for p in pkgs}  # nvidia-driver-580-open is not a module package
    modules = found[f"linux-modules-nvidia-580-open-{kver}"]
    assert modules.module_dirs == [f"/lib/modules/{kver}/kernel/nvidia-580-open"]
    assert modules.modules == sorted(f"/lib/modules/{kver}/kernel/nvidia-580-open/{m}.ko" for m in ubuntu.MODULE_NAMES)
    assert found[ubuntu.META].provides == ["nvidia-dkms-580-open", "nvidia-prebuilt-kernel"]
    assert found[ubuntu.META].kind == "metapackage" and found[ubuntu.META].modules == []
    assert found[f"linux-signatures-nvidia-{kver}"].modules == []  # only .ko.sig files: no module until latelink


def test_no_dpkg_database_is_none(tmp_path: Path) -> None:
    assert read_prebuilt(LiveHost(str(tmp_path))) is None


def test_the_dkms_pin_blocks_every_prebuilt_pattern() -> None:
    for pattern in PIN_PATTERNS:
        assert f"Package: {pattern}\nPin: release *\nPin-Priority: -1\n" in dkms.APT_PIN_TEXT
    assert "Package: *nvidia*dkms*\nPin: release *\nPin-Priority: -1\n" in dkms.APT_PIN_TEXT


def test_block_rewrites_the_dkms_only_pin_of_an_older_fwman(tmp_path: Path) -> None:
    require_tools("dkms")
    (tmp_path / "var/lib/dkms").mkdir(parents=True)
    pin = tmp_path / "etc/apt/preferences.d/fwman-nvidia-dkms"
    pin.parent.mkdir(parents=True)
    pin.write_text("Package: *nvidia*dkms*\nPin: release *\nPin-Priority: -1\n")  # what fwman wrote before
    host = LiveHost(str(tmp_path))
    assert not dkms.pin_current(host)
    r = FwmanEnv()("dkms", "block", "--json", "--root", str(tmp_path))
    assert r.code == 0 and r.json()["changed"] is True
    assert pin.read_text() == dkms.APT_PIN_TEXT and dkms.pin_current(host)
