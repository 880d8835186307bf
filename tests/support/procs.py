"""fwman in a real child process on the stand-in nvflash rig: for kills, signals and two runs at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.nvflash.rig import Rig
from tests.support.env import REPO

RUNNER = """
import json, sys
from tests.support.env import FwmanEnv
env = FwmanEnv(path_prepend=json.loads(sys.argv[1]), variables=json.loads(sys.argv[2]))
r = env(*sys.argv[3:])
sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); sys.exit(r.code)
"""


def spawn(rig: Rig, *argv: str, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``fwman argv... --root RIG`` in its own process (and process group); its pid is fwman's."""
    variables = {**rig.env.variables, **(extra or {})}
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            RUNNER,
            json.dumps([str(p) for p in rig.env.path_prepend]),
            json.dumps(variables),
            *argv,
            "--root",
            str(rig.root),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[str], tries: int = 600) -> None:
    """Wait (up to a minute: a stuck test must not hang CI) until ``check()`` holds; fail if ``proc`` exits."""
    for _ in range(tries):
        if check():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"fwman exited ({proc.returncode}) before {what}: {out} {err}")
        time.sleep(0.1)
    pytest.fail(f"gave up waiting for {what}")


def journal_step(root: Path, name: str, state: str) -> bool:
    """Return True when some journaled operation under ``root`` has step ``name`` in ``state``."""
    d = root / "var/lib/fwman/journal"
    for p in d.glob("*.json") if d.is_dir() else []:
        try:
            op = json.loads(p.read_text())
        except ValueError:
            continue
        if any(s["name"] == name and s["state"] == state for s in op["steps"]):
            return True
    return False
