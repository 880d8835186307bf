"""`--root` never reaches the machine: every command, run under ``--root`` with recording stand-ins for the
machine's tools on PATH, runs none of them except to read.

The root is the example 4x3090 host's recorded files (fixtures/hosts/rig-4x3090) with an installed kernel; the
stand-ins (nvidia-smi, update-initramfs, dracut, systemctl, modprobe, rmmod, insmod, nvflash, mokutil, depmod,
dkms, GRUB's tools, setpci, ...) are on this machine's PATH, as the real ones are for an owner who points
``--root`` at another disk, and each records its arguments. Every leaf command runs with the arguments a
person would give it (its changing form and its dry run); afterwards the record may hold only reads, judged by
this test's own list (not by fwman.host.machine, the code under test). The walk is shown to catch a planted side
door: the same walk with the recording tools handed to fwman as the root's own machine records the writes.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.hostgen.materialize import materialize
from tests.support.commands import leaf_commands
from tests.support.env import EXAMPLE_HOST, FwmanEnv

KVER = "6.1.0-47-amd64"
TOOLS = (
    "nvidia-smi", "update-initramfs", "dracut", "mkinitcpio", "systemctl", "modprobe", "rmmod", "insmod", "nvflash",
    "mokutil", "depmod", "dkms", "update-grub", "grub-mkconfig", "grub-reboot", "grub-set-default", "grub-editenv",
    "bootctl", "kernel-install", "setpci", "proxmox-boot-tool", "update-rc.d", "efibootmgr", "reboot",
)  # fmt: skip
#: what a recorded call may be: a read (this test's own judgement, from the tools' manual pages)
READS = [
    r"nvidia-smi( -q| -x| --query\S*| --format\S*| -L| --version| -i \S+)*",
    r"nvidia-smi (topo|nvlink) (-m|-p2p \w+|-s|--status)( .*)?",
    r"systemctl( --\S+)* (is-active|is-enabled|is-failed|is-system-running|show|status|cat|list-\S+)( .*)?",
    r"mokutil (--sb-state|--list-enrolled|--test-key \S+|--list-new|--version)",
    r"dkms (status|--version)( .*)?",
    r"dkms .*--dkmstree=\S+.*",  # given the root's trees
    r"depmod .*-b \S+.*",  # given the root as its base directory
    r"grub-(set-default|reboot) --boot-directory=\S+ .*",
    r"setpci( -\S+)* -s \S+( [A-Za-z_0-9+.]+)*",  # no REG=VALUE
]

#: the arguments a person gives each command (beyond none): its changing form and its dry run
SAMPLES: dict[tuple[str, ...], list[list[str]]] = {
    ("driver", "power"): [
        ["--apply", "--limit", "280", "--persistence"],
        ["--apply", "--limit", "280", "--dry-run"],
        ["--apply", "--off"],
    ],
    ("driver", "settings"): [["--apply"], ["--apply", "--dry-run"], ["--apply", "--rebar"]],
    ("driver", "move"): [["--to", "565.77"], ["--to", "565.77", "--dry-run"], ["--rollback"], ["--finish"]],
    ("modules", "build"): [["--kernel", KVER], ["--all", "--dry-run"]],
    ("modules", "catchup"): [["--force"], ["--dry-run"]],
    ("modules", "check-boot"): [["--pin"]],
    ("modules", "forget"): [["--kernel", KVER]],
    ("modules", "hook"): [["--kernel", KVER], ["--kernel", KVER, "--dry-run"]],
    ("modules", "keygen"): [["--force"], ["--reuse-dkms"]],
    ("modules", "preflight"): [["--hold"], ["--release"]],
    ("modules", "remove"): [["--kernel", KVER], ["--all"]],
    ("modules", "unpin"): [[]],
    ("hooks", "install"): [[], ["--dry-run"]],
    ("hooks", "remove"): [[]],
    ("dkms", "block"): [[], ["--dry-run"]],
    ("dkms", "unblock"): [[]],
    ("metrics", "install"): [[]],
    ("metrics", "remove"): [[]],
    ("userspace", "hold"): [[]],
    ("userspace", "release"): [[]],
    ("upgrade",): [["--apply"], ["--check"], ["--dry-run"]],
    ("backup",): [[]],
    ("flash", "resume"): [[]],
    ("restore",): [["--card", "41:00.0", "--backup", "/nonexistent.rom"]],
    ("p2p"): [["--timeout", "5"]],
    ("doctor",): [[]],
    ("apply",): [[], ["--dry-run"], ["--check"]],
}
#: commands whose run needs the network or a file fwman would write outside the root; walked without them
SKIP = {
    ("capture",), ("catalog", "update"), ("fetch",), ("driver", "branches"), ("catalog", "keys", "sign"),
    ("catalog", "sign"), ("catalog", "propose"), ("metrics", "write"), ("modules", "export"), ("flash", "report"),
}  # fmt: skip


def _recorders(bindir: Path, log: Path) -> None:
    bindir.mkdir()
    for tool in TOOLS:
        (bindir / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "{tool} $*" >> {log}\nexit 1\n')
        (bindir / tool).chmod(0o755)


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """Return (root, the recording tools' directory, their log)."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / f"lib/modules/{KVER}/kernel").mkdir(parents=True, exist_ok=True)
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/vmlinuz-{KVER}").write_bytes(b"")
    # the running kernel's initramfs (not carrying fwman's options: `driver settings --apply` must regenerate it)
    running = (root / "proc/sys/kernel/osrelease").read_text().strip()
    (root / f"boot/initrd.img-{running}").write_bytes(b"\x1f\x8b not an initramfs fwman wrote")
    (root / "etc/initramfs-tools").mkdir(parents=True, exist_ok=True)
    (root / "etc/initramfs-tools/initramfs.conf").write_text("MODULES=most\n")
    bindir, log = tmp_path / "machine-bin", tmp_path / "machine.log"
    _recorders(bindir, log)
    yield root, bindir, log
    shutil.rmtree(root, ignore_errors=True)


def _walk(root: Path, env: FwmanEnv) -> list[str]:
    """Run every leaf command under ``--root root`` (with its samples); return the commands walked."""
    walked = []
    for argv, _command in leaf_commands():
        if argv in SKIP:
            continue
        for extra in [[], *SAMPLES.get(argv, [])]:
            env(*argv, *extra, "--root", str(root))
            walked.append(" ".join([*argv, *extra]))
    return walked


def _writes(log: Path) -> list[str]:
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if not any(re.fullmatch(r, c) for r in READS)]


def test_no_command_under_root_runs_the_machine_s_tools_except_to_read(machine: tuple[Path, Path, Path]) -> None:
    root, bindir, log = machine
    path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    walked = _walk(root, FwmanEnv(variables={"PATH": path}, machine_tools=[]))
    assert len(walked) > 60
    assert _writes(log) == []


def test_the_walk_catches_a_planted_side_door(machine: tuple[Path, Path, Path]) -> None:
    """The same walk, with the machine's tools handed to fwman as the root's own: the writes show in the record."""
    root, bindir, log = machine
    path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = FwmanEnv(variables={"PATH": path}, machine_tools=[bindir])
    env("driver", "power", "--apply", "--limit", "280", "--root", str(root))
    env("driver", "settings", "--apply", "--root", str(root))
    writes = _writes(log)
    assert any(w.startswith("nvidia-smi -i ") and " -pl 280" in w for w in writes), writes
    assert any(w.startswith("update-initramfs -u -k ") for w in writes), writes
