"""Branch families (issue 40): a fork whose branches of one version are the plain build and its revision
(``-p2p``, ``-p2p-v2``) and the downstream families that name the card they serve (``-p2p-48g`` for 48 GB-modded
RTX 4090 boards, ``-p2p-3080-20g``), served by the real ``git daemon``. ``driver branches`` groups them by family
with the revision number; a host with two 24 GB RTX 4090s and one with two 48 GB ones (told apart by nvidia-smi's
VRAM only: both report "NVIDIA GeForce RTX 4090") choose differently, in the listing and in
``modules build --driver-version V --dry-run``.

The GPUs are the rig generator's, materialised into temp roots; nvidia-smi is a stand-in on PATH that prints the
generator's ``nvidia-smi -q -x`` for them (with 49152 MiB for the 48 GB boards).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.driver import families
from fwman.driver.families import CardMemory
from tests.support.env import FwmanEnv
from tests.support.modules import P2P_BRANCH, branch_with, git_daemon, make_fork_repo
from tests.support.tools import require_tools

VERSION = "570.86.16"  # what fixtures/kmod-tree/fork/version.mk says: every branch here builds it
V2, G48, G20 = f"{VERSION}-p2p-v2", f"{VERSION}-p2p-48g", f"{VERSION}-p2p-3080-20g"
KVER = "6.1.0-50-amd64"
_GIB = 1 << 30


def _fork(served: Path) -> None:
    bare = served / "fork.git"
    make_fork_repo(bare)
    log = ["git", "-C", str(bare), "log", "-1", "--format=%ct", f"refs/heads/{P2P_BRANCH}"]
    base = int(subprocess.run(log, capture_output=True, text=True, check=True).stdout)
    # the 48g branch is the newest commit: the plain hosts must still not get it
    for branch, hours in ((V2, 1), (G20, 2), (G48, 3)):
        when = f"@{base + hours * 3600} +0000"
        branch_with(bare, P2P_BRANCH, branch, {branch: "x\n"}, when)


def _host(tmp_path: Path, vram_mib: int) -> tuple[FwmanEnv, Path]:
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import GpuSpec, build_rig, smi_xml

    specs = [
        GpuSpec(bus=b, subsystem_device=0x16F3, subsystem_vendor=0x10DE, vbios="95.02.18.80.00", device=0x2684,
                name="NVIDIA GeForce RTX 4090", bar1_size=32 << 30, iommu_group=g)
        for b, g in ((0x01, 20), (0x21, 40))
    ]  # fmt: skip
    build_rig(specs, note=f"4090 {vram_mib} MiB", driver_flavour="open").write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    (root / f"lib/modules/{KVER}/build/include").mkdir(parents=True)
    xml = tmp_path / "smi.xml"
    xml.write_text(smi_xml(specs).replace("<total>24576 MiB</total>", f"<total>{vram_mib} MiB</total>"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(f"#!/bin/sh\ncat {xml}\n")
    (bindir / "nvidia-smi").chmod(0o755)
    return FwmanEnv(path_prepend=[bindir]), root


def _config(root: Path, url: str) -> None:
    conf = root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[forks]\ndefaults = false\nstandin = "{url}"\n')


@pytest.mark.parametrize(("vram_mib", "family", "chosen"), [(24576, "p2p", V2), (49152, "48g", G48)])
def test_each_family_is_listed_and_the_card_picks_its_own(
    tmp_path: Path, vram_mib: int, family: str, chosen: str
) -> None:
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    _fork(served)
    env, root = _host(tmp_path, vram_mib)
    with git_daemon(served) as base:
        _config(root, f"{base}/fork.git")
        r = env("driver", "branches", "--root", str(root), "--json")
        assert r.code == 0, r.stdout + r.stderr
        doc: dict[str, Any] = r.json()
        [fork] = doc["forks"]
        revs = {x["branch"]: (x["family"], x["revision"], x["version"]) for x in fork["revisions"][VERSION]}
        assert revs == {
            P2P_BRANCH: ("p2p", 1, VERSION), V2: ("p2p", 2, VERSION),
            G48: ("48g", 1, VERSION), G20: ("3080-20g", 1, VERSION),
        }  # fmt: skip
        assert doc["gpu_family"] == family and fork["default_branches"] == {VERSION: chosen}

        text = env("driver", "branches", "--root", str(root)).stdout
        rows = [line.split() for line in text.splitlines() if line.startswith(VERSION)]
        # grouped: the plain family first (newest revision first), then the others
        assert [(row[2], row[4]) for row in rows] == [
            ("p2p", V2), ("p2p", P2P_BRANCH), ("3080-20g", G20), ("48g", G48),
        ]  # fmt: skip
        assert [row[5:6] for row in rows if row[4] == chosen] == [["*"]]
        assert "family 48g: RTX 4090 boards modded to 48 GB" in text

        argv = ["modules", "build", "--root", str(root), "--kernel", KVER, "--fork", "standin"]
        dry = env(*argv, "--driver-version", VERSION, "--dry-run")
        assert f"building {chosen} of standin, the newest of its revisions ({family})" in dry.stdout + dry.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [("570.86.16-p2p", ("570.86.16", "p2p", 1)), ("610.57.04-p2p-v3", ("610.57.04", "p2p", 3)),
     ("610.57.04-p2p-48g", ("610.57.04", "48g", 1)), ("615.71.09-p2p-3080-20g", ("615.71.09", "3080-20g", 1)),
     ("595.71.05-p2p-48g-v2", ("595.71.05", "48g", 2)), ("bar1-p2p", (None, "p2p", None)),
     ("refs/heads/565.77-p2p", ("565.77", "p2p", 1))],
)  # fmt: skip
def test_branch_names(name: str, expected: tuple[str | None, str, int | None]) -> None:
    parsed = families.parse_branch_name(name)
    assert parsed is not None
    assert (str(parsed.version) if parsed.version else None, parsed.family, parsed.revision) == expected
    assert families.parse_branch_name("main") is None and families.parse_branch_name("VK551_06") is None


def test_a_48_gb_board_is_served_by_the_48g_family_only() -> None:
    g24 = CardMemory("NVIDIA GeForce RTX 4090", 24 * _GIB)
    g48 = CardMemory("NVIDIA GeForce RTX 4090", 48 * _GIB)
    assert families.serves("48g", [g48, g48]) and not families.serves("p2p", [g48])
    assert families.serves("p2p", [g24]) and not families.serves("48g", [g24])
    assert families.host_family([g24, g48]) is None  # one module cannot serve both
    assert families.card_family(CardMemory("NVIDIA GeForce RTX 3080", 20 * _GIB)) == "3080-20g"
    assert families.card_family(CardMemory("NVIDIA GeForce RTX 3080 Ti", 12 * _GIB)) == "p2p"
    assert families.card_family(CardMemory("NVIDIA RTX A6000", 48 * _GIB)) == "p2p"  # not a modded 4090
    assert families.card_family(CardMemory("NVIDIA GeForce RTX 4090", None)) == "p2p"


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=60)
    | st.from_regex(r"[0-9]{3}\.[0-9]{2}\.[0-9]{2}-p2p(-[a-z0-9]{1,5}){0,3}(-v[0-9]{1,3})?", fullmatch=True)
)
def test_any_name_parses_to_a_family_or_none(name: str) -> None:
    parsed = families.parse_branch_name(name)
    if "p2p" not in name.lower():
        assert parsed is None
        return
    assert parsed is not None and parsed.family and (parsed.revision is None or parsed.revision >= 1)
    assert not parsed.family.startswith("v") or not parsed.family[1:].isdigit()
