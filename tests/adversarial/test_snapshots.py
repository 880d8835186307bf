"""Rows 2, 3 and 5 of issue 14, and what an attacker tries next: a snapshot is data, never a pointer.

Every test copies a bundled snapshot, makes one hostile change, replays a read command and asserts the exit
code, the one error line naming the entry, and that the bait file outside the snapshot never reached the output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST, HOSTS
from tests.support.errors import one_error_line

SECRET = "94.99.99.99.99 THE REAL MACHINE'S FILE"


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    """Return a private copy of the 4x3090 snapshot."""
    return Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap", symlinks=True))


@pytest.fixture
def bait(tmp_path: Path) -> Path:
    """Return a file outside the snapshot that a replay must never read."""
    path = tmp_path / "outside" / "version"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


def meta_of(snap: Path) -> dict[str, Any]:
    return json.loads((snap / "snapshot.json").read_text())  # type: ignore[no-any-return]


def write_meta(snap: Path, meta: object) -> None:
    (snap / "snapshot.json").write_text(json.dumps(meta))


# -- row 2: links on disk inside files/ ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "command"),
    [
        ("proc/driver/nvidia/version", ("audit", "--offline")),  # the file itself (row 2)
        ("sys/module/nvidia/version", ("audit", "--offline")),
        ("proc/cmdline", ("doctor",)),
        ("etc/os-release", ("audit", "--offline")),
    ],
)
def test_a_symlinked_file_under_files_is_refused(
    attack: CountingEnv, snap: Path, bait: Path, entry: str, command: tuple[str, ...]
) -> None:
    target = snap / "files" / entry
    if target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(bait)
    r = attack("--snapshot", str(snap), *command)
    assert r.code == 2, r.stderr
    line = one_error_line(r)
    assert f"unsafe snapshot {snap}: files/{entry} is a symbolic link (to {bait})" in line
    assert SECRET not in r.stdout + r.stderr


def test_a_symlinked_directory_under_files_is_refused(attack: CountingEnv, snap: Path, bait: Path) -> None:
    # the next thing to try: not the file, one of its directories (files/proc/driver -> somewhere else)
    victim = snap / "files/proc/driver"
    shutil.rmtree(victim)
    fake = bait.parent / "driver" / "nvidia"
    fake.mkdir(parents=True)
    (fake / "version").write_text(SECRET)
    victim.symlink_to(bait.parent / "driver")
    r = attack("--snapshot", str(snap), "audit", "--offline")
    assert r.code == 2
    assert "files/proc/driver is a symbolic link" in one_error_line(r)
    assert SECRET not in r.stdout + r.stderr


def test_files_itself_a_symlink_is_refused(attack: CountingEnv, snap: Path, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    shutil.move(snap / "files", real)
    (snap / "files").symlink_to(real)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    assert "files/ is a symbolic link" in one_error_line(r)


def test_snapshot_json_a_symlink_is_refused(attack: CountingEnv, snap: Path, tmp_path: Path) -> None:
    real = tmp_path / "meta.json"
    shutil.move(snap / "snapshot.json", real)
    (snap / "snapshot.json").symlink_to(real)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    assert "snapshot.json is a symbolic link" in one_error_line(r)


# -- row 3: command outputs that name a path ----------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["../../../../tmp/x", "/etc/passwd", "../snapshot.json", "sub/000.stdout", "..", ".", "-rf", "a\x00b"],
)
def test_a_command_output_outside_commands_is_refused(attack: CountingEnv, snap: Path, bait: Path, name: str) -> None:
    meta = meta_of(snap)
    smi = next(c for c in meta["commands"] if c["argv"][:3] == ["nvidia-smi", "-q", "-x"])
    smi["stdout"] = name if name != "../../../../tmp/x" else f"../../../../../../../../..{bait}"
    write_meta(snap, meta)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    line = one_error_line(r)
    assert "malformed snapshot" in line and "is not a file name under commands/" in line
    assert SECRET not in r.stdout + r.stderr


def test_a_command_output_that_is_a_symlink_is_refused(attack: CountingEnv, snap: Path, bait: Path) -> None:
    meta = meta_of(snap)
    smi = next(c for c in meta["commands"] if c["argv"][:3] == ["nvidia-smi", "-q", "-x"])
    out = snap / "commands" / smi["stdout"]
    out.unlink()
    out.symlink_to(bait)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    assert f"commands/{smi['stdout']} is a symbolic link (to {bait})" in one_error_line(r)
    assert SECRET not in r.stdout


def test_a_missing_command_output_is_one_line_exit_2(attack: CountingEnv, snap: Path) -> None:
    # row 5's FileNotFoundError
    meta = meta_of(snap)
    smi = next(c for c in meta["commands"] if c["argv"][:3] == ["nvidia-smi", "-q", "-x"])
    (snap / "commands" / smi["stdout"]).unlink()
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    index = meta["commands"].index(smi)
    assert f"commands[{index}] (nvidia-smi): commands/{smi['stdout']} is missing" in one_error_line(r)


# -- size: a stranger's sparse file is a few KB in a tar and gigabytes on disk --------------------------------
OVER = 16 * 1024 * 1024 + 1  # one byte more than a capture records (MAX_RECORDED_FILE)


def sparse(path: Path, size: int) -> None:
    """Make ``path`` a sparse file of ``size`` bytes (no disk used; a whole read would allocate them all)."""
    with path.open("r+b" if path.exists() else "wb") as f:
        f.truncate(size)


@pytest.mark.parametrize("size", [OVER, 3 << 30])
def test_a_recorded_file_larger_than_capture_records_is_refused_before_reading(
    attack: CountingEnv, snap: Path, size: int
) -> None:
    sparse(snap / "files/proc/cmdline", size)
    expected = f"files/proc/cmdline is {size} bytes, more than the 16777216 (16 MiB) a capture records"
    r = attack("capture", "--check", str(snap))
    assert r.code == 2, r.stdout
    assert expected in r.stdout and "well-formed" not in r.stdout
    r = attack("--snapshot", str(snap), "doctor")
    assert r.code == 2, r.stderr
    assert "unsafe snapshot" in one_error_line(r) and expected in r.stderr


def test_a_command_output_larger_than_capture_records_is_refused(attack: CountingEnv, snap: Path) -> None:
    meta = meta_of(snap)
    smi = next(c for c in meta["commands"] if c["argv"][:3] == ["nvidia-smi", "-q", "-x"])
    sparse(snap / "commands" / smi["stdout"], OVER)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2, r.stderr
    assert f"commands/{smi['stdout']} is {OVER} bytes, more than the 16777216" in one_error_line(r)


def test_a_snapshot_json_larger_than_a_snapshot_file_may_be_is_refused(attack: CountingEnv, snap: Path) -> None:
    sparse(snap / "snapshot.json", 3 << 30)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2, r.stderr
    assert f"snapshot.json is {3 << 30} bytes, more than the 16777216" in one_error_line(r)
    r = attack("capture", "--check", str(snap))
    assert r.code == 2 and f"snapshot.json is {3 << 30} bytes" in r.stdout


def test_a_file_the_tree_check_passed_is_still_read_at_most_the_cap(snap: Path) -> None:
    # check_tree ran when the replay opened; a file that grows after it is refused at the read, never read whole
    from fwman.host.snapshot import SnapshotHost
    from fwman.host.snapshot_check import SnapshotFormatError

    replay = SnapshotHost(snap)
    sparse(snap / "files/proc/cmdline", 3 << 30)
    with pytest.raises(SnapshotFormatError, match=r"files/proc/cmdline is 3221225472 bytes"):
        replay.read_bytes("/proc/cmdline")
    with pytest.raises(SnapshotFormatError, match=r"files/proc/cmdline is 3221225472 bytes"):
        replay.read_bytes("/proc/cmdline", limit=64)  # even a bounded read: the file is not what capture wrote


# -- row 5 and the next tries: references in snapshot.json ----------------------------------------------------
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda m: [1, 2, 3], "the top level is a list, not an object"),
        (lambda m: "x", "the top level is a str, not an object"),
        (lambda m: {**m, "links": [1, 2]}, "links is a list, not an object"),
        (lambda m: {**m, "dirs": "x"}, "dirs is a str, not an object"),
        (lambda m: {**m, "absent": {"a": 1}}, "absent is a dict, not a list"),
        (lambda m: {**m, "commands": {}}, "commands is a dict, not a list"),
        (lambda m: {**m, "commands": [1]}, "commands[0] is a int, not an object"),
        (lambda m: {**m, "commands": [{"rc": 0}]}, "commands[0]: argv is not a non-empty list of strings"),
        (lambda m: {**m, "sizes": {"/x": "big"}}, "sizes /x: 'big' is not a size in bytes"),
        (lambda m: {**m, "sizes": {"/x": -1}}, "sizes /x: -1 is not a size in bytes"),
        (lambda m: {**m, "links": {"relative/x": "/y"}}, "links entry 'relative/x' is not an absolute path"),
        (lambda m: {**m, "links": {"/a/../../etc": "/y"}}, "links entry '/a/../../etc' contains '.' or '..'"),
        (lambda m: {**m, "dirs": {"/etc": ["../../x"]}}, "dirs /etc: the listing is not a list of plain names"),
        (lambda m: {**m, "absent": ["/x/./y"]}, "absent entry '/x/./y' contains '.' or '..'"),
        (lambda m: {**m, "links": {"/sys/x": 5}}, "link /sys/x: target 5 is not a path"),
        (
            lambda m: {**m, "links": {"/sys/x": "../../../../../etc"}},
            "link /sys/x -> ../../../../../etc leaves the snapshot (climbs above /)",
        ),
        (lambda m: {**m, "tools": {"git": 3}}, "tools 'git': expected a path or null"),
        (lambda m: {**m, "overlay": ["/x"]}, "overlay is a list, not an object"),
        (lambda m: {**m, "overlay": {"/x": "gone"}}, "overlay /x: 'gone' is not one of whiteout, opaque"),
        (lambda m: {**m, "overlay": {"x": "whiteout"}}, "overlay entry 'x' is not an absolute path"),
        (lambda m: {**m, "format": "other"}, "format is 'other', not 'fwman-snapshot'"),
        (lambda m: {**m, "version": "1"}, "version '1' is not supported"),
    ],
)
def test_malformed_snapshot_json_is_one_line_exit_2(
    attack: CountingEnv, snap: Path, change: Any, expected: str
) -> None:
    write_meta(snap, change(meta_of(snap)))
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2, r.stderr
    assert expected in one_error_line(r)
    check = attack("capture", "--check", str(snap))
    assert check.code == 2 and expected in check.stdout


def test_snapshot_json_that_is_not_json(attack: CountingEnv, snap: Path) -> None:
    (snap / "snapshot.json").write_bytes(b"\xff{{{")
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2
    assert "unreadable snapshot" in one_error_line(r)


def test_capture_check_passes_both_bundled_hosts_and_lists_every_problem(attack: CountingEnv, snap: Path) -> None:
    for host in ("rig-4x3090", "h200-1gpu"):
        r = attack("capture", "--check", str(HOSTS / host))
        assert r.code == 0 and "well-formed snapshot" in r.stdout
        counts = attack("capture", "--check", str(HOSTS / host), "--json").json()["counts"]
        assert f"({counts['commands']} commands, {counts['links']} links, {counts['listings']} listings)" in r.stdout
    meta = meta_of(snap)
    meta["links"]["/sys/evil"] = "../../../../.."
    meta["commands"][0]["stdout"] = "../x"
    write_meta(snap, meta)
    (snap / "files/etc/os-release").unlink()
    (snap / "files/etc/os-release").symlink_to("/etc/os-release")
    r = attack("capture", "--check", str(snap), "--json")
    assert r.code == 2
    problems = r.json()["problems"]
    assert any("link /sys/evil" in p for p in problems) and any("'../x'" in p for p in problems)
    # the on-disk walk only runs on a well-formed snapshot.json: fix it and the link on disk is reported
    meta["links"].pop("/sys/evil")
    meta["commands"][0]["stdout"] = "000.stdout" if (snap / "commands/000.stdout").exists() else None
    write_meta(snap, meta)
    r = attack("capture", "--check", str(snap))
    assert r.code == 2
    assert "files/etc/os-release is a symbolic link (to /etc/os-release)" in r.stdout


# -- hypothesis: any JSON shape is a replay or one line with a documented code ------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "/", "..", "/etc", "../x", "-", "a"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["/x", "a", "argv", ".."]), inner),
    max_leaves=8,
)
KEYS = ["links", "dirs", "absent", "sizes", "tools", "commands", "format", "version"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(KEYS), value=json_values)
def test_any_shape_of_any_key_is_never_a_traceback(attack: CountingEnv, tmp_path: Path, key: str, value: Any) -> None:
    snap = tmp_path / "h"
    if not snap.exists():
        shutil.copytree(EXAMPLE_HOST, snap)
    original = (EXAMPLE_HOST / "snapshot.json").read_text()
    meta = json.loads(original)
    meta[key] = value
    write_meta(snap, meta)
    r = attack("--snapshot", str(snap), "scan", "--json")
    assert r.code in (0, 2, 4, 5), r.stderr
    if r.code:
        one_error_line(r)
    write_meta(snap, json.loads(original))


@settings(max_examples=100, deadline=None)
@given(top=json_values)
def test_any_top_level_is_a_shape_problem_or_accepted(top: Any) -> None:
    from fwman.host.snapshot_check import check_meta

    tried()
    problems = check_meta(top)
    assert isinstance(problems, list) and all(isinstance(p, str) and "\n" not in p for p in problems)
    if not isinstance(top, dict):
        assert problems


@settings(max_examples=300, deadline=None)
@given(
    path=st.lists(st.sampled_from(["sys", "a", "b", "..", "."]), min_size=1, max_size=5).map(
        lambda p: "/" + "/".join(p)
    ),
    target=st.lists(st.sampled_from(["..", ".", "x", "", "etc"]), min_size=1, max_size=8).map("/".join),
)
def test_link_shapes_never_resolve_above_the_top(path: str, target: str) -> None:
    # a link kept by the validator never climbs above /; one that does is named as leaving the snapshot
    from fwman.host.base import resolve_links
    from fwman.host.snapshot_check import check_meta, link_leaves_root

    tried()
    problems = check_meta({"format": "fwman-snapshot", "version": 1, "links": {path: target}})
    if ".." in path.split("/") or "." in path.split("/"):
        assert problems
        return
    if link_leaves_root(path, target):
        assert any("leaves the snapshot" in p for p in problems)
    elif target:
        assert not problems
        resolved = resolve_links(path + "/z", {path: target}.get)
        assert resolved.startswith("/") and ".." not in resolved.split("/")
