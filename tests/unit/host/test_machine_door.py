"""The door under ``--root``: which commands act on the machine itself (fwman.host.machine), and LiveHost
refusing them under a root unless the environment names a stand-in for the root's machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.errors import ExitCode
from fwman.host.actions import RunCommand, apply_all, pending
from fwman.host.live import LiveHost
from fwman.host.machine import ALWAYS, RootDoorError, acts_on_machine, reachable

ACTS = [
    ["nvidia-smi", "-i", "0000:01:00.0", "-pl", "280"],
    ["nvidia-smi", "--power-limit=280"],
    ["/usr/bin/nvidia-smi", "-pm", "1"],
    ["update-initramfs", "-u", "-k", "6.1.0-47-amd64"],
    ["dracut", "-f", "--kver", "6.1.0-47-amd64"],
    ["systemctl", "restart", "nvidia-persistenced"],
    ["systemctl", "--quiet", "daemon-reload"],
    ["modprobe", "nvidia"],
    ["rmmod", "nvidia_uvm"],
    ["nvflash", "--save", "x.rom"],
    ["mokutil", "--import", "key.der"],
    ["depmod", "-a", "6.1.0-47-amd64"],
    ["dkms", "install", "nvidia/570.86.16", "-k", "6.1.0-47-amd64"],
    ["grub-reboot", "1>2"],
    ["setpci", "-s", "00:01.1", "CAP_EXP+10.w=0040:0040"],
    # apt installs with this machine's dpkg whatever -o Dir= names (`driver move`'s user space)
    ["apt-get", "-o", "Dir=/r/", "install", "-y", "--allow-downgrades", "/r/var/lib/fwman/move/staged/debs/a.deb"],
    ["apt", "remove", "libnvidia-ml1"],
    ["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"],
    ["nvidia-ctk", "runtime", "configure", "--runtime=docker"],
]
READS = [
    ["nvidia-smi", "-q", "-x"],
    ["nvidia-smi", "--query-gpu=power.limit", "--format=csv"],
    ["systemctl", "is-active", "docker"],
    ["systemctl", "--root=/srv/r", "enable", "fwman-catchup.service"],
    ["mokutil", "--sb-state"],
    ["dkms", "status"],
    ["dkms", "remove", "nvidia/1", "--dkmstree=/r/var/lib/dkms", "--installtree=/r/lib/modules"],
    ["depmod", "-a", "-b", "/r", "6.1.0-47-amd64"],
    ["grub-set-default", "--boot-directory=/r/boot", "1>2"],
    ["setpci", "-s", "00:01.1", "CAP_EXP+10.w"],
    ["git", "ls-remote", "https://example.invalid/x"],
    ["apt-get", "-s", "-o", "Debug::NoLocking=1", "dist-upgrade"],
    ["apt-get", "-o", "Dir=/r/", "download", "libnvidia-ml1=575.51.02-1"],
    ["apt-get", "install", "--download-only", "libnvidia-ml1"],
    ["apt-get", "-o", "install", "update"],  # an option's value is not the verb
    ["nvidia-ctk", "cdi", "list"],
    [],
]


@pytest.mark.parametrize("argv", ACTS, ids=lambda a: " ".join(a))
def test_a_command_that_acts_on_the_machine_is_named(argv: list[str]) -> None:
    assert acts_on_machine(argv) is not None


@pytest.mark.parametrize("argv", READS, ids=lambda a: " ".join(a) or "empty")
def test_reads_and_commands_given_the_root_are_not(argv: list[str]) -> None:
    assert acts_on_machine(argv) is None


@given(st.lists(st.text(max_size=20), max_size=8))
def test_any_argv_gives_an_answer_and_the_always_tools_are_named_whatever_follows(argv: list[str]) -> None:
    what = acts_on_machine(argv)
    assert what is None or what.startswith("this machine")
    for tool in ALWAYS:
        assert acts_on_machine([tool, *argv]) == ALWAYS[tool]


def _recorder(bindir: Path, log: Path, tool: str) -> None:
    bindir.mkdir(exist_ok=True)
    (bindir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\n')
    (bindir / tool).chmod(0o755)


def test_under_a_root_the_machine_s_tool_is_refused_before_it_runs_and_a_named_stand_in_runs(tmp_path: Path) -> None:
    log, bindir = tmp_path / "log", tmp_path / "bin"
    _recorder(bindir, log, "update-initramfs")
    root = tmp_path / "root"
    root.mkdir()
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    argv = ["update-initramfs", "-u", "-k", "6.1.0-47-amd64"]
    host = LiveHost(str(root), env=env)
    with pytest.raises(RootDoorError, match=r"does not run `update-initramfs -u -k 6.1.0-47-amd64`.*/boot") as e:
        host.run(argv)
    assert e.value.exit_code == ExitCode.BLOCKED
    with pytest.raises(RootDoorError):
        host.start(argv)
    assert not log.exists() and not reachable(host, argv)
    # the machine itself runs it; a root whose environment names the stand-in runs that one
    assert LiveHost("/", env=env).run(argv).ok and log.read_text() == "update-initramfs -u -k 6.1.0-47-amd64\n"
    standin = LiveHost(str(root), env={"PATH": "/usr/bin:/bin"}, machine_tools=[str(bindir)])
    assert reachable(standin, argv) and standin.run(argv).ok
    assert log.read_text().count("update-initramfs") == 2


def test_actions_are_checked_at_the_door_before_any_is_applied_or_listed(tmp_path: Path) -> None:
    log, bindir = tmp_path / "log", tmp_path / "bin"
    _recorder(bindir, log, "modprobe")
    _recorder(bindir, log, "true-ish")
    root = tmp_path / "root"
    root.mkdir()
    host = LiveHost(str(root), env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    first = RunCommand(["true-ish"], lambda h: True)
    actions = [first, RunCommand(["modprobe", "nvidia"], lambda h: True)]
    with pytest.raises(RootDoorError, match="running kernel"):
        pending(host, actions)  # the dry run refuses as the run does
    with pytest.raises(RootDoorError):
        apply_all(host, actions)
    assert not log.exists() and first.results == []  # not even the harmless first one ran


def test_a_run_that_stops_says_what_was_done_and_what_was_not(tmp_path: Path) -> None:
    """apply_all stops at the failing action; its error keeps its type and says the done and the not-done steps."""
    from fwman.core.errors import HostChangeError
    from fwman.host.actions import WriteFile

    host = LiveHost(str(tmp_path))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("a directory where a file belongs")
    actions = [WriteFile("/a", b"1"), WriteFile("/b", b"2"), WriteFile("/c", b"3")]
    with pytest.raises(HostChangeError) as stopped:
        apply_all(host, actions)
    hint = stopped.value.hint or ""
    assert "done before it: write /a (1 bytes, mode 644)" in hint and "not done: write /c (1 bytes, mode 644)" in hint
    assert hint.endswith("(run it again to continue)") and (tmp_path / "a").read_text() == "1"


def test_a_run_nothing_may_stop_goes_on_past_a_failure_and_says_it(tmp_path: Path) -> None:
    """apply_each (a kernel removal's run): the failing action is a problem said as a warning, the next one is
    applied, and only the applied ones are returned; the door is checked before any of them runs."""
    from fwman.host.actions import WriteFile, apply_each

    host = LiveHost(str(tmp_path))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("a directory where a file belongs")
    (tmp_path / "c").write_text("3")
    said: list[str] = []
    actions = [WriteFile("/a", b"1"), WriteFile("/b", b"2"), WriteFile("/c", b"3"), WriteFile("/d", b"4")]
    applied, problems = apply_each(host, actions, said.append)
    assert [a.describe() for a in applied] == ["write /a (1 bytes, mode 644)", "write /d (1 bytes, mode 644)"]
    assert len(problems) == 1 and problems[0].startswith("write /b (1 bytes, mode 644): ")
    assert said == [f"WARNING: could not {problems[0]}"] and (tmp_path / "d").read_text() == "4"
    with pytest.raises(RootDoorError):  # checked first: not even the write before the side door is applied
        apply_each(host, [WriteFile("/e", b"5"), RunCommand(["modprobe", "nvidia"], lambda h: True)])
    assert not (tmp_path / "e").exists()
