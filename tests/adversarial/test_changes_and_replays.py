"""Rows 7, 8, 10 and 18: changes refuse on a snapshot and without root, one way; read commands replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.commands import CHANGES
from tests.support.counting import CountingEnv
from tests.support.env import EXAMPLE_HOST, HOSTS
from tests.support.errors import one_error_line
from tests.support.tools import is_root, needs_tool

NEEDS_ROOT = [c for c in CHANGES if c[0] in ("hooks", "dkms", "modules", "catalog", "fetch", "metrics")]
READS = [
    ("scan",),
    ("audit", "--offline"),
    ("doctor",),
    ("modules", "status"),
    ("modules", "check-boot"),
    ("hooks", "status"),
    ("userspace", "status"),
    ("dkms", "status"),
    ("backup", "list"),
    ("backup", "verify"),
    ("flash", "status"),
    ("flash", "history"),
    ("upgrade", "--check"),
    ("upgrade", "--dry-run"),
    ("catalog", "list"),
]


@pytest.mark.parametrize("argv", CHANGES, ids=lambda a: " ".join(a[:2]))
def test_every_change_refuses_a_snapshot_the_same_way(attack: CountingEnv, argv: tuple[str, ...]) -> None:
    r = attack("--snapshot", str(EXAMPLE_HOST), *argv)
    assert r.code == 2, r.stderr
    line = one_error_line(r)
    assert line.endswith("changes a machine: it cannot run on a --snapshot replay"), line
    assert r.stdout == ""  # nothing "installed", nothing "would write"


@pytest.mark.parametrize("argv", NEEDS_ROOT, ids=lambda a: " ".join(a[:2]))
def test_not_root_is_exit_3_before_any_write(attack: CountingEnv, tmp_path: Path, argv: tuple[str, ...]) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o755)
    os.chown(root, 0, 0)
    user = CountingEnv(euid=1000)
    r = user("--root", str(root), *argv)
    assert r.code == 3, r.stderr
    assert f"needs root: it writes under --root {root}" in one_error_line(r)
    assert "PermissionError" not in r.stderr and "rm: cannot remove" not in r.stdout + r.stderr
    assert list(root.iterdir()) == []
    r = user(*argv)  # and on this machine itself
    assert r.code == 3 and "needs root" in one_error_line(r)


def test_a_root_the_user_owns_is_a_test_tree(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    os.chown(root, 1000, 1000)
    r = CountingEnv(euid=1000)("--root", str(root), "hooks", "install")
    assert r.code == 0, r.stderr
    assert (root / "etc/kernel/postinst.d/fwman").is_file()


@pytest.mark.parametrize("argv", READS, ids=" ".join)
def test_read_commands_replay_on_the_bundled_rig(attack: CountingEnv, argv: tuple[str, ...]) -> None:
    r = attack("--snapshot", str(EXAMPLE_HOST), *argv)
    assert r.code in (0, 4), r.stderr  # 4: a verdict (doctor, check-boot), never a missing recording
    assert "did not record" not in r.stderr


#: what a read command on the H200 recording ends with when it is not 0: the VM it was captured in has no
#: /lib/modules (its module comes from the VM's host; fixtures/hosts/h200-1gpu/README.md), so check-boot has no
#: kernel to check and says so (exit 5, a missing file), as it did live
H200_NOT_ZERO = {("modules", "check-boot"): (5, "no installed kernel found under /lib/modules")}


@pytest.mark.parametrize("argv", READS, ids=" ".join)
def test_read_commands_replay_on_the_bundled_h200(argv: tuple[str, ...]) -> None:
    r = CountingEnv()("--snapshot", str(HOSTS / "h200-1gpu"), *argv)
    assert "did not record" not in r.stderr, (argv, r.stderr)
    code, message = H200_NOT_ZERO.get(argv, (0, ""))
    assert r.code == code, (argv, r.stderr)
    if message:
        assert message in one_error_line(r)
    else:
        assert r.stdout.strip(), argv  # a read command that exits 0 says something


@pytest.mark.skipif(not is_root(), reason="captures this machine: root")
@needs_tool("dkms", "dkms")
def test_a_fresh_capture_with_dkms_replays_every_read_command(attack: CountingEnv, tmp_path: Path) -> None:
    # rows 7 and 18: capture this machine (it has dkms installed, no NVIDIA GPU), replay every read command
    cap = tmp_path / "cap"
    r = attack("capture", str(cap))
    assert r.code == 0, r.stderr
    assert attack("capture", "--check", str(cap)).code == 0
    for argv in READS:
        r = attack("--snapshot", str(cap), *argv)
        assert "did not record" not in r.stderr, (argv, r.stderr)
        assert "no local filesystem" not in r.stdout + r.stderr, (argv, r.stderr)
        assert r.code in (0, 4, 5), (argv, r.stderr)  # 5 only for "no NVIDIA GPU" on this machine
        if r.code == 5:
            assert "no NVIDIA GPU" in r.stderr, (argv, r.stderr)
    r = attack("--snapshot", str(cap), "dkms", "status", "--json")
    assert r.code == 0 and "schema" in r.json()
