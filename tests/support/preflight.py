"""A machine for ``fwman modules preflight`` under a temp root: a stand-in ``apt-get`` that prints a simulation
in apt 2.6.1's format (and fails every download: a temp root has no archive), a local module source, an owner's
pin beside fwman's. Shared by tests/unit/app/test_preflight.py and the adversarial suite."""

from __future__ import annotations

from pathlib import Path

from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

FIRST = "6.1.0-55-amd64"  #: the installed kernel


def simulation(*kernels: str) -> str:
    """Return ``apt-get -s dist-upgrade`` output that installs ``kernels`` (image, headers, common headers)."""
    lines = ["Reading package lists...", "Calculating upgrade..."]
    for k in kernels:
        n = k.split("-")[1]
        lines += [
            f"Inst linux-headers-6.1.0-{n}-common (6.1.192-{n} Debian-Security:12/oldstable-security [all])",
            f"Inst linux-image-{k} (6.1.192-{n} Debian-Security:12/oldstable-security [amd64])",
            f"Inst linux-headers-{k} (6.1.192-{n} Debian-Security:12/oldstable-security [amd64])",
        ]
    lines.append(f"Inst linux-image-{FIRST} [6.1.190-1] (6.1.190-2 Debian:12.15/oldstable [amd64])")  # installed
    return "\n".join(lines) + "\n"


def preflight_machine(tmp_path: Path, *offered: str, env: type[FwmanEnv] = FwmanEnv) -> tuple[FwmanEnv, Path, Path]:
    """Return (fwman with a stand-in apt-get, the root, the file the stand-in prints as its simulation)."""
    require_tools("cc")
    root = tmp_path / "root"
    (root / f"lib/modules/{FIRST}/build/include").mkdir(parents=True)
    tree = root / "src/tree"
    (tree / "kernel-open").mkdir(parents=True)
    (tree / "Makefile").write_text("modules:\n")
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text('[modules]\nsource = "/src/tree"\n')
    (root / "etc/apt/preferences.d").mkdir(parents=True)
    (root / "etc/apt/preferences.d/owner-pin").write_text("Package: bash\nPin: version *\nPin-Priority: 1001\n")
    sim = tmp_path / "simulation"
    sim.write_text(simulation(*offered))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\ncase " $* " in *" -s "*) cat {sim} ;; *) exit 100 ;; esac\n'
    )
    (bin_dir / "apt-get").chmod(0o755)
    return env(path_prepend=[bin_dir]), root, sim
