"""`fwman hooks remove --dry-run/--json`: the inverse of install says what it would remove, changes nothing in a
dry run, and reports ``changed`` honestly (true once, false when nothing was installed)."""

from __future__ import annotations

from pathlib import Path

from fwman.core import paths
from fwman.driver.hooks.files import INSTALLED
from tests.support.env import FwmanEnv


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_dry_run_lists_every_installed_file_and_removes_none(tmp_path: Path) -> None:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)  # apt is here: every file of INSTALLED is for this host
    run = FwmanEnv()
    assert run("--root", str(tmp_path), "hooks", "install").code == 0
    before = _files(tmp_path)
    r = run("--root", str(tmp_path), "hooks", "remove", "--dry-run")
    assert r.code == 0, r.stderr
    listed = [line.removeprefix("would remove ") for line in r.stdout.splitlines()]
    assert sorted(listed) == sorted([paths.CATCHUP_UNIT_WANTS, *(path for path, *_ in INSTALLED)])
    assert _files(tmp_path) == before  # nothing removed
    doc = run("--root", str(tmp_path), "hooks", "remove", "--dry-run", "--json").json()
    assert doc["schema"] == "fwman.hooks-remove/1" and doc["dry_run"] is True and doc["changed"] is False
    assert sorted(a.removeprefix("remove ") for a in doc["actions"]) == sorted(listed)
    assert _files(tmp_path) == before


def test_json_says_changed_once_then_not(tmp_path: Path) -> None:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    run = FwmanEnv()
    assert run("--root", str(tmp_path), "hooks", "install").code == 0
    first = run("--root", str(tmp_path), "hooks", "remove", "--json")
    assert first.code == 0, first.stderr
    doc = first.json()
    assert doc["changed"] is True and doc["dry_run"] is False and len(doc["actions"]) == len(INSTALLED) + 1
    assert not any((tmp_path / path.lstrip("/")).exists() for path, *_ in INSTALLED)
    assert first.stderr  # the steps went to stderr, stdout is the document alone
    again = run("--root", str(tmp_path), "hooks", "remove", "--json").json()
    assert again == {"schema": "fwman.hooks-remove/1", "dry_run": False, "changed": False, "actions": []}
    nothing = run("--root", str(tmp_path), "hooks", "remove", "--dry-run")
    assert nothing.stdout == "nothing to remove: the hooks and the service are not installed\n"


def test_install_json_says_changed_once_then_not(tmp_path: Path) -> None:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    run = FwmanEnv()
    dry = run("--root", str(tmp_path), "hooks", "install", "--dry-run", "--json").json()
    assert dry["schema"] == "fwman.hooks-install/1" and dry["dry_run"] is True and dry["changed"] is False
    assert dry["package"] is None and len(dry["actions"]) == len(INSTALLED) + 1 and dry["skipped"] == []
    assert _files(tmp_path) == {}
    first = run("--root", str(tmp_path), "hooks", "install", "--json").json()
    assert first["changed"] is True and sorted(first["actions"]) == sorted(dry["actions"])
    assert all((tmp_path / path.lstrip("/")).is_file() for path, *_ in INSTALLED)
    again = run("--root", str(tmp_path), "hooks", "install", "--json").json()
    assert again == {"schema": "fwman.hooks-install/1", "dry_run": False, "changed": False, "actions": [],
                     "package": None, "skipped": []}  # fmt: skip
