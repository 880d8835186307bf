"""The architecture test: fwman's layers and doors, checked on the source with the standard library's ``ast``.

Layers, low to high (a module may import its own package and any lower layer, never a higher one, nor a sibling
of the same rank unless SIBLINGS allows it)::

    core < host < (gpu, platform) < (firmware, driver) < (reports, p2p) < app < cli

Doors (the only modules that may touch the world; the effect kinds they own):

- ``fwman/host/*``: files, processes (subprocess, pty), the network (requests, in ``host/http.py``)
- ``fwman/core/clock.py``: the clock (``datetime.now``, ``time.time``/``monotonic``/``sleep``...)
- ``fwman/core/resources.py``: fwman's bundled data files
- ``fwman/p2p/cuda.py``: native code (ctypes to libcuda)

Imports inside functions and under ``TYPE_CHECKING`` count like any other: a lazy import is still a dependency.
Anything else that needs an exception goes in ALLOWED with its reason, and ALLOWED is kept short: an entry that
no longer matches anything fails the test too, so it gets deleted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fwman"

#: rank of each top-level package of fwman (``fwman`` itself: the version string, as low as core)
LAYERS: dict[str, int] = {
    "fwman": 0,
    "core": 0,
    "host": 1,
    "gpu": 2,
    "platform": 2,
    "firmware": 3,
    "driver": 3,
    "reports": 4,
    "p2p": 4,
    "app": 5,
    "cli": 6,
    "__main__": 7,
}
#: sibling imports (same rank, different package) that are allowed: (importer, imported)
SIBLINGS: set[tuple[str, str]] = set()

#: which modules own which effect (a module name, or a package prefix ending in ".")
DOORS: dict[str, set[str]] = {
    "fwman.host.": {"files", "processes", "network"},
    "fwman.core.clock": {"clock"},
    "fwman.core.resources": {"files"},
    "fwman.p2p.cuda": {"native"},
}

#: "<module> <what>" -> why it is allowed; <what> is an effect kind or "imports fwman.<package>"
ALLOWED: dict[str, str] = {
    "fwman.host.pty clock": "a pty deadline is real time: a fixed test clock must not stall a running nvflash",
    "fwman.driver.build.lock files": "flock needs a real file descriptor; a Host has no lock primitive",
    "fwman.host.isolate clock": "a hung child's deadline is real time: a fixed test clock must not stall it",
}

# -- what counts as an effect ----------------------------------------------------------------------------------
#: importing one of these modules (or a submodule) is the effect
EFFECT_MODULES: dict[str, str] = {
    "subprocess": "processes",
    "pty": "processes",
    "multiprocessing": "processes",
    "requests": "network",
    "urllib.request": "network",
    "urllib3": "network",
    "socket": "network",
    "http.client": "network",
    "http.server": "network",
    "ftplib": "network",
    "ctypes": "native",
    "fcntl": "files",
    "shutil": "files",
    "tempfile": "files",
}
OS_FILE_CALLS = {
    "open", "fdopen", "remove", "unlink", "rename", "replace", "renames", "makedirs", "mkdir", "rmdir",
    "removedirs", "listdir", "scandir", "walk", "stat", "lstat", "chmod", "chown", "lchown", "symlink", "link",
    "readlink", "utime", "truncate", "mkfifo", "access", "fsync",
}  # fmt: skip
OS_PATH_FILE_CALLS = {"exists", "lexists", "isfile", "isdir", "islink", "getsize", "getmtime", "realpath"}
OS_PROCESS_CALLS = {"system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn", "posix_spawnp"}
OS_PROCESS_PREFIXES = ("exec", "spawn")
#: Path methods with no path argument (a Host's methods of the same name take the path first)
PATH_READS = {"read_text", "read_bytes"}  # called with no positional argument
PATH_WRITES = {"write_text", "write_bytes"}  # called with exactly one positional argument (the data)
TIME_CLOCK = {
    "time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "sleep", "localtime",
    "gmtime", "ctime", "process_time",
}  # fmt: skip
DATETIME_CLOCK = {"now", "utcnow", "today"}
#: Host methods that change the host or run a tool: the CLI only parses and dispatches, so ``fwman.cli`` never
#: calls them itself (a use case in app/, or an action, does)
HOST_CHANGES = {"write_bytes", "mkdir", "rename", "unlink", "symlink", "run", "run_interactive"}


@dataclass(frozen=True)
class Violation:
    """One place where a module breaks a rule: ``what`` is an effect kind or ``imports fwman.<package>``."""

    module: str
    line: int
    what: str
    detail: str

    @property
    def key(self) -> str:
        """Return the ALLOWED key that would excuse this violation."""
        return f"{self.module} {self.what}"

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.what}: {self.detail}"


def _dotted(node: ast.expr) -> str | None:
    """Return ``a.b.c`` for a Name/Attribute chain, None for anything else (calls, subscripts)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Return the absolute module a relative ``from .x import`` in ``module`` names."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _package(module: str) -> str:
    """Return the layer key of a module name: ``fwman.gpu.smi`` -> ``gpu``; ``fwman`` -> ``fwman``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _effect_of_import(name: str) -> str | None:
    for mod, kind in EFFECT_MODULES.items():
        if name == mod or name.startswith(mod + "."):
            return kind
    return None


def check_source(module: str, source: str, *, is_package: bool = False) -> list[Violation]:
    """Return every rule ``source`` (the text of fwman module ``module``) breaks, before doors and ALLOWED."""
    tree = ast.parse(source)
    found: list[Violation] = []
    me = _package(module)

    def add(node: ast.AST, what: str, detail: str) -> None:
        found.append(Violation(module, getattr(node, "lineno", 0), what, detail))

    def imported(node: ast.AST, name: str) -> None:
        kind = _effect_of_import(name)
        if kind is not None:
            add(node, kind, f"imports {name}")
        if name == "fwman" or name.startswith("fwman."):
            other = _package(name)
            if other == me or other not in LAYERS or me not in LAYERS:
                return
            if LAYERS[other] > LAYERS[me]:
                add(node, f"imports fwman.{other}", f"{me} (layer {LAYERS[me]}) imports {name} (layer {LAYERS[other]})")
            elif LAYERS[other] == LAYERS[me] and (me, other) not in SIBLINGS:
                add(node, f"imports fwman.{other}", f"{me} imports its sibling {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module) if node.level else (node.module or "")
            imported(node, base)
            for alias in node.names:  # `from fwman import gpu`, `from time import monotonic`, `from os import system`
                full = f"{base}.{alias.name}"
                if base == "fwman" or (_effect_of_import(full) and not _effect_of_import(base)):
                    imported(node, full)
                if base == "time" and alias.name in TIME_CLOCK:
                    add(node, "clock", f"from time import {alias.name}")
                if base == "os" and (alias.name in OS_PROCESS_CALLS or alias.name.startswith(OS_PROCESS_PREFIXES)):
                    add(node, "processes", f"from os import {alias.name}")
        elif isinstance(node, ast.Call):
            effect = _call_effect(node)
            if effect is not None:
                add(node, *effect)
            if me == "cli" and isinstance(node.func, ast.Attribute) and node.func.attr in HOST_CHANGES:
                receiver = _dotted(node.func.value) or ""
                if receiver == "host" or receiver.endswith(".host"):
                    add(node, "host change", f"{receiver}.{node.func.attr}() in the CLI")
    return found


def _call_effect(node: ast.Call) -> tuple[str, str] | None:
    """Return (effect kind, what was called) when call ``node`` touches the world, else None."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "open":
        return "files", "open()"
    if not isinstance(func, ast.Attribute):
        return None
    dotted = _dotted(func)
    attr = func.attr
    positional = len(node.args)
    if dotted is not None:
        head = dotted.rsplit(".", 1)[0]
        if head == "os" and attr in OS_FILE_CALLS:
            return "files", f"{dotted}()"
        if head == "os.path" and attr in OS_PATH_FILE_CALLS:
            return "files", f"{dotted}()"
        if head == "os" and (attr in OS_PROCESS_CALLS or attr.startswith(OS_PROCESS_PREFIXES)):
            return "processes", f"{dotted}()"
        if head == "time" and attr in TIME_CLOCK:
            return "clock", f"{dotted}()"
        if head.split(".")[-1] in ("datetime", "date") and attr in DATETIME_CLOCK:
            return "clock", f"{dotted}()"
    if attr in PATH_READS and positional == 0:
        return "files", f".{attr}() (pathlib)"
    if attr in PATH_WRITES and positional == 1:
        return "files", f".{attr}(data) (pathlib)"
    if attr == "open" and dotted != "os.open":
        return "files", f"{dotted or '...'}.open()"
    return None


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _is_door(module: str, what: str) -> bool:
    for name, kinds in DOORS.items():
        if (module.startswith(name) if name.endswith(".") else module == name) and what in kinds:
            return True
    return False


def tree_violations() -> list[Violation]:
    """Return every violation in the fwman package that no door owns (ALLOWED not applied)."""
    found: list[Violation] = []
    for module, path in _modules():
        for v in check_source(module, path.read_text(), is_package=path.name == "__init__.py"):
            if not _is_door(v.module, v.what):
                found.append(v)
    return found


def test_layers_and_doors_hold() -> None:
    found = tree_violations()
    unexcused = [v for v in found if v.key not in ALLOWED]
    assert not unexcused, "code outside the doors, or a lower layer importing a higher one:\n" + "\n".join(
        map(str, unexcused)
    )
    stale = sorted(set(ALLOWED) - {v.key for v in found})
    assert not stale, f"ALLOWED entries that no longer match anything (delete them): {stale}"


# -- the checker can fail ------------------------------------------------------------------------------------
PLANTED = [
    ("fwman.gpu.smi", "from fwman.cli.context import AppContext\n", "imports fwman.cli"),
    ("fwman.host.live", "def f():\n    from fwman.gpu import inventory\n", "imports fwman.gpu"),  # lazy import
    (
        "fwman.host.base",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fwman.cli.app\n",
        "imports fwman.cli",
    ),
    ("fwman.firmware.rom.parse", "from fwman.driver import forks\n", "imports fwman.driver"),  # sibling
    ("fwman.core.units", "from . import errors\nfrom ..gpu import smi\n", "imports fwman.gpu"),  # relative
    ("fwman.core.findings", "from fwman.host.base import Host\n", "imports fwman.host"),  # core is the ground
    ("fwman.reports.audit.report", "from fwman import cli\n", "imports fwman.cli"),
    ("fwman.gpu.smi", "def f(p):\n    return open(p).read()\n", "files"),
    ("fwman.gpu.smi", "from pathlib import Path\nPath('/x').read_text()\n", "files"),
    ("fwman.gpu.smi", "def f(p, d):\n    p.write_bytes(d)\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    with p.open('rb') as f:\n        pass\n", "files"),
    ("fwman.gpu.smi", "import os\nos.makedirs('/var/lib/fwman')\n", "files"),
    ("fwman.gpu.smi", "import os\nos.path.exists('/dev/nvidia0')\n", "files"),
    ("fwman.gpu.smi", "import shutil\n", "files"),
    ("fwman.gpu.smi", "def f():\n    import subprocess\n", "processes"),
    ("fwman.gpu.smi", "import os\nos.system('nvidia-smi')\n", "processes"),
    ("fwman.gpu.smi", "from os import execvp\n", "processes"),
    ("fwman.gpu.smi", "import pty\n", "processes"),
    ("fwman.gpu.smi", "from datetime import datetime\ndatetime.now()\n", "clock"),
    ("fwman.gpu.smi", "import datetime\ndatetime.datetime.utcnow()\n", "clock"),
    ("fwman.gpu.smi", "from datetime import date\ndate.today()\n", "clock"),
    ("fwman.gpu.smi", "import time\ntime.time()\n", "clock"),
    ("fwman.gpu.smi", "from time import monotonic\n", "clock"),
    ("fwman.gpu.smi", "def f():\n    import requests\n", "network"),
    ("fwman.gpu.smi", "from urllib.request import urlopen\n", "network"),
    ("fwman.gpu.smi", "import socket\n", "network"),
    ("fwman.gpu.smi", "import http.client\n", "network"),
    ("fwman.gpu.smi", "import ctypes\n", "native"),
    ("fwman.cli.metrics", "def f(app, p, d):\n    app.host.write_bytes(p, d)\n", "host change"),
    ("fwman.cli.hooks", "def f(host):\n    host.run(['systemctl', 'daemon-reload'])\n", "host change"),
]


@pytest.mark.parametrize(("module", "source", "what"), PLANTED)
def test_checker_catches_a_planted_violation(module: str, source: str, what: str) -> None:
    found = [v for v in check_source(module, source) if not _is_door(v.module, v.what)]
    assert [v.what for v in found] == [what], found


CLEAN = [
    ("fwman.cli.scan", "from fwman.gpu.inventory import scan\nfrom fwman.core.errors import UsageError\n"),
    ("fwman.core.config", "from fwman.core import paths\nfrom .errors import UsageError\n"),
    ("fwman.gpu.smi", "def f(host, p):\n    return host.read_text(p) + host.read_bytes(p, limit=4).decode()\n"),
    ("fwman.gpu.smi", "def f(host, p, d):\n    host.write_bytes(p, d)\n"),  # the Host's method: path first
    ("fwman.gpu.smi", "from urllib.parse import urlsplit\nimport os.path\nos.path.join('a', 'b')\n"),
    ("fwman.gpu.smi", "from fwman.core import clock\nclock.now_utc()\n"),
    ("fwman.firmware.ops.fetch", "from fwman.gpu.card import Card\nfrom fwman.host.http import http_get\n"),
    ("fwman.host.http", "import requests\n"),  # the door itself
    ("fwman.host.live", "import os\nos.makedirs('/x')\nopen('/x/y', 'wb')\nimport subprocess\n"),
    ("fwman.core.clock", "import time\nfrom datetime import datetime\ndatetime.now()\ntime.monotonic()\n"),
    ("fwman.p2p.cuda", "import ctypes\n"),
    ("fwman.cli.scan", "def f(app, p):\n    return app.host.read_text(p)\n"),  # the CLI may read
    ("fwman.app.metrics", "def f(host, p, d):\n    host.write_bytes(p, d)\n"),  # a use case may change
]


@pytest.mark.parametrize(("module", "source"), CLEAN)
def test_checker_passes_what_the_rules_allow(module: str, source: str) -> None:
    assert [v for v in check_source(module, source) if not _is_door(v.module, v.what)] == []


def test_a_door_is_a_door_only_for_its_own_effects() -> None:
    # the clock door may not open files; the host may not read the clock
    assert [v.what for v in check_source("fwman.core.clock", "open('/etc/x')\n") if not _is_door(v.module, v.what)] == [
        "files"
    ]
    found = check_source("fwman.host.live", "import time\ntime.time()\n")
    assert [v.what for v in found if not _is_door(v.module, v.what)] == ["clock"]
