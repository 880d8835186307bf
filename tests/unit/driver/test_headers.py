"""Which package carries a kernel's headers on Ubuntu (generic, HWE, lowlatency; 26.04's 7.0) and Proxmox VE 9 (6.14,
6.17), and which kernel a kernel image package installs. Names as Ubuntu's Packages indexes and Proxmox's packaging
(pve-kernel debian/control.in) have them: docs/ubuntu.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.driver.headers import advise, kernel_release_of_package, ubuntu_is_hwe
from fwman.platform.distro import Distribution
from tests.support import ubuntu
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

JAMMY = Distribution("ubuntu", "22.04", "jammy", ("debian",))
NOBLE = Distribution("ubuntu", "24.04", "noble", ("debian",))
RESOLUTE = Distribution("ubuntu", "26.04", "resolute", ("debian",))
PVE9 = Distribution("debian", "13", "trixie", proxmox=True)


@pytest.mark.parametrize(
    ("kver", "dist", "package", "common", "meta"),
    [
        # jammy's own 5.15 and its HWE 6.8 (linux-hwe-6.8); noble's own 6.8 and its HWE 7.0 (linux-hwe-7.0)
        (
            "5.15.0-204-generic",
            JAMMY,
            "linux-headers-5.15.0-204-generic",
            "linux-headers-5.15.0-204",
            "linux-headers-generic",
        ),
        (
            "6.8.0-149-generic",
            JAMMY,
            "linux-headers-6.8.0-149-generic",
            "linux-hwe-6.8-headers-6.8.0-149",
            "linux-headers-generic-hwe-22.04",
        ),
        (
            "6.8.0-151-generic",
            NOBLE,
            "linux-headers-6.8.0-151-generic",
            "linux-headers-6.8.0-151",
            "linux-headers-generic",
        ),
        (
            "7.0.0-44-generic",
            NOBLE,
            "linux-headers-7.0.0-44-generic",
            "linux-hwe-7.0-headers-7.0.0-44",
            "linux-headers-generic-hwe-24.04",
        ),
        # lowlatency: noble's own (linux-lowlatency) and jammy's HWE 6.8 (linux-lowlatency-hwe-6.8)
        (
            "6.8.0-31-lowlatency",
            NOBLE,
            "linux-headers-6.8.0-31-lowlatency",
            "linux-lowlatency-headers-6.8.0-31",
            "linux-headers-lowlatency",
        ),
        (
            "6.8.0-149-lowlatency",
            JAMMY,
            "linux-headers-6.8.0-149-lowlatency",
            "linux-lowlatency-hwe-6.8-headers-6.8.0-149",
            "linux-headers-lowlatency-hwe-22.04",
        ),
        (
            "6.11.0-1016-lowlatency",
            NOBLE,
            "linux-headers-6.11.0-1016-lowlatency",
            "linux-lowlatency-hwe-6.11-headers-6.11.0-1016",
            "linux-headers-lowlatency-hwe-24.04",
        ),
        # resolute's own 7.0 (linux-headers-generic 7.0.0-27.27 in resolute-updates: docs/ubuntu.md)
        (
            "7.0.0-27-generic",
            RESOLUTE,
            "linux-headers-7.0.0-27-generic",
            "linux-headers-7.0.0-27",
            "linux-headers-generic",
        ),
    ],
)
def test_ubuntu_headers_generic_hwe_lowlatency(
    kver: str, dist: Distribution, package: str, common: str, meta: str
) -> None:
    advice = advise(kver, dist)
    assert (advice.distribution, advice.package, advice.common, advice.metapackage) == ("ubuntu", package, common, meta)
    assert (
        advice.install_hint() == f"apt install {package} (and {meta}, so the headers of each later kernel come with it)"
    )


def test_ubuntu_unknown_release_or_flavour_says_only_what_is_known() -> None:
    interim = Distribution("ubuntu", "25.10", "questing")  # no GA series known to fwman: no metapackage guessed
    advice = advise("6.17.0-5-generic", interim)
    assert (advice.package, advice.common, advice.metapackage) == ("linux-headers-6.17.0-5-generic", None, None)
    assert advise("6.8.0-1021-aws", NOBLE).metapackage is None  # a cloud flavour: docs/ubuntu.md sources none
    assert ubuntu_is_hwe("6.8.0-149-generic", "22.04") is True and ubuntu_is_hwe("5.15.0-1-generic", "22.04") is False
    assert ubuntu_is_hwe("6.8.0-149-generic", None) is None


def test_ubuntu_26_04_names_what_was_read_and_nothing_more() -> None:
    # a newer series on 26.04 is its HWE kernel: the metapackage's name is published, its common part is not
    hwe = advise("7.1.0-5-generic", RESOLUTE)
    assert (hwe.package, hwe.common, hwe.metapackage) == (
        "linux-headers-7.1.0-5-generic",
        None,
        "linux-headers-generic-hwe-26.04",
    )
    assert hwe.install_hint() == (
        "apt install linux-headers-7.1.0-5-generic (and linux-headers-generic-hwe-26.04, so the headers of each "
        "later kernel come with it)"
    )
    # 26.04's lowlatency is the generic kernel: a -lowlatency release there gets no invented metapackage
    low = advise("7.0.0-30-lowlatency", RESOLUTE)
    assert (low.common, low.metapackage) == (None, None)
    assert low.install_hint() == "apt install linux-headers-7.0.0-30-lowlatency"
    assert ubuntu_is_hwe("7.0.0-27-generic", "26.04") is False and ubuntu_is_hwe("7.1.0-5-generic", "26.04") is True


def test_pending_build_on_ubuntu_26_04_names_the_generic_headers(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text(
        'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="26.04"\nVERSION_CODENAME=resolute\nUBUNTU_CODENAME=resolute\n'
    )
    err = _pending_build(tmp_path, "7.0.0-27-generic")
    assert (
        "apt install linux-headers-7.0.0-27-generic (and linux-headers-generic, so the headers of each later kernel"
        in " ".join(err.split())
    ), err


@pytest.mark.parametrize(
    ("kver", "package", "series"),
    [
        ("6.14.11-6-pve", "proxmox-headers-6.14.11-6-pve", "proxmox-headers-6.14"),
        ("6.17.13-4-pve", "proxmox-headers-6.17.13-4-pve", "proxmox-headers-6.17"),
        ("6.8.12-4-pve", "proxmox-headers-6.8.12-4-pve", "proxmox-headers-6.8"),
        # Proxmox VE 9.2's 7.0 series (7.0.0-3-pve: aikitoria/open-gpu-kernel-modules issue 24, docs/ubuntu.md)
        ("7.0.0-3-pve", "proxmox-headers-7.0.0-3-pve", "proxmox-headers-7.0"),
    ],
)
def test_proxmox_9_headers_and_series_metapackage(kver: str, package: str, series: str) -> None:
    advice = advise(kver, PVE9)
    assert (advice.package, advice.metapackage, advice.series_metapackage) == (
        package,
        "proxmox-default-headers",
        series,
    )
    assert advice.install_hint().startswith(f"apt install {package} (and {series},")
    # a Debian kernel on a Proxmox node keeps Debian's headers package
    assert advise("6.12.48+deb13-amd64", PVE9).package == "linux-headers-6.12.48+deb13-amd64"


@pytest.mark.parametrize(
    ("name", "kver"),
    [
        ("proxmox-kernel-6.17.13-4-pve-signed", "6.17.13-4-pve"),
        ("proxmox-kernel-6.17.13-4-pve", "6.17.13-4-pve"),
        ("proxmox-kernel-6.14.11-6-pve-signed", "6.14.11-6-pve"),
        ("pve-kernel-5.15.158-2-pve", "5.15.158-2-pve"),
        ("linux-image-6.8.0-149-generic", "6.8.0-149-generic"),
        ("linux-image-unsigned-6.8.0-149-lowlatency", "6.8.0-149-lowlatency"),
        ("linux-image-6.1.0-50-amd64", "6.1.0-50-amd64"),
        ("linux-image-6.1.0-50-amd64-unsigned", "6.1.0-50-amd64"),
        ("proxmox-kernel-6.17", None),
        ("proxmox-kernel-6.14.11-6-pve-dbgsym", None),
        ("proxmox-default-kernel", None),
        ("linux-image-amd64", None),
        ("linux-image-generic-hwe-22.04", None),
        ("proxmox-headers-6.17.13-4-pve", None),
    ],
)
def test_kernel_release_of_a_kernel_package(name: str, kver: str | None) -> None:
    assert kernel_release_of_package(name) == kver


@given(st.text(max_size=60))
def test_kernel_package_parser_any_name_never_raises(name: str) -> None:
    kver = kernel_release_of_package(name)
    assert kver is None or (kver in name and "-" in kver)


@given(st.text(max_size=40), st.sampled_from([JAMMY, NOBLE, RESOLUTE, PVE9, Distribution(None)]))
def test_advice_any_release_never_raises(kver: str, dist: Distribution) -> None:
    assert kver in advise(kver, dist).package


def _pending_build(root: Path, kver: str) -> str:
    (root / "lib/modules" / kver).mkdir(parents=True)
    (root / "src/fork/kernel-open").mkdir(parents=True)
    (root / "src/fork/Makefile").write_text("modules:\n")
    r = FwmanEnv()("modules", "build", "--kernel", kver, "--source", "/src/fork", "--root", str(root))
    assert r.code == 5, r.stderr
    return r.stderr


def test_pending_build_on_ubuntu_names_the_hwe_headers(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path)
    err = _pending_build(root, "6.8.0-149-generic")
    assert "marked pending" in err and "apt install linux-headers-6.8.0-149-generic" in err
    assert "linux-headers-generic-hwe-22.04" in err  # not linux-headers-amd64, which Ubuntu does not have


def test_pending_build_on_proxmox_9_names_the_series_headers(tmp_path: Path) -> None:
    (tmp_path / "etc/pve").mkdir(parents=True)
    (tmp_path / "etc/os-release").write_text('ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n')
    err = _pending_build(tmp_path, "6.17.13-4-pve")
    assert "apt install proxmox-headers-6.17.13-4-pve (and proxmox-headers-6.17," in err


def test_hooks_install_on_ubuntu_recommends_the_hwe_headers_metapackage_until_dpkg_has_it(tmp_path: Path) -> None:
    require_tools("dpkg", "dpkg-deb")
    root = ubuntu.ubuntu_root(tmp_path / "root")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0-149-generic\n")
    r = FwmanEnv()("hooks", "install", "--root", str(root))
    assert r.code == 0, r.stderr
    assert (
        "recommended: apt install linux-headers-generic-hwe-22.04 (headers that follow each new kernel"
        in r.stdout + r.stderr
    )
    meta = ubuntu.Pkg(
        "linux-headers-generic-hwe-22.04", "6.8.0-149.149~22.04.1", {"Depends": "linux-headers-6.8.0-149-generic"}
    )
    ubuntu.unpack_into(root, [meta], tmp_path / "work")  # the real dpkg records it in the root's database
    again = FwmanEnv()("hooks", "install", "--root", str(root))
    assert again.code == 0 and "recommended" not in again.stdout + again.stderr


def test_hooks_install_on_proxmox_9_reads_the_roots_dpkg_database(tmp_path: Path) -> None:
    (tmp_path / "etc/pve").mkdir(parents=True)
    (tmp_path / "etc/os-release").write_text('ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n')
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("")
    r = FwmanEnv()("hooks", "install", "--root", str(tmp_path))
    assert (
        "recommended: apt install proxmox-default-headers (headers that follow the default Proxmox kernel"
        in r.stdout + r.stderr
    )
    (tmp_path / "var/lib/dpkg/status").write_text(
        "Package: proxmox-default-headers\nStatus: install ok installed\nVersion: 2.0.0\n"
    )
    again = FwmanEnv()("hooks", "install", "--root", str(tmp_path))  # the hooks are in place: only the check runs
    assert again.code == 0 and "recommended" not in again.stdout + again.stderr
