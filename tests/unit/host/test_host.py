"""The Host door: LiveHost maps paths under its root; SnapshotHost replays and never falls back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from fixtures.hostgen.rig import build_rig, rig_4x3090
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, UsageError
from fwman.host.base import CommandResult, UnsafeRemovalError
from fwman.host.live import LiveHost
from fwman.host.recording import RecordingHost, Redactor, SnapshotWriter
from fwman.host.snapshot import SnapshotHost
from tests.support.env import EXAMPLE_HOST


def test_live_host_maps_paths_and_links_inside_root(tmp_path: Path) -> None:
    (tmp_path / "usr/src/linux-headers-6.1").mkdir(parents=True)
    (tmp_path / "usr/src/linux-headers-6.1/Makefile").write_text("# kbuild\n")
    (tmp_path / "lib/modules/6.1").mkdir(parents=True)
    # an absolute link target must resolve inside the root, as in a chroot, not on the real machine
    os.symlink("/usr/src/linux-headers-6.1", tmp_path / "lib/modules/6.1/build")
    host = LiveHost(str(tmp_path))
    assert host.read_text("/lib/modules/6.1/build/Makefile") == "# kbuild\n"
    assert host.realpath("/lib/modules/6.1/build") == "/usr/src/linux-headers-6.1"
    assert host.is_link("/lib/modules/6.1/build")
    assert host.readlink("/lib/modules/6.1/build") == "/usr/src/linux-headers-6.1"
    assert host.local_path("/lib/modules/6.1/build/Makefile") == str(tmp_path / "usr/src/linux-headers-6.1/Makefile")
    assert not host.exists("/etc/passwd")  # the real /etc/passwd is not visible under the root


def test_live_host_writes_atomically_and_journals(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    host.write_bytes("/var/lib/fwman/state.json", b"{}", mode=0o600)
    path = tmp_path / "var/lib/fwman/state.json"
    assert path.read_bytes() == b"{}"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [f.name for f in (tmp_path / "var/lib/fwman").iterdir()] == ["state.json"]  # no temp file left
    assert host.journal[-1].action == "write" and host.journal[-1].path == "/var/lib/fwman/state.json"


def test_live_host_reports_missing_tools_without_raising(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env={"PATH": str(tmp_path)})
    result = host.run(["definitely-not-installed-tool", "--version"])
    assert result.missing and result.rc == 127 and not result.ok


def test_live_host_read_errors_are_missing_errors(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    with pytest.raises(MissingError, match="/no/such/file"):
        host.read_bytes("/no/such/file")


def test_live_host_reads_only_regular_files_and_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    # a FIFO unpacked from a hostile archive made open() block forever; a device node would be read raw
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_bytes(b"ok")
    os.symlink("file", tmp_path / "link")
    host = LiveHost(str(tmp_path))
    for name in ("fifo", "dir"):
        with pytest.raises(MissingError, match=f"cannot read /{name}: not a regular file"):
            host.read_bytes(f"/{name}")
    assert host.read_bytes("/file") == b"ok" and host.read_bytes("/link", limit=1) == b"o"
    with pytest.raises(MissingError, match="cannot read /dev/zero: not a regular file"):
        LiveHost("/").read_bytes("/dev/zero", limit=16)


def _write_small_snapshot(tmp_path: Path) -> SnapshotHost:
    w = SnapshotWriter(redact=False)
    w.add_file("/proc/cmdline", "quiet\n")
    w.add_dir("/etc/pve/lxc", ["101.conf"])
    w.add_file("/etc/pve/lxc/101.conf", "arch: amd64\n")
    w.add_absent("/etc/fwman")
    w.add_link("/lib", "usr/lib")
    w.add_file("/usr/lib/os-release", "ID=debian\n")
    w.add_tool("nvidia-smi", "/usr/bin/nvidia-smi")
    w.add_tool("nvflash", None)
    w.add_command(CommandResult(("uname", "-r"), 0, "6.8.12-4-pve\n", ""))
    return SnapshotHost(w.write(tmp_path / "snap"))


def test_snapshot_replays_what_was_recorded(tmp_path: Path) -> None:
    host = _write_small_snapshot(tmp_path)
    assert host.read_text("/proc/cmdline") == "quiet\n"
    assert host.read_text("/lib/os-release") == "ID=debian\n"  # through the recorded /lib -> usr/lib link
    assert host.listdir("/etc/pve/lxc") == ["101.conf"]
    assert host.run(["uname", "-r"]).stdout == "6.8.12-4-pve\n"
    assert host.which("nvidia-smi") == "/usr/bin/nvidia-smi"
    assert host.which("nvflash") is None
    assert not host.exists("/etc/fwman/config.toml")  # below a path recorded as absent
    assert not host.exists("/etc/pve/lxc/102.conf")  # not in a complete listing


def test_snapshot_never_falls_back_to_the_real_machine(tmp_path: Path) -> None:
    host = _write_small_snapshot(tmp_path)
    with pytest.raises(NotRecordedError, match="/etc/hostname"):
        host.read_bytes("/etc/hostname")
    with pytest.raises(NotRecordedError, match="nvidia-smi topo -m"):
        host.run(["nvidia-smi", "topo", "-m"])
    with pytest.raises(NotRecordedError, match="'git'"):
        host.which("git")


def test_snapshot_writes_are_journaled_not_written(tmp_path: Path) -> None:
    host = _write_small_snapshot(tmp_path)
    before = sorted(p.name for p in (tmp_path / "snap/files").rglob("*"))
    host.write_bytes("/var/lib/fwman/x.json", b"1")
    assert host.read_bytes("/var/lib/fwman/x.json") == b"1"  # later reads in the same replay see it
    assert [(j.action, j.path) for j in host.journal] == [("write", "/var/lib/fwman/x.json")]
    assert sorted(p.name for p in (tmp_path / "snap/files").rglob("*")) == before


def test_snapshot_rejects_foreign_and_future_formats(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with pytest.raises(UsageError, match=r"no snapshot\.json"):
        SnapshotHost(tmp_path / "a")
    (tmp_path / "a/snapshot.json").write_text('{"format": "fwman-snapshot", "version": 99}')
    with pytest.raises(UsageError, match="version 99 is not supported"):
        SnapshotHost(tmp_path / "a")


def test_writer_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x/keep").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        SnapshotWriter().write(tmp_path / "x")
    assert (tmp_path / "x/keep").read_text() == "mine"


def test_redactor_replaces_uuids_stably_and_serials() -> None:
    r = Redactor()
    text = (
        "<uuid>GPU-6a3a35d2-1f55-1b5b-8d3c-7e0d7d3c1c11</uuid><serial>1652321012345</serial>\n"
        "GPU UUID: \t GPU-6a3a35d2-1f55-1b5b-8d3c-7e0d7d3c1c11\n"
        "GPU-ffffffff-1f55-1b5b-8d3c-7e0d7d3c1c11\n\t\t[SN] Serial number: 1324521000000\n"
    )
    out = r.text(text)
    assert "6a3a35d2" not in out and "1652321012345" not in out and "1324521000000" not in out
    assert out.count("GPU-00000000-0000-0000-0000-000000000001") == 2  # same GPU, same placeholder
    assert "GPU-00000000-0000-0000-0000-000000000002" in out
    assert "<serial>REDACTED</serial>" in out


def test_example_host_is_generated_by_its_builder(tmp_path: Path) -> None:
    """The committed example host is exactly what fixtures/hostgen builds (no hand edits, no drift)."""
    from fixtures.hostgen.rig import CAPTURED_AT, NOTE

    build_rig(rig_4x3090(), note=NOTE).write(tmp_path / "rig", captured_at=CAPTURED_AT)
    generated = {p.relative_to(tmp_path / "rig"): p.read_bytes() for p in (tmp_path / "rig").rglob("*") if p.is_file()}
    committed = {
        p.relative_to(EXAMPLE_HOST): p.read_bytes()
        for p in EXAMPLE_HOST.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert generated.keys() == committed.keys()
    assert [k for k in generated if generated[k] != committed[k]] == []


def test_interactive_tools_never_run_on_a_replay_or_a_recording(tmp_path: Path) -> None:
    host = _write_small_snapshot(tmp_path)
    with pytest.raises(UsageError, match=r"does not run interactive tools: nvflash -i 0 new\.rom"):
        host.run_interactive(["nvflash", "-i", "0", "new.rom"], answers=[("Press 'y'", "y")])
    from fwman.host.recording import RecordingHost

    rec = RecordingHost(LiveHost(str(tmp_path)), SnapshotWriter())
    with pytest.raises(UsageError, match="read-only"):
        rec.run_interactive(["nvflash", "-i", "0", "new.rom"], answers=[])


def test_live_interactive_run_answers_the_prompt_on_a_terminal(tmp_path: Path) -> None:
    script = tmp_path / "ask"
    script.write_text(
        "#!/bin/sh\n[ -t 0 ] || { echo 'not a terminal'; exit 3; }\n"
        'printf "Press \'y\' to confirm: "; read answer; echo "got $answer"\n'
    )
    script.chmod(0o755)
    host = LiveHost(str(tmp_path))
    seen: list[str] = []
    # `read` wants a whole line (nvflash takes a single key, so fwman types just "y" there)
    result = host.run_interactive(
        [str(script)], answers=[("Press 'y' to confirm:", "y\n")], on_output=seen.append, timeout=30
    )
    assert result.rc == 0 and "got y" in result.output and "got y" in "".join(seen)
    assert host.journal[-1].action == "run"


def test_recording_keeps_large_files_by_size_and_runs_a_repeated_command_once(tmp_path: Path) -> None:
    from fwman.host.recording import RecordingHost

    root = tmp_path / "root"
    (root / "lib/modules/6.1/updates").mkdir(parents=True)
    big = root / "lib/modules/6.1/updates/nvidia.ko"
    big.write_bytes(b"\x7fELF" + b"\0" * 2000)
    (root / "small").write_text("ok\n")
    counter = tmp_path / "ran"
    tool = root / "count"
    tool.write_text(f"#!/bin/sh\necho x >> {counter}\necho out\n")
    tool.chmod(0o755)
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(root)), writer, max_file_bytes=1000)
    assert rec.stat_size("/lib/modules/6.1/updates/nvidia.ko") == 2004
    assert len(rec.read_bytes("/lib/modules/6.1/updates/nvidia.ko")) == 2004  # the live reader gets all of it
    assert rec.read_text("/small") == "ok\n"
    assert rec.run([str(tool)]).stdout == "out\n" and rec.run([str(tool)]).stdout == "out\n"
    assert counter.read_text() == "x\n"  # one moment: the repeat was answered from the recording
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    assert replay.stat_size("/lib/modules/6.1/updates/nvidia.ko") == 2004
    assert replay.exists("/lib/modules/6.1/updates/nvidia.ko")
    with pytest.raises(NotRecordedError, match=r"recorded only the size of .*nvidia\.ko \(2004 bytes\)"):
        replay.read_bytes("/lib/modules/6.1/updates/nvidia.ko")
    assert replay.read_text("/small") == "ok\n"
    assert not (tmp_path / "snap/files/lib/modules/6.1/updates/nvidia.ko").exists()


def test_recording_a_look_at_a_file_lets_the_replay_answer_the_same(tmp_path: Path) -> None:
    from fwman.host.recording import RecordingHost

    root = tmp_path / "root"
    (root / "lib/modules/6.1/kernel").mkdir(parents=True)
    (root / "lib/modules/6.1/modules.dep").write_text("kernel/a.ko:\n")
    (root / "lib/modules/6.1/modules.alias").write_text("alias x a\n")
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(root)), writer)
    assert rec.listdir("/lib/modules/6.1") == ["kernel", "modules.alias", "modules.dep"]
    assert rec.is_dir("/lib/modules/6.1/modules.dep") is False  # the module walk's question
    assert rec.exists("/lib/modules/6.1/modules.alias") is True
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    assert replay.is_dir("/lib/modules/6.1/modules.dep") is False
    assert replay.exists("/lib/modules/6.1/modules.dep") and replay.exists("/lib/modules/6.1/modules.alias")
    assert replay.is_dir("/lib/modules/6.1/modules.alias") is False
    assert replay.stat_size("/lib/modules/6.1/modules.dep") == len("kernel/a.ko:\n")
    # a look is not a read: the contents stay out of the snapshot
    assert not (tmp_path / "snap/files/lib/modules/6.1/modules.dep").exists()


def test_recording_leaves_out_a_command_whose_output_a_replay_would_refuse(tmp_path: Path) -> None:
    from fwman.host.recording import RecordingHost

    root = tmp_path / "root"
    root.mkdir()
    tool = root / "chatty"
    tool.write_text("#!/bin/sh\nhead -c 3000 /dev/zero | tr '\\0' x\n")
    tool.chmod(0o755)
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(root)), writer, max_file_bytes=1000)
    assert len(rec.run([str(tool)]).stdout) == 3000  # the live reader gets all of it
    assert rec.run(["true"]).rc == 0
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    with pytest.raises(NotRecordedError, match="did not record the command"):
        replay.run([str(tool)])
    assert replay.run(["true"]).rc == 0


def test_a_replay_reads_at_most_the_limit_and_sizes_without_reading(tmp_path: Path) -> None:
    import shutil

    snap = Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap"))
    cmdline = snap / "files/proc/cmdline"
    whole = cmdline.read_bytes()
    replay = SnapshotHost(snap)
    assert replay.read_bytes("/proc/cmdline", limit=4) == whole[:4]
    assert replay.read_bytes("/proc/cmdline") == whole
    assert replay.stat_size("/proc/cmdline") == len(whole)


def test_live_remove_tree_removes_the_tree_and_nothing_a_link_points_at(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "var/cache/x/a/b").mkdir(parents=True)
    (root / "var/cache/x/a/b/f").write_text("1")
    outside.mkdir()
    (outside / "keep").write_text("kept")
    (root / "var/cache/x/link").symlink_to(outside)  # a link inside: removed, never followed
    (root / "var/cache/y").symlink_to(outside)  # the tree named is itself a link: the link goes
    host = LiveHost(str(root))
    host.remove_tree("/var/cache/x")
    host.remove_tree("/var/cache/y")
    host.remove_tree("/var/cache/never-there")  # absent is fine
    assert not (root / "var/cache/x").exists() and not (root / "var/cache/y").is_symlink()
    assert (outside / "keep").read_text() == "kept"
    assert [(j.action, j.path) for j in host.journal][:2] == [
        ("remove_tree", "/var/cache/x"),
        ("remove_tree", "/var/cache/y"),
    ]
    with pytest.raises(FwmanError, match="refusing"):
        host.remove_tree("/")
    assert root.is_dir()


DANGEROUS = ["", "   ", "var/cache", "./etc", "/", "//", "///", "/./", "/..", "/var/..", "//etc/.."]


@pytest.mark.parametrize("path", DANGEROUS)
def test_no_host_removes_the_root_an_empty_or_a_relative_path(tmp_path: Path, path: str) -> None:
    # "//" is the trap: posixpath.normpath keeps a leading "//", and rmtree("//") is the whole machine
    root = tmp_path / "root"
    (root / "var/cache").mkdir(parents=True)
    (root / "etc").mkdir()
    live, replay = LiveHost(str(root)), _write_small_snapshot(tmp_path)
    for host in (live, replay):
        with pytest.raises(UnsafeRemovalError, match="refusing to remove"):
            host.remove_tree(path)
        assert not [j for j in host.journal if j.action == "remove_tree"]
    assert (root / "var/cache").is_dir() and (root / "etc").is_dir()
    assert replay.exists("/etc/pve")


def test_snapshot_remove_tree_is_journaled_and_reads_as_absent(tmp_path: Path) -> None:
    host = _write_small_snapshot(tmp_path)
    host.write_bytes("/var/cache/fwman/src/a/f", b"1")
    host.remove_tree("/etc/pve")
    host.remove_tree("/var/cache/fwman/src")
    assert not host.exists("/etc/pve/lxc/101.conf") and not host.exists("/etc/pve")
    assert not host.exists("/var/cache/fwman/src/a/f")
    assert ("remove_tree", "/etc/pve") in [(j.action, j.path) for j in host.journal]
    assert (tmp_path / "snap/files/etc/pve/lxc/101.conf").is_file()  # the snapshot on disk is untouched


def test_overlay_markers_are_recorded_by_a_capture_and_replayed(tmp_path: Path) -> None:
    # user.overlay.opaque: the attribute a rootless engine's overlay (mounted with userxattr) reads; any owner may
    # set a user.* attribute, so this runs without root (the 0/0 whiteout device: tests/system)
    tree = tmp_path / "tree"
    (tree / "layer/usr/lib").mkdir(parents=True)
    (tree / "layer/usr/share").mkdir()
    try:
        os.setxattr(tree / "layer/usr/lib", "user.overlay.opaque", b"y")
    except OSError as e:
        pytest.skip(f"this filesystem keeps no user.* extended attributes: {e.strerror}")
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(tree)), writer)
    assert rec.overlay_marker("/layer/usr/lib") == "opaque"
    assert rec.overlay_marker("/layer/usr/share") is None
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    assert replay.overlay_marker("/layer/usr/lib") == "opaque"
    assert replay.overlay_marker("/layer/usr/share") is None and replay.overlay_marker("/elsewhere") is None


def test_live_host_reads_a_record_device_without_waiting_for_more(tmp_path: Path) -> None:
    from itertools import pairwise

    from fwman.p2p.kmsg import parse_kmsg

    live = LiveHost("/")
    assert live.read_records("/dev/null") == b""  # a device with nothing to give: at once, no wait
    assert live.read_records("/dev/zero", limit=100) == b"\0" * 100  # a device that never stops: bounded
    # the kernel's own buffer: either its records (root, or kernel.dmesg_restrict=0) or a MissingError; never a
    # read that waits for the next record (O_NONBLOCK: EAGAIN ends it)
    try:
        data = live.read_records("/dev/kmsg")
    except MissingError as e:
        assert "cannot read /dev/kmsg" in e.message
    else:
        records = parse_kmsg(data)
        assert records and all(a.seq < b.seq for a, b in pairwise(records))
    # under a root: a regular file is its bytes, a FIFO is refused (a FIFO is no record device)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_bytes(b"6,1,2,-;hello\n")
    os.mkfifo(tmp_path / "dev/fifo")
    host = LiveHost(str(tmp_path))
    assert host.read_records("/dev/kmsg") == b"6,1,2,-;hello\n"
    with pytest.raises(MissingError, match="cannot read /dev/fifo: not a character device"):
        host.read_records("/dev/fifo")
    with pytest.raises(MissingError, match="cannot read /dev/none"):
        host.read_records("/dev/none")


def test_a_recorded_record_device_is_replayed_from_the_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    (root / "dev/kmsg").write_bytes(b"4,7,1000,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n")
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(root)), writer)
    data = rec.read_records("/dev/kmsg")
    with pytest.raises(MissingError):
        rec.read_records("/dev/absent")
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    assert replay.read_records("/dev/kmsg") == data
    with pytest.raises(MissingError, match="not present on the recorded host"):
        replay.read_records("/dev/absent")
    with pytest.raises(NotRecordedError):
        replay.read_records("/dev/other")


def test_live_start_runs_while_the_caller_works_and_never_blocks_on_a_long_answer(tmp_path: Path) -> None:
    # 1 MiB of output is far more than a pipe holds: written to a pipe, the tool would wait for a reader and
    # never exit; fwman's started command must finish on its own while fwman reads other things
    tool = tmp_path / "chatty"
    tool.write_text("#!/bin/sh\nhead -c 1048576 /dev/zero | tr '\\0' x\necho done >&2\nexit 3\n")
    tool.chmod(0o755)
    host = LiveHost(str(tmp_path))
    pending = host.start([str(tool)])
    for _ in range(600):  # at most 30 s on a busy machine
        if pending.done():
            break
        time.sleep(0.05)
    assert pending.done(), "the command did not finish without a reader"
    result = pending.result()
    assert (result.rc, len(result.stdout), result.stderr) == (3, 1048576, "done\n")
    assert result == host.run([str(tool)])  # the same answer run() gives
    assert pending.result() is result  # waited for once


def test_live_start_of_a_missing_tool_and_a_hung_one(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env={"PATH": str(tmp_path)})
    missing = host.start(["no-such-tool", "ps"])
    assert missing.done() and missing.result().missing and missing.result().rc == 127
    hung = tmp_path / "hung"
    hung.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    hung.chmod(0o755)
    pending = host.start([str(hung)], timeout=0.5)
    for _ in range(2):  # asked again, the same answer (the command is gone, its output files closed)
        with pytest.raises(FwmanError, match=r"command timed out after 0\.5s: .*hung"):
            pending.result()


@pytest.mark.parametrize("how", ["run", "start"])
def test_ctrl_c_while_waiting_kills_the_command_and_its_children(tmp_path: Path, how: str) -> None:
    # the tool starts a child of its own and waits: Ctrl-C in fwman must end both, not leave them running
    pids = tmp_path / "pids"
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\n/bin/sleep 30 &\necho $$ $! > {pids}\nwait\n")
    tool.chmod(0o755)
    host = LiveHost(str(tmp_path))

    def interrupt(signum: int, frame: object) -> None:
        if not pids.exists() or not pids.read_text().endswith("\n"):  # not started yet (a busy machine): soon again
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            return
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            if how == "run":
                host.run([str(tool)], timeout=20)
            else:
                host.start([str(tool)], timeout=20).result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    shell, child = (int(p) for p in pids.read_text().split())
    for _ in range(100):  # the orphaned child is reaped by init a moment after the kill
        if not any(Path(f"/proc/{p}").exists() for p in (shell, child)):
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists(), "the command's child went on running after Ctrl-C"
    assert not Path(f"/proc/{shell}").exists(), "the command went on running after Ctrl-C"


def test_started_commands_are_recorded_and_replayed_like_run(tmp_path: Path) -> None:
    from fwman.host.recording import RecordingHost

    root = tmp_path / "root"
    root.mkdir()
    counter = tmp_path / "ran"
    tool = root / "count"
    tool.write_text(f"#!/bin/sh\necho x >> {counter}\necho out\n")
    tool.chmod(0o755)
    writer = SnapshotWriter(redact=False)
    rec = RecordingHost(LiveHost(str(root)), writer)
    assert rec.start([str(tool), "a"]).result().stdout == "out\n"
    assert rec.start([str(tool), "a"]).result().stdout == "out\n"  # answered from the recording
    assert counter.read_text() == "x\n"
    replay = SnapshotHost(writer.write(tmp_path / "snap"))
    assert replay.start([str(tool), "a"]).result() == CommandResult((str(tool), "a"), 0, "out\n", "")
    unrecorded = replay.start([str(tool), "b"])  # starting never raises; waiting says what was not recorded
    with pytest.raises(NotRecordedError, match="did not record the command"):
        unrecorded.result()


def test_live_root_forgets_the_directories_it_has_seen_on_a_change_or_a_command(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "layer/usr/lib").mkdir(parents=True)
    (root / "other/usr/lib").mkdir(parents=True)
    (root / "other/usr/lib/libcuda.so.1").write_text("x")
    host = LiveHost(str(root))
    assert host.listdir("/layer/usr/lib") == []  # /layer, /layer/usr, /layer/usr/lib seen as plain directories
    host.remove_tree("/layer/usr")
    host.symlink("/other/usr", "/layer/usr")  # through the host: the next resolution follows the new link
    assert host.realpath("/layer/usr/lib") == "/other/usr/lib"
    assert host.listdir("/layer/usr/lib") == ["libcuda.so.1"]
    host.remove_tree("/layer/usr")
    (root / "layer/usr/lib").mkdir(parents=True)
    assert host.listdir("/layer/usr/lib") == []
    tool = root / "relink"  # a command may change the tree too
    tool.write_text(f"#!/bin/sh\nrm -r {root}/layer/usr && ln -s /other/usr {root}/layer/usr\n")
    tool.chmod(0o755)
    assert host.run([str(tool)]).rc == 0
    assert host.listdir("/layer/usr/lib") == ["libcuda.so.1"]
