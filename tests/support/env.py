"""Test environment objects: run fwman in-process with captured streams, no monkeypatching."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwman.cli.app import run
from fwman.cli.context import Environment
from fwman.core.clock import Clock
from fwman.host.base import Host
from fwman.host.live import LiveHost
from fwman.p2p.device import DeviceLayer

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
HOSTS = FIXTURES / "hosts"
EXAMPLE_HOST = HOSTS / "rig-4x3090"


def without_host(doc: Any) -> Any:
    """Return a JSON document without its ``host`` keys, at any depth: a recorded host's live output names "live
    host", its replay "snapshot DIR"; everything else must be the same."""
    if isinstance(doc, dict):
        return {k: without_host(v) for k, v in doc.items() if k != "host"}
    if isinstance(doc, list):
        return [without_host(v) for v in doc]
    return doc


@dataclass
class Result:
    """What one fwman invocation did."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """Return stdout parsed as JSON."""
        return json.loads(self.stdout)


@dataclass
class FwmanEnv:
    """Runs fwman in-process against a chosen environment.

    ``path_prepend`` directories go first on the live host's PATH (fixture tools such as the stand-in nvflash);
    ``variables`` are the whole process environment fwman sees (the real one is not copied in: a developer's
    ``NO_COLOR`` or ``FWMAN_*`` must not change what a test sees); ``euid`` is the user it believes it runs as.
    """

    path_prepend: Sequence[str | os.PathLike[str]] = ()
    variables: Mapping[str, str] = field(default_factory=dict)
    euid: int = 0
    tty: bool = False
    #: the clock fwman reads (None: the real one); e.g. fwman.core.clock.FixedClock
    clock: Clock | None = None
    #: opens the GPUs for `p2p` (None: the real CUDA driver); tests.support.gpus.memory_driver(...)
    cuda_driver: Callable[[str | None], DeviceLayer] | None = None
    #: directories whose tools stand for the ``--root`` tree's own machine (LiveHost's door lets a command that
    #: acts on the machine run only from these); None: the ``path_prepend`` directories (a rig's stand-ins).
    #: Tools found only on ``variables["PATH"]`` are this machine's, and refused under a root.
    machine_tools: Sequence[str | os.PathLike[str]] | None = None

    def host_env(self) -> dict[str, str]:
        """Return the variables the live host adds to commands it runs (PATH with fixtures first)."""
        extra = dict(self.variables)
        if self.path_prepend:
            base = self.variables.get("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
            extra["PATH"] = os.pathsep.join([*(str(p) for p in self.path_prepend), base])
        return extra

    def live_host(self, root: str) -> Host:
        """Return the LiveHost fwman will use for ``--root root``."""
        tools = self.path_prepend if self.machine_tools is None else self.machine_tools
        return LiveHost(root, env=self.host_env(), machine_tools=[str(t) for t in tools])

    def __call__(self, *argv: str, stdin: str = "") -> Result:
        """Run ``fwman argv...`` with ``stdin`` as its standard input (a terminal's when ``tty``); return its exit
        status and output."""
        out, err = io.StringIO(), io.StringIO()
        env = Environment(
            stdout=out,
            stderr=err,
            stdout_isatty=self.tty,
            stderr_isatty=self.tty,
            stdin=io.StringIO(stdin),
            stdin_isatty=self.tty,
            variables=dict(self.variables),
            live_host_factory=self.live_host,
            euid=self.euid,
            clock=self.clock,
            cuda_driver=self.cuda_driver,
        )
        code = run(list(argv), env)
        return Result(code, out.getvalue(), err.getvalue())


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy a fixture tree (keeping symlinks) and return the copy's path."""
    shutil.copytree(src, dst, symlinks=True)
    return dst
