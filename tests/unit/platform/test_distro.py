"""platform/distro: Debian, Ubuntu and Proxmox VE from os-release (base-files' real texts) and the Proxmox markers."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fwman.host.live import LiveHost
from fwman.platform.distro import distribution_from_os_release, parse_os_release, read_distribution
from tests.support import ubuntu

#: Debian 12's /usr/lib/os-release (base-files 12.4+deb12u*)
BOOKWORM = (
    'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nVERSION="12 (bookworm)"\n'
    "VERSION_CODENAME=bookworm\nID=debian\n"
)


def test_ubuntu_releases_read_as_ubuntu() -> None:
    jammy = distribution_from_os_release(ubuntu.JAMMY_OS_RELEASE)
    assert (jammy.name, jammy.version_id, jammy.codename, jammy.id_like) == ("ubuntu", "22.04", "jammy", ("debian",))
    assert jammy.ubuntu
    noble = distribution_from_os_release(ubuntu.NOBLE_OS_RELEASE)
    assert (noble.name, noble.version_id, noble.codename) == ("ubuntu", "24.04", "noble")


def test_debian_and_proxmox() -> None:
    debian = distribution_from_os_release(BOOKWORM)
    assert (debian.name, debian.codename, debian.ubuntu) == ("debian", "bookworm", False)
    pve = distribution_from_os_release(BOOKWORM.replace("bookworm", "trixie"), proxmox=True)
    assert (pve.name, pve.codename, pve.ubuntu) == ("proxmox", "trixie", False)
    mint = distribution_from_os_release('ID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="22"\n')
    assert mint.name == "ubuntu" and mint.ubuntu  # as Ubuntu's DKMS decides (the first word of ID_LIKE)
    assert not distribution_from_os_release('ID=pop\nID_LIKE="debian ubuntu"\n').ubuntu
    assert distribution_from_os_release("").name == "unknown"


def test_read_through_the_host_follows_base_files_link(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path)  # /etc/os-release -> ../usr/lib/os-release, as base-files ships it
    assert read_distribution(LiveHost(str(root))).codename == "jammy"
    (root / "etc/os-release").unlink()  # the fallback os-release(5) names
    assert read_distribution(LiveHost(str(root))).version_id == "22.04"
    (root / "usr/lib/os-release").unlink()
    (root / "etc/pve").mkdir()
    dist = read_distribution(LiveHost(str(root), env={"PATH": "/nonexistent"}))
    assert dist.id is None and dist.proxmox and dist.name == "proxmox"


@given(st.text(max_size=300))
def test_os_release_any_text_never_raises(text: str) -> None:
    assert isinstance(parse_os_release(text), dict)
    assert distribution_from_os_release(text).name in ("ubuntu", "debian", "unknown")
