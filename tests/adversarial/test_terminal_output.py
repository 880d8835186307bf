"""Row 4: text from outside never reaches the terminal as control characters. Escape sequences in an LXC
``lxc.environment`` value, a qemu ``hostpci`` line, a ``/lib/modules`` directory name and a C1 CSI in an
nvidia-smi GPU name are printed made visible by ``doctor``, ``modules status``, ``scan`` and ``audit`` (one
output door: ``AppContext.echo`` and the error line); ``--json`` keeps the exact value."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.termtext import has_unsafe, visible
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST

RETITLE = "\x1b]0;pwned\x07"
ERASE_UP = "\x1b[2K\x1b[1A"
C1_CSI = "\x9b2J"
#: anything a terminal acts on, but newline and tab
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
KVER = "6.8.12-4-pve"


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    """Return a copy of the 4x3090 snapshot with escape sequences in four places a stranger controls."""
    snap = Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap", symlinks=True))
    lxc = snap / "files/etc/pve/lxc/101.conf"
    lxc.write_text(lxc.read_text() + f"lxc.environment: NVIDIA_VISIBLE_DEVICES=all{RETITLE}\n")
    vm = snap / "files/etc/pve/qemu-server/200.conf"
    vm.write_text(vm.read_text() + f"hostpci0: 0000:41:00.0,pcie=1{ERASE_UP}BLOCK\n")
    smi = snap / "commands/003.stdout"
    smi.write_text(smi.read_text().replace("NVIDIA GeForce RTX 3090", f"NVIDIA GeForce RTX 3090{C1_CSI}", 1))
    meta = json.loads((snap / "snapshot.json").read_text())
    meta["dirs"]["/lib/modules"].append(f"{KVER}{ERASE_UP}")
    meta["dirs"][f"/lib/modules/{KVER}{ERASE_UP}"] = []
    (snap / "snapshot.json").write_text(json.dumps(meta))
    return snap


@pytest.mark.parametrize(
    "command", [("doctor",), ("modules", "status"), ("scan",), ("audit", "--offline"), ("scan", "-v")]
)
def test_hostile_snapshot_text_is_shown_never_obeyed(attack: CountingEnv, snap: Path, command: tuple[str, ...]) -> None:
    r = attack("--snapshot", str(snap), *command)
    assert "unexpected" not in r.stderr, r.stderr
    shown = r.stdout + r.stderr
    assert not RAW.search(shown), [m.group() for m in RAW.finditer(shown)]


def test_the_visible_forms_are_printed(attack: CountingEnv, snap: Path) -> None:
    r = attack("--snapshot", str(snap), "scan")
    assert "RTX 3090\\x9b2J" in r.stdout, r.stdout
    r = attack("--snapshot", str(snap), "modules", "status")
    assert f"{KVER}\\x1b[2K\\x1b[1A" in r.stdout, r.stdout


def test_json_keeps_the_exact_value(attack: CountingEnv, snap: Path) -> None:
    r = attack("--snapshot", str(snap), "scan", "--json")
    assert r.code == 0, r.stderr
    assert C1_CSI not in r.stdout  # JSON escapes it ...
    names = [c.get("name") for c in json.loads(r.stdout)["gpus"]]
    assert f"NVIDIA GeForce RTX 3090{C1_CSI}" in names  # ... and keeps it exactly


def test_an_error_line_quoting_outside_text_is_made_visible(attack: CountingEnv, tmp_path: Path) -> None:
    bad = tmp_path / f"evil{RETITLE}.rom"  # a name from a stranger's archive, say; not there
    r = attack("rom", "inspect", str(bad))
    assert r.code != 0
    assert RETITLE not in r.stderr and "\\x1b]0;pwned\\x07" in r.stderr, r.stderr


@given(st.text())
def test_visible_leaves_nothing_a_terminal_obeys(text: str) -> None:
    tried()
    shown = visible(text)
    assert not RAW.search(shown) and not has_unsafe(shown)
    assert "\n" not in text or "\n" in shown


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_text_is_unchanged(text: str) -> None:
    tried()
    assert visible(text) == text
