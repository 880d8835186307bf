"""The pin ``fwman dkms block`` writes, read by the real apt: NVIDIA's stock DKMS packages are held, the owner's
P2P fork packaged for DKMS (``nvidia-open-p2p-dkms``, ../shared/docs/field-late-2026.md) is not.

apt reads a flat repository of package stanzas in the test's directory, a dpkg status file and the root's
``preferences.d`` through ``-o Dir::...`` settings: nothing of this machine's apt configuration is read or
changed. The packages are only index entries (apt-cache and ``apt-get -s`` never fetch a .deb).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from fwman.driver import dkms
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

#: NVIDIA's stock DKMS packages as Debian (nvidia-kernel-dkms, nvidia-open-kernel-dkms) and Ubuntu
#: (nvidia-dkms-580-open) name them, and the fork's
STOCK = ("nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-dkms-580-open")
FORK = "nvidia-open-p2p-dkms"


def _stanza(name: str, version: str, installed: bool = False) -> str:
    status = "Status: install ok installed\n" if installed else ""
    return (
        f"Package: {name}\n{status}Version: {version}\nArchitecture: amd64\nMaintainer: test <t@example.org>\n"
        f"Filename: ./{name}_{version}_amd64.deb\nSize: 10\nDescription: stand-in\n\n"
    )


def _apt(tmp_path: Path, root: Path) -> list[str]:
    """Return apt's options for an archive, state and cache in ``tmp_path`` and the pins of ``root``."""
    work = tmp_path / "apt"
    for d in ("repo", "etc", "state/lists/partial", "cache/archives/partial"):
        (work / d).mkdir(parents=True, exist_ok=True)
    (work / "etc/sources.list").write_text(f"deb [trusted=yes] file:{work / 'repo'} ./\n")
    settings = {
        "Dir::Etc": work / "etc",
        "Dir::Etc::sourcelist": "sources.list",
        "Dir::Etc::sourceparts": "-",
        "Dir::Etc::preferences": "/dev/null",
        "Dir::Etc::preferencesparts": root / "etc/apt/preferences.d",
        "Dir::Etc::parts": "-",
        "Dir::State": work / "state",
        "Dir::State::status": work / "state/status",
        "Dir::Cache": work / "cache",
        "Debug::NoLocking": "1",
        "APT::Architecture": "amd64",
        "APT::Architectures": "amd64",
        "APT::Sandbox::User": "root",
    }
    return [a for k, v in settings.items() for a in ("-o", f"{k}={v}")]


def test_the_block_holds_stock_dkms_packages_and_leaves_the_fork_package_to_apt(tmp_path: Path) -> None:
    require_tools("dkms", "apt-get", "apt-cache")
    root = tmp_path / "root"
    (root / "var/lib/dkms").mkdir(parents=True)
    r = FwmanEnv()("dkms", "block", "--json", "--root", str(root))
    assert r.code == 0 and r.json()["changed"] is True
    assert (root / "etc/apt/preferences.d/fwman-nvidia-dkms").read_text() == dkms.APT_PIN_TEXT

    opts = _apt(tmp_path, root)
    work = tmp_path / "apt"
    # the owner installed the fork's package 1.0-1; the archive has 1.1-1 of it and the stock packages
    (work / "repo/Packages").write_text("".join(_stanza(n, "1.1-1") for n in (*STOCK, FORK)))
    (work / "state/status").write_text(_stanza(FORK, "1.0-1", installed=True))
    subprocess.run(["apt-get", *opts, "-q", "update"], check=True, capture_output=True, text=True)

    policy = subprocess.run(
        ["apt-cache", *opts, "policy", *STOCK, FORK], check=True, capture_output=True, text=True
    ).stdout
    blocks = {b.split(":\n", 1)[0]: b for b in ("\n" + policy).split("\nnvidia")[1:]}
    candidates = {"nvidia" + name: block.split("Candidate: ")[1].split("\n")[0] for name, block in blocks.items()}
    assert candidates == {**{n: "(none)" for n in STOCK}, FORK: "1.1-1"}, policy
    assert "1.1-1 500" in blocks[FORK.removeprefix("nvidia")], policy

    # an upgrade takes the fork's new version; installing a stock package is refused
    upgrade = subprocess.run(["apt-get", *opts, "-s", "upgrade"], check=True, capture_output=True, text=True)
    assert f"Inst {FORK} [1.0-1] (1.1-1" in upgrade.stdout, upgrade.stdout
    stock = subprocess.run(["apt-get", *opts, "-s", "install", STOCK[0]], capture_output=True, text=True)
    assert stock.returncode == 100 and "Inst " not in stock.stdout, stock.stdout + stock.stderr


def test_without_the_fork_record_the_glob_held_the_fork_package_too(tmp_path: Path) -> None:
    """The hole this closes: the glob alone (what fwman wrote before) holds the owner's fork package."""
    require_tools("apt-get", "apt-cache")
    root = tmp_path / "root"
    (root / "etc/apt/preferences.d").mkdir(parents=True)
    (root / "etc/apt/preferences.d/fwman-nvidia-dkms").write_text(
        "Package: *nvidia*dkms*\nPin: release *\nPin-Priority: -1\n"
    )
    opts = _apt(tmp_path, root)
    work = tmp_path / "apt"
    (work / "repo/Packages").write_text(_stanza(FORK, "1.1-1"))
    (work / "state/status").write_text("")
    subprocess.run(["apt-get", *opts, "-q", "update"], check=True, capture_output=True, text=True)
    policy = subprocess.run(["apt-cache", *opts, "policy", FORK], check=True, capture_output=True, text=True).stdout
    assert "Candidate: (none)" in policy, policy
