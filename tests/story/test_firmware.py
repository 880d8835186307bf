"""Story 1, the test of record: upgrade launch firmware to the ReBAR image, through the apt-installed package.

A Debian 12 root from the owner layer with fwman's .deb installed by apt; the stand-in nvflash rig (fixtures/
nvflash: a fake nvflash over one EEPROM file per card, the example 4x RTX 3090 host's files) copied into it at
/srv/rig, the stand-in on the root's PATH as /usr/local/bin/nvflash. The installed fwman plans, backs up every
card, flashes the two launch-firmware cards, reads them back; after the (simulated) reboot `upgrade --check`
confirms them. Each step asserts what an owner would check.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.nvflash.rig import CARDS, LAUNCH_3987, REBAR_3987, STANDIN_DIR, WITHDRAWN_3987, Rig, build_rig
from fwman.firmware.rom.parse import parse_rom
from tests.support.debroot import DebRoot, Kernels, install_deb
from tests.support.env import EXAMPLE_HOST

RIG = "/srv/rig"


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path) -> Iterator[DebRoot]:
    """Return a root with fwman installed by apt and the stand-in nvflash on its PATH."""
    root = DebRoot.create(tmp_path_factory.mktemp("story1"), layer[0])
    try:
        install_deb(root, deb)
        root.put(STANDIN_DIR / "nvflash", "/usr/local/bin/nvflash")
        yield root
    finally:
        root.close()


def _fwman(root: DebRoot, *argv: str) -> tuple[int, str]:
    # FWMAN_MACHINE_TOOLS: the stand-in nvflash is the rig's machine (under --root fwman runs no flashing tool else)
    env = (
        f"NVFLASH_STATE_DIR={RIG}/nvflash-state NVFLASH_PROC_MODULES={RIG}/root/proc/modules "
        "FWMAN_MACHINE_TOOLS=/usr/local/bin"
    )
    proc = root.sh(f"{env} {shlex.join(['fwman', *argv, '--root', f'{RIG}/root'])} 2>&1", check=False)
    return proc.returncode, proc.stdout


def _json(out: str) -> Any:
    """Return the first JSON document in ``out`` (stdout and stderr are one stream in these runs)."""
    return json.JSONDecoder().raw_decode(out[out.index("{") :])[0]


def _sync_back(root: DebRoot, rig: Rig) -> None:
    """Copy the rig's files from the root back to the host copy (to read EEPROMs and simulate the reboot)."""
    base = rig.root.parent
    for name in ("root", "nvflash-state"):
        target = base / name
        if target.exists():
            shutil.rmtree(target)
        root.get(f"{RIG}/{name}", target)


def test_upgrade_launch_firmware_to_rebar_with_backups(machine: DebRoot, tmp_path: Path) -> None:
    # the driver is loaded: the plan reads each card's running firmware from it (as on the owner's box)
    rig = build_rig(tmp_path / "rig", driver_loaded=True)
    shutil.copytree(EXAMPLE_HOST / "files/proc/driver/nvidia", rig.root / "proc/driver/nvidia")
    machine.put(rig.root.parent, RIG)
    before = {bus: rig.eeprom(bus) for bus, _, _ in CARDS}

    code, out = _fwman(machine, "upgrade", "--dry-run", "--json")
    assert code == 0, f"`fwman upgrade --dry-run` exit {code}:\n{out}"
    plan = _json(out)
    actions = {c["bus_id"]: c["action"] for c in plan["gpus"]}
    assert actions == {b: ("flash" if v == LAUNCH_3987 else "keep") for b, _, v in CARDS}, actions

    code, out = _fwman(machine, "upgrade", "--apply")
    assert code == 3 and "rmmod" in out, f"`fwman upgrade --apply` with the driver loaded: exit {code}:\n{out}"
    # the owner stops the driver, as the message says (rmmod: the modules leave /proc/modules)
    machine.sh(f"sed -i '/^nvidia/d' {RIG}/root/proc/modules && rm -rf {RIG}/root/proc/driver/nvidia")
    code, out = _fwman(machine, "upgrade", "--apply")
    assert code == 0, f"`fwman upgrade --apply` exit {code}:\n{out}"
    for bus, _, version in CARDS:
        if version == LAUNCH_3987:
            assert f"{bus}: {LAUNCH_3987} -> {REBAR_3987}: written, read back and verified" in out, out

    _sync_back(machine, rig)
    for bus, _, version in CARDS:
        now = parse_rom(rig.eeprom(bus)).version
        if version == LAUNCH_3987:
            assert now == REBAR_3987, f"{bus} holds {now} after the upgrade"
        else:
            assert rig.eeprom(bus) == before[bus], f"{bus} (not in the plan) was changed"
    # a backup of every card, each of the firmware the card held before, verified by fwman itself
    code, out = _fwman(machine, "backup", "verify")
    assert code == 0, f"`fwman backup verify` exit {code}:\n{out}"
    code, out = _fwman(machine, "backup", "list", "--json")
    assert code == 0, f"`fwman backup list --json` exit {code}:\n{out}"
    backed_up = {json.dumps(b) for b in _json(out).get("backups", [])}
    for bus, _, _ in CARDS:
        assert any(bus in b for b in backed_up), f"no backup of {bus} (every card is backed up before a flash)"

    # the owner reboots (Re-Size BAR on in the firmware setup); the check confirms both cards
    rig.reboot()
    machine.put(rig.root, f"{RIG}/root.new")
    machine.sh(f"rm -rf {RIG}/root && mv {RIG}/root.new {RIG}/root")
    code, out = _fwman(machine, "upgrade", "--check", "--json")
    assert code == 0, f"`fwman upgrade --check` after the reboot exit {code}:\n{out}"
    rows = {c["bus_id"]: c["result"] for c in _json(out)["gpus"]}
    assert rows == {b: ("confirmed" if v == LAUNCH_3987 else "not flashed") for b, _, v in CARDS}, rows


def test_a_withdrawn_image_points_a_newcomer_at_a_fetch_that_works(machine: DebRoot, tmp_path: Path) -> None:
    """Issue 23 row 8, through the installed package: a withdrawn image is refused as withdrawn (exit 3), and the
    hint names the board's recommended image with a `fetch` that works in that state (it used to say "fetch it",
    and `fetch` refused it as withdrawn)."""
    rig = build_rig(tmp_path / "rig")
    machine.sh(f"rm -rf {RIG}")
    machine.put(rig.root.parent, RIG)
    code, out = _fwman(machine, "flash", "--card", "41:00.0", "--image", f"3842:3987/{WITHDRAWN_3987}")
    assert code == 3 and "withdrawn" in out and "not downloaded" not in out, (
        f"row 8: `fwman flash` of the withdrawn {WITHDRAWN_3987}: exit {code}:\n{out}"
    )
    hint = next((ln for ln in out.splitlines() if ln.strip().startswith("hint:")), "")
    fetch = f"fwman fetch 3842:3987/{REBAR_3987}"
    assert fetch in hint, f"row 8: the hint does not name a fetch of the recommended image:\n{out}"
    code, out = _fwman(machine, *shlex.split(fetch)[1:])
    assert code == 0 and "withdrawn" not in out, f"row 8: the hinted `{fetch}` exit {code}:\n{out}"
