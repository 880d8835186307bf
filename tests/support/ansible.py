"""Running the fwman.p2p collection with the real ansible-core (no tests here).

Playbooks run as a subprocess of ``ansible-playbook`` from the same virtual environment as the tests, with
``-c local`` hosts whose Python is this interpreter and whose ``fwman_bin`` is this environment's ``fwman``;
each host of an inventory may have its own ``fwman_root``. The outcome is read from the PLAY RECAP lines and,
where a test needs a task's return value, from a JSON file the playbook writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.env import REPO
from tests.support.tools import missing

COLLECTIONS = REPO / "collections"
COLLECTION = COLLECTIONS / "ansible_collections/fwman/p2p"
BIN = Path(sys.executable).parent
FWMAN = str(BIN / "fwman")
_RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")


def require_ansible() -> None:
    """Skip unless ansible-core is installed in this environment (the dev extra pins it)."""
    if not (BIN / "ansible-playbook").exists():
        missing("needs ansible-core (pip install -e '.[dev]')")


@dataclass
class PlaybookRun:
    """One ansible-playbook run: exit status, output, and the recap per host."""

    rc: int
    output: str
    recap: dict[str, dict[str, int]]


def ansible_env(tmp: Path) -> dict[str, str]:
    """Return the environment for ansible commands: this collection, no colour, state under ``tmp``."""
    home = tmp / "ansible-home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


def local_host(**variables: Any) -> dict[str, Any]:
    """Return the inventory variables of a ``-c local`` host running this interpreter and this fwman."""
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "fwman_bin": FWMAN,
        **variables,
    }


def run_playbook(
    tmp: Path, hosts: dict[str, dict[str, Any]], playbook: str, *args: str, group: str = "gpu"
) -> PlaybookRun:
    """Write ``hosts`` as an inventory and ``playbook`` (YAML text) to ``tmp`` and run it; return the outcome."""
    inventory = tmp / "inventory.json"
    inventory.write_text(json.dumps({group: {"hosts": hosts}}))
    book = tmp / "play.yml"
    book.write_text(playbook)
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(book), *args],
        capture_output=True,
        text=True,
        env=ansible_env(tmp),
        timeout=900,
    )
    output = proc.stdout + proc.stderr
    recap: dict[str, dict[str, int]] = {}
    seen = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            seen = True
            continue
        m = _RECAP.match(line.strip()) if seen else None
        if m:
            counts = dict(item.split("=") for item in m.group("counts").split())
            recap[m.group("host")] = {k: int(v) for k, v in counts.items()}
    return PlaybookRun(proc.returncode, output, recap)
