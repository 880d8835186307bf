"""Row 8 and the closed-stream class: every state record is evidence, and every exit code survives a closed or
broken stdout/stderr.

A damaged ``userspace-hold.json`` with fwman's apt pin in place is not "hold: none" (it was exit 0): the status
says the record is unreadable and that the pin holds, and exits 3 naming the file. ``doctor`` (exit 4), ``rom
inspect`` of a missing file (exit 5) and the rest end with their own code whether stdout, stderr or both are
closed (``>&-``) or their reader went away (``| true``): a closed stream loses the text, never the code.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST, REPO

DAMAGE = ["{{{", "", "[]", '{"packages": 3}', "\xff\xfe", "null", '{"packages": {"libcuda1": 1}, "files": 7}x']


@pytest.fixture
def held_root(tmp_path: Path) -> Path:
    """Return a root with fwman's user-space pin in place."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    pin = root / paths.APT_USERSPACE_PIN.lstrip("/")
    pin.parent.mkdir(parents=True, exist_ok=True)
    pin.write_text("Package: libcuda1\nPin: version 570.86.16-1\nPin-Priority: 1001\n")
    return root


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_hold_record_with_the_pin_in_place_is_not_hold_none(
    attack: CountingEnv, held_root: Path, damage: str
) -> None:
    record = held_root / paths.USERSPACE_HOLD_STATE.lstrip("/")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_bytes(damage.encode("utf-8", errors="surrogateescape"))
    before = record.read_bytes()
    r = attack("--root", str(held_root), "userspace", "status", "--no-simulate")
    assert r.code == 3, r.stdout + r.stderr
    assert "hold: none" not in r.stdout
    assert f"hold: UNREADABLE record: {paths.USERSPACE_HOLD_STATE}" in r.stdout
    assert f"the apt pin {paths.APT_USERSPACE_PIN} is in place" in r.stdout
    assert f"fwman: error: unreadable userspace hold record: {paths.USERSPACE_HOLD_STATE}" in r.stderr
    j = attack("--root", str(held_root), "userspace", "status", "--no-simulate", "--json")
    assert j.code == 3
    doc = j.json()
    assert doc["held"] is True and doc["pin"] is True and doc["record_error"].startswith(paths.USERSPACE_HOLD_STATE)
    assert record.read_bytes() == before  # evidence left as it was


def test_a_pin_without_its_record_is_said(attack: CountingEnv, held_root: Path) -> None:
    r = attack("--root", str(held_root), "userspace", "status", "--no-simulate")
    assert r.code == 0, r.stderr
    assert "hold: none" not in r.stdout and "is in place but fwman's record" in r.stdout


CASES = [
    (("doctor",), 4),
    (("modules", "check-boot"), 4),
    (("rom", "inspect", "/nonexistent.rom"), 5),
    (("audit", "--offline"), 0),
]
REDIRECTS = [">&-", "2>&-", ">&- 2>&-", "| true", "2>&1 | true", "| head -c1 >/dev/null"]


@pytest.mark.parametrize(("argv", "code"), CASES)
@pytest.mark.parametrize("redirect", REDIRECTS)
def test_the_exit_code_survives_closed_and_broken_streams(argv: tuple[str, ...], code: int, redirect: str) -> None:
    tried()
    cmd = " ".join([sys.executable, "-m", "fwman", "--snapshot", str(EXAMPLE_HOST), *argv])
    # a reader that exits at once: sleep-free, so fwman's first write after it meets EPIPE or a full close
    script = f"{cmd} {redirect}; exit ${{PIPESTATUS[0]}}"
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert p.returncode == code, (redirect, p.stdout, p.stderr)
    assert "unexpected" not in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("which", ["stdout", "stderr", "both"])
def test_in_process_closed_streams_keep_the_code(which: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    if which in ("stdout", "both"):
        out.close()
    if which in ("stderr", "both"):
        err.close()
    from fwman.cli.app import run
    from fwman.cli.context import Environment

    tried()
    env = Environment(stdout=out, stderr=err)
    assert run(["--snapshot", str(EXAMPLE_HOST), "rom", "inspect", "/nonexistent.rom"], env) == 5
    assert run(["--snapshot", str(EXAMPLE_HOST), "doctor"], env) == 4


class GoneTerminal(io.StringIO):
    """A terminal that went away mid-run (ssh dropped): every write fails with EIO."""

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


def test_a_flash_whose_terminal_goes_away_still_writes_verifies_and_exits_0(tmp_path: Path) -> None:
    from fixtures.nvflash.rig import REBAR_3987, build_rig
    from fwman.cli.app import run
    from fwman.cli.context import Environment
    from fwman.firmware.rom.parse import parse_rom

    rig = build_rig(tmp_path)
    out = io.StringIO()
    env = Environment(
        stdout=out,
        stderr=GoneTerminal(),
        stdout_isatty=True,
        stderr_isatty=True,  # nvflash's own output (its bar) is streamed to the terminal
        variables=dict(rig.env.variables),  # not the real environment: a developer's NO_COLOR must not matter
        live_host_factory=rig.env.live_host,
    )
    tried()
    code = run(["--root", str(rig.root), "flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}"], env)
    assert code == 0
    assert rig.chain("0000:41:00.0") == parse_rom(rig.new_image).chain_sha256
    assert "written, read back and verified" in out.getvalue()


def test_the_console_entry_delivers_all_its_output_before_it_ends() -> None:
    # main() ends the process with os._exit (no interpreter teardown, so no flush at exit either): every write
    # must have reached the pipe by then, the JSON whole, with the mapped exit code
    tried()
    argv = [sys.executable, "-m", "fwman", "--snapshot", str(EXAMPLE_HOST), "audit", "--offline", "--json"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as for a user
    p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120, check=False, env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "fwman.audit/1" and doc["rows"] and p.stdout.endswith("}\n")
