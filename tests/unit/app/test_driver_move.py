"""``fwman driver move`` through the CLI on a temp root: the status, the options that exclude each other, the
rollback of a kept set (its dry run is its run, a second run does nothing), --finish only with the new module
loaded. The move itself (builds, apt) is the story suite's: tests/story/test_driver_move.py."""

from __future__ import annotations

import json
from pathlib import Path

from fwman.driver.move.keep import KeepFiles, kept_paths
from fwman.driver.move.record import COMMITTED, MoveRecord, WriteRecord
from fwman.host.actions import apply_all
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv

KVER = "6.1.0-47-amd64"


def _committed(tmp_path: Path) -> Path:
    """Return a root after a (recorded) move: the kept set from before, then the new modules in place."""
    root = tmp_path / "root"
    (root / f"lib/modules/{KVER}").mkdir(parents=True)
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / "var/lib/fwman/modules/source.json").write_text('{"fork": "story", "branch": "570.86.16-p2p"}\n')
    host = LiveHost(str(root))
    apply_all(host, [KeepFiles(kept_paths(host, [KVER]))])
    record = MoveRecord("570.86.16", "575.51.02", COMMITTED, [KVER], "570.86.16-p2p", "575.51.02-p2p")
    apply_all(host, [WriteRecord(record)])
    # what the commit wrote: modules where there were none, a new manifest, the source record at the new branch
    (root / f"lib/modules/{KVER}/updates/fwman").mkdir(parents=True)
    (root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko").write_bytes(b"575")
    (root / f"var/lib/fwman/modules/{KVER}.json").write_text('{"branch": "575.51.02-p2p"}\n')
    (root / "var/lib/fwman/modules/source.json").write_text('{"fork": "story", "branch": "575.51.02-p2p"}\n')
    return root


def test_status_without_a_move_says_so(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    r = FwmanEnv()("driver", "move", "--root", str(tmp_path / "root"))
    assert r.code == 0 and "no driver move was made" in r.stdout
    doc = FwmanEnv()("driver", "move", "--status", "--json", "--root", str(tmp_path / "root")).json()
    assert doc["schema"] == "fwman.driver-move/1" and doc["move"] is None and doc["kept"] is False


def test_options_that_exclude_each_other_are_a_usage_error(tmp_path: Path) -> None:
    env = FwmanEnv()
    r = env("driver", "move", "--to", "575.51.02", "--rollback", "--root", str(tmp_path))
    assert r.code == 2 and "--to and --rollback exclude each other" in r.stderr
    r = env("driver", "move", "--dry-run", "--root", str(tmp_path))
    assert r.code == 2 and "--dry-run goes with" in r.stderr
    r = env("driver", "move", "--to", "575", "--root", str(tmp_path))
    assert r.code == 2, r.stderr
    r = env("driver", "move", "--rollback", "--root", str(tmp_path))
    assert r.code == 2 and "no driver move was made" in r.stderr


def test_status_shows_the_move_and_the_kept_set(tmp_path: Path) -> None:
    root = _committed(tmp_path)
    r = FwmanEnv()("driver", "move", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "move 570.86.16 -> 575.51.02: committed" in r.stdout
    assert "fwman driver move --rollback` restores it" in r.stdout
    assert "WARNING: after the driver move 570.86.16 -> 575.51.02, no nvidia module is loaded" in r.stdout
    doc = FwmanEnv()("driver", "move", "--json", "--root", str(root)).json()
    assert doc["move"]["to_version"] == "575.51.02" and doc["move"]["stage"] == "committed" and doc["kept"] is True


def test_rollback_restores_the_kept_set_and_its_dry_run_is_its_run(tmp_path: Path) -> None:
    root = _committed(tmp_path)
    env = FwmanEnv()
    dry = env("driver", "move", "--rollback", "--dry-run", "--json", "--root", str(root)).json()
    assert dry["dry_run"] is True and dry["changed"] is False
    assert (root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko").exists()  # the dry run changed nothing
    run = env("driver", "move", "--rollback", "--json", "--root", str(root))
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["actions"] == dry["actions"] and doc["changed"] is True
    assert doc["actions"][0].startswith("restore the ") and "record the move 570.86.16 -> 575.51.02: rolled-back" in (
        " ".join(doc["actions"])
    )
    # exactly as before: the module that was not there is gone, the manifest too, the source record is the old one
    assert not (root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko").exists()
    assert not (root / f"var/lib/fwman/modules/{KVER}.json").exists()
    assert json.loads((root / "var/lib/fwman/modules/source.json").read_text())["branch"] == "570.86.16-p2p"
    assert not (root / "var/lib/fwman/move").exists()
    assert json.loads((root / "var/lib/fwman/driver-move.json").read_text())["stage"] == "rolled-back"
    again = env("driver", "move", "--rollback", "--json", "--root", str(root)).json()
    assert again["changed"] is False and again["actions"] == []


def test_finish_waits_for_the_new_module_to_be_loaded(tmp_path: Path) -> None:
    root = _committed(tmp_path)
    env = FwmanEnv()
    r = env("driver", "move", "--finish", "--root", str(root))
    assert r.code == 3 and "not finished" in r.stderr and "no nvidia module is loaded" in r.stderr
    assert (root / "var/lib/fwman/move/kept/index.json").exists()
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("575.51.02\n")
    r = env("driver", "move", "--finish", "--json", "--root", str(root))
    assert r.code == 0, r.stderr
    assert not (root / "var/lib/fwman/move").exists()
    assert json.loads((root / "var/lib/fwman/driver-move.json").read_text())["stage"] == "finished"
    r = env("driver", "move", "--rollback", "--root", str(root))
    assert r.code == 2 and "no longer kept" in r.stderr


def test_the_installer_and_its_checksum_go_together_and_with_to(tmp_path: Path) -> None:
    env = FwmanEnv()
    r = env("driver", "move", "--to", "575.51.02", "--run", "x.run", "--root", str(tmp_path))
    assert r.code == 2 and "--run and --run-sha256 go together" in r.stderr
    r = env("driver", "move", "--rollback", "--container-root", "/srv/ct", "--root", str(tmp_path))
    assert r.code == 2 and "go with --to" in r.stderr


def test_images_with_their_own_libcuda_are_named_with_how_to_rebuild_them(tmp_path: Path) -> None:
    """A Docker host (tests/support/engines.py): `own`'s image carries libcuda 550.54.15; the others get the
    host's libraries injected (runtime hook, CDI) or use no GPU."""
    from fwman.app.driver.move import image_notes
    from fwman.host.snapshot import SnapshotHost
    from tests.support.engines import DRIVER, OLD_DRIVER, docker_snapshot

    notes = image_notes(SnapshotHost(docker_snapshot(tmp_path)), DRIVER)
    assert len(notes) == 1, notes
    assert notes[0].startswith(f"docker container own (image example/own:1) carries NVIDIA's libraries of {OLD_DRIVER}")
    assert "rebuild the image without them" in notes[0] and f"with the {DRIVER} user space" in notes[0]
    assert image_notes(SnapshotHost(docker_snapshot(tmp_path / "again")), OLD_DRIVER) == []
