"""`dkms status` parsing (2.x and 3.x formats) and fwman dkms block/unblock on a temp root with the real dkms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver import dkms
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools


def test_both_status_formats() -> None:
    text = (
        "nvidia/590.48.01, 6.18.9+deb14-amd64, x86_64: built\n"
        "nvidia/590.48.01, 6.18.10+deb14-amd64, x86_64: installed (original_module exists)\n"
        "nvidia/590.48.01: added\n"
        "nvidia, 396.45, 4.17.14-202.fc28.x86_64, x86_64: installed\n"
        "nvidia-current, 525.147.05: added\n"
        "Warning: something dkms says\n"
        "zfs/2.1.11, 6.1.0-50-amd64, x86_64: installed\n"
    )
    entries = dkms.parse_status(text)
    assert [(e.module, e.version, e.kernel, e.state) for e in entries] == [
        ("nvidia", "590.48.01", "6.18.9+deb14-amd64", "built"),
        ("nvidia", "590.48.01", "6.18.10+deb14-amd64", "installed (original_module exists)"),
        ("nvidia", "590.48.01", None, "added"),
        ("nvidia", "396.45", "4.17.14-202.fc28.x86_64", "installed"),
        ("nvidia-current", "525.147.05", None, "added"),
        ("zfs", "2.1.11", "6.1.0-50-amd64", "installed"),
    ]
    assert [e.installed for e in entries] == [False, True, False, True, False, True]
    assert [dkms.is_nvidia(e) for e in entries] == [True, True, True, True, True, False]
    with pytest.raises(ParseError) as info:
        dkms.parse_status("nvidia/1.0: added\nthis is not a status line\n")
    assert info.value.offset == 2


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_status_parser_gives_entries_or_a_parse_error(text: str) -> None:
    try:
        entries = dkms.parse_status(text)
    except ParseError as e:
        assert e.offset is not None
        return
    assert all(e.module and e.version and e.state for e in entries)


def test_dkms_is_pointed_at_a_temp_root(tmp_path: Path) -> None:
    argv = dkms.dkms_argv(LiveHost(str(tmp_path)), "status")
    assert argv == [
        "dkms",
        "status",
        f"--dkmstree={tmp_path}/var/lib/dkms",
        f"--sourcetree={tmp_path}/usr/src",
        f"--installtree={tmp_path}/lib/modules",
        "--no-depmod",
    ]
    assert dkms.dkms_argv(LiveHost("/"), "status") == ["dkms", "status"]


def test_block_and_unblock_with_nothing_registered(tmp_path: Path) -> None:
    require_tools("dkms")
    (tmp_path / "var/lib/dkms").mkdir(parents=True)
    run = FwmanEnv()
    dry = run("dkms", "block", "--dry-run", "--root", str(tmp_path))
    assert dry.code == 0 and "would write /etc/apt/preferences.d/fwman-nvidia-dkms" in dry.stdout
    assert not (tmp_path / "etc/apt/preferences.d/fwman-nvidia-dkms").exists()
    assert run("dkms", "block", "--root", str(tmp_path)).code == 0
    record = json.loads((tmp_path / "var/lib/fwman/dkms-block.json").read_text())
    assert record["removed"] == [] and record["apt_pin"] == "/etc/apt/preferences.d/fwman-nvidia-dkms"
    status = run("dkms", "status", "--json", "--root", str(tmp_path)).json()
    assert status["schema"] == "fwman.dkms-status/1" and status["blocked"] is True and status["modules"] == []
    again = run("dkms", "block", "--root", str(tmp_path))
    assert again.stdout.strip() == "DKMS already blocked: nothing to do"
    assert run("dkms", "unblock", "--root", str(tmp_path)).code == 0
    assert not (tmp_path / "etc/apt/preferences.d/fwman-nvidia-dkms").exists()
    second = run("dkms", "unblock", "--root", str(tmp_path))  # an undo already done is a no-op, like the others
    assert second.code == 0 and "not blocked by fwman" in second.stdout and "nothing to undo" in second.stdout


def test_block_interrupted_halfway_still_records_what_it_removed(tmp_path: Path) -> None:
    """The second `dkms remove` fails: the retry and unblock must still know the first module was removed."""
    run, root, registered = _standin_dkms(
        tmp_path, ["nvidia/570.86.16", "nvidia/575.51.02"], fails_to_remove="nvidia/575.51.02"
    )
    failed = run("dkms", "block", "--root", str(root))
    assert failed.code != 0 and "simulated failure" in failed.stderr
    record = json.loads((root / "var/lib/fwman/dkms-block.json").read_text())
    assert {(r["module"], r["version"]) for r in record["removed"]} == {
        ("nvidia", "570.86.16"),
        ("nvidia", "575.51.02"),
    }
    assert "nvidia/570.86.16" not in registered.read_text()  # the first removal happened
    undone = run("dkms", "unblock", "--root", str(root))
    assert undone.code == 0 and "575.51.02" not in undone.stdout  # still registered: nothing to say about it
    assert "nvidia/570.86.16: added" in registered.read_text()  # registered again: nothing lost


def _standin_dkms(
    tmp_path: Path, modules: list[str], fails_to_remove: str | None = None
) -> tuple[FwmanEnv, Path, Path]:
    """Return (fwman with a stand-in dkms first on PATH, the root, dkms's registration file).

    The stand-in has the real dkms's status format: ``modules`` (``name/version``) registered, `remove M/V`
    drops the line (except ``fails_to_remove``, which fails as dkms does), `add` registers again; only nvidia
    570.86.16's source is in /usr/src.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    registered = tmp_path / "registered"
    registered.write_text("".join(f"{m}: added\n" for m in modules))
    fail = (
        f'[ "$2" = {fails_to_remove} ] && {{ echo "Error! simulated failure" >&2; exit 1; }}\n          '
        if fails_to_remove
        else ""
    )
    (bin_dir / "dkms").write_text(
        f"""#!/bin/sh
case "$1" in
  status) cat {registered} ;;
  remove) {fail}grep -v "^$2:" {registered} > {registered}.new; mv {registered}.new {registered} ;;
  add) echo "$2: added" >> {registered} ;;
esac
"""
    )
    (bin_dir / "dkms").chmod(0o755)
    root = tmp_path / "root"
    (root / "usr/src/nvidia-570.86.16").mkdir(parents=True)
    (root / "usr/src/nvidia-570.86.16/dkms.conf").write_text('PACKAGE_NAME="nvidia"\n')
    return FwmanEnv(path_prepend=[bin_dir]), root, registered


def _two_registered(tmp_path: Path) -> tuple[FwmanEnv, Path, Path]:
    """Return :func:`_standin_dkms` with nvidia and nvidia-uvm 570.86.16 registered."""
    return _standin_dkms(tmp_path, ["nvidia/570.86.16", "nvidia-uvm/570.86.16"])


def test_block_and_unblock_say_each_step_once(tmp_path: Path) -> None:
    """Every step is said once, as it happens (it was said on stderr as it ran and again on stdout after)."""
    run, root, _ = _two_registered(tmp_path)
    blocked = run("dkms", "block", "--root", str(root))
    assert blocked.code == 0, blocked.stderr
    said = (blocked.stdout + blocked.stderr).splitlines()
    steps = [line for line in said if "nvidia" in line]
    assert len(steps) == 3 and len(set(steps)) == 3, said  # two removals and the apt pin, once each
    assert sum("unregister nvidia/570.86.16" in line for line in said) == 1
    undone = run("dkms", "unblock", "--root", str(root))
    assert undone.code == 0, undone.stderr
    lines = (undone.stdout + undone.stderr).splitlines()
    assert sum("skip nvidia-uvm/570.86.16: its source" in line for line in lines) == 1
    assert sum("dkms add" in line or "register it with DKMS again" in line for line in lines) == 1, lines


def test_unblock_dry_run_and_json(tmp_path: Path) -> None:
    """The inverse of block: --dry-run says each step and changes nothing; --json says what was undone."""
    run, root, registered = _two_registered(tmp_path)
    assert run("dkms", "block", "--root", str(root)).code == 0
    pin, record = root / "etc/apt/preferences.d/fwman-nvidia-dkms", root / "var/lib/fwman/dkms-block.json"
    before = (registered.read_text(), pin.read_bytes(), record.read_bytes())

    dry = run("dkms", "unblock", "--dry-run", "--root", str(root))
    assert dry.code == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert "would remove /etc/apt/preferences.d/fwman-nvidia-dkms" in lines
    assert "would remove the block record /var/lib/fwman/dkms-block.json" in lines
    assert sum(line.startswith("would ") and "nvidia/570.86.16" in line for line in lines) == 1, lines
    assert any(line.startswith("would skip nvidia-uvm/570.86.16: its source") for line in lines), lines
    assert (registered.read_text(), pin.read_bytes(), record.read_bytes()) == before  # nothing changed
    doc = run("dkms", "unblock", "--dry-run", "--json", "--root", str(root)).json()
    assert doc["schema"] == "fwman.dkms-unblock/1" and doc["dry_run"] is True and doc["changed"] is False
    assert doc["blocked"] is True and len(doc["actions"]) == len(lines)

    undone = run("dkms", "unblock", "--json", "--root", str(root))
    assert undone.code == 0, undone.stderr
    doc = undone.json()
    assert doc["changed"] is True and doc["blocked"] is True and doc["dry_run"] is False
    assert "skip nvidia-uvm/570.86.16: its source" in " ".join(doc["actions"])
    assert "remove the block record /var/lib/fwman/dkms-block.json" in doc["actions"]
    assert not pin.exists() and not record.exists() and "nvidia/570.86.16: added" in registered.read_text()
    again = run("dkms", "unblock", "--json", "--root", str(root)).json()
    assert again == {"schema": "fwman.dkms-unblock/1", "dry_run": False, "changed": False, "blocked": False,
                     "actions": []}  # fmt: skip


def test_block_json(tmp_path: Path) -> None:
    run, root, registered = _two_registered(tmp_path)
    dry = run("dkms", "block", "--dry-run", "--json", "--root", str(root)).json()
    assert dry["schema"] == "fwman.dkms-block/1" and dry["dry_run"] is True and dry["changed"] is False
    assert len(dry["actions"]) == 3 and registered.read_text().count("added") == 2  # nothing removed
    done = run("dkms", "block", "--json", "--root", str(root))
    assert done.code == 0, done.stderr
    doc = done.json()
    assert doc["changed"] is True and sorted(doc["actions"]) == sorted(dry["actions"])
    assert "nvidia" not in registered.read_text()
    assert run("dkms", "block", "--json", "--root", str(root)).json()["changed"] is False
