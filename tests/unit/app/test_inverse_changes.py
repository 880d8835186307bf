"""`metrics remove` and `userspace release` (the inverses of install and hold): --dry-run says what would go and
changes nothing, --json reports ``changed`` honestly (true once, false when there was nothing)."""

from __future__ import annotations

from pathlib import Path

from fwman.driver.userspace_hold import BLACKLIST_FILE, PIN_FILE, STATE_FILE, hold_actions
from fwman.host.actions import apply_all
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_metrics_remove_dry_run_then_json(tmp_path: Path) -> None:
    run = FwmanEnv()
    assert run("--root", str(tmp_path), "metrics", "install").code == 0
    before = _files(tmp_path)
    dry = run("--root", str(tmp_path), "metrics", "remove", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "would remove /etc/systemd/system/fwman-metrics.timer" in dry.stdout.splitlines()
    assert _files(tmp_path) == before
    doc = run("--root", str(tmp_path), "metrics", "remove", "--json").json()
    assert doc["schema"] == "fwman.metrics-remove/1" and doc["changed"] is True and doc["dry_run"] is False
    assert "remove /etc/systemd/system/fwman-metrics.timer" in doc["actions"]
    assert not (tmp_path / "etc/systemd/system/fwman-metrics.timer").exists()
    again = run("--root", str(tmp_path), "metrics", "remove", "--json").json()
    assert again == {"schema": "fwman.metrics-remove/1", "dry_run": False, "changed": False, "actions": []}


def test_userspace_release_dry_run_then_json(tmp_path: Path) -> None:
    apply_all(LiveHost(str(tmp_path)), hold_actions({"libcuda1": "570.86.16-1"}, "2026-12-01T00:00:00Z"))
    before = _files(tmp_path)
    run = FwmanEnv()
    dry = run("--root", str(tmp_path), "userspace", "release", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert dry.stdout.splitlines() == [f"would remove {p}" for p in (PIN_FILE, BLACKLIST_FILE, STATE_FILE)]
    doc = run("--root", str(tmp_path), "userspace", "release", "--dry-run", "--json").json()
    assert doc["dry_run"] is True and doc["changed"] is False and doc["packages"] == {"libcuda1": "570.86.16-1"}
    assert _files(tmp_path) == before
    done = run("--root", str(tmp_path), "userspace", "release", "--json").json()
    assert done["schema"] == "fwman.userspace-release/1" and done["changed"] is True
    assert done["actions"] == [f"remove {p}" for p in (PIN_FILE, BLACKLIST_FILE, STATE_FILE)]
    assert _files(tmp_path) == {}
    again = run("--root", str(tmp_path), "userspace", "release", "--json").json()
    assert again == {"schema": "fwman.userspace-release/1", "dry_run": False, "changed": False, "actions": [],
                     "packages": None}  # fmt: skip
    assert run("--root", str(tmp_path), "userspace", "release").stdout == "fwman holds nothing\n"


def test_metrics_install_json(tmp_path: Path) -> None:
    run = FwmanEnv()
    dry = run("--root", str(tmp_path), "metrics", "install", "--dry-run", "--json").json()
    assert dry["schema"] == "fwman.metrics-install/1" and dry["dry_run"] is True and dry["changed"] is False
    assert any(a.startswith("write /etc/systemd/system/fwman-metrics.timer ") for a in dry["actions"])
    assert not (tmp_path / "etc").exists()
    first = run("--root", str(tmp_path), "metrics", "install", "--json").json()
    assert first["changed"] is True and (tmp_path / "etc/systemd/system/fwman-metrics.timer").is_file()
    again = run("--root", str(tmp_path), "metrics", "install", "--json").json()
    assert again == {"schema": "fwman.metrics-install/1", "dry_run": False, "changed": False, "actions": []}


def test_userspace_hold_json_over_the_real_dpkg_query(tmp_path: Path) -> None:
    require_tools("dpkg-query")
    dpkg = tmp_path / "var/lib/dpkg"
    (dpkg / "updates").mkdir(parents=True)
    (dpkg / "info").mkdir()
    (dpkg / "status").write_text(
        "Package: libcuda1\nStatus: install ok installed\nVersion: 570.86.16-1\nArchitecture: amd64\n"
        "Maintainer: x <x@example.org>\nDescription: x\n\n"
    )
    run = FwmanEnv()
    dry = run("--root", str(tmp_path), "userspace", "hold", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    doc = dry.json()
    assert doc["schema"] == "fwman.userspace-hold/1" and doc["dry_run"] is True and doc["changed"] is False
    assert doc["packages"] == {"libcuda1": "570.86.16-1"} and len(doc["actions"]) == 3
    assert not (tmp_path / PIN_FILE.lstrip("/")).exists()
    done = run("--root", str(tmp_path), "userspace", "hold", "--json").json()
    assert done["changed"] is True and (tmp_path / PIN_FILE.lstrip("/")).is_file()
    again = run("--root", str(tmp_path), "userspace", "hold", "--json").json()
    assert again["changed"] is False and again["actions"] == [] and again["packages"] == {"libcuda1": "570.86.16-1"}
    text = run("--root", str(tmp_path), "userspace", "hold")
    assert text.stdout == "held libcuda1 570.86.16-1\nhold already in place and current\n"
