"""``fwman plan`` and ``fwman apply``: the way to the P2P target on the bundled 4x3090 host (a replay and a copy of
its tree under ``--root``): what fwman does, what the owner does, apply's idempotence, where it stops, --check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fixtures.hostgen.materialize import materialize
from tests.support.env import EXAMPLE_HOST, FwmanEnv

KVER = "6.8.12-4-pve"


def test_plan_on_the_example_host_shows_the_whole_way(fwman: FwmanEnv) -> None:
    r = fwman("--snapshot", str(EXAMPLE_HOST), "plan")
    assert r.code == 0, r.stderr
    out = r.stdout
    # the target: the loaded module's version, from the fork the branch cache says carries it
    assert "target: driver 570.86.16: fork aikitoria branch 570.86.16-p2p (the loaded module's version" in out
    # fwman's part: its own commands' planners, each listed with its steps
    assert " 1 hooks: " in out and "[fwman hooks install]" in out and "would write /etc/kernel/postinst.d/fwman" in out
    assert " 2 dkms: " in out and "would write /etc/apt/preferences.d/fwman-nvidia-dkms" in out
    # what fwman's part waits for: the headers, by the exact Proxmox package
    first = out.split("you do first")[1].split("you do (fwman cannot)")[0]
    assert f"apt install proxmox-headers-{KVER}, then `fwman apply` again" in first
    # the owner's steps: doctor's fixes with their commands and files, in chain order
    mine = out.split("you do (fwman cannot):")[1]
    order = ["`fwman upgrade --apply`", "'Re-Size BAR Support'", "`iommu=pt`", "ACS", "/etc/pve/lxc/101.conf"]
    positions = [mine.index(text) for text in order]
    assert positions == sorted(positions), positions
    # the exact line in the file this host's command line comes from (its GRUB defaults)
    assert 'in /etc/default/grub make the line `GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt"`' in mine
    # the driver blocker is fwman's (the modules), never an owner step
    assert "install the P2P fork's open kernel module" not in mine
    assert out.rstrip().endswith("then `fwman p2p`")


def test_plan_json_is_the_same_plan(fwman: FwmanEnv) -> None:
    doc = fwman("--snapshot", str(EXAMPLE_HOST), "plan", "--json").json()
    assert doc["schema"] == "fwman.plan/1" and doc["dry_run"] is True and doc["changed"] is False
    why = "the loaded module's version, carried by aikitoria"
    assert doc["target"] == {"version": "570.86.16", "fork": "aikitoria", "branch": "570.86.16-p2p", "source": None,
                             "why": why, "problem": None, "fix": None}  # fmt: skip
    assert [p["part"] for p in doc["parts"]] == ["hooks", "dkms"]
    assert doc["parts"][1]["command"] == "fwman dkms block"
    ids = [s["id"] for s in doc["owner_steps"]]
    assert ids[0] == "modules.headers" and doc["owner_steps"][0]["before_apply"] is True
    assert {"firmware.rebar", "bar1.size", "iommu.mode", "pcie.acs", "nccl.level"} <= set(ids)
    assert not {"driver.fork", "p2p.topo", "p2p.verified"} & set(ids)


def _tree(tmp_path: Path) -> Path:
    return materialize(EXAMPLE_HOST, tmp_path / "root")


def _parts_steps(doc: dict[str, Any]) -> list[str]:
    return [step for part in doc["parts"] for step in part["steps"]]


def test_apply_takes_the_plan_s_steps_and_a_second_apply_changes_nothing(fwman: FwmanEnv, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    where = ("--root", str(root))
    planned = fwman("plan", "--json", *where).json()
    r = fwman("apply", "--json", *where)
    assert r.code == 0, r.stderr
    done = r.json()
    assert done["changed"] is True and done["applied"] == _parts_steps(planned) != []
    # said as it went, part by part, on stderr (stdout is the document)
    assert "== hooks: " in r.stderr and "== dkms: " in r.stderr
    assert (root / "etc/kernel/postinst.d/fwman").stat().st_mode & 0o777 == 0o755
    assert (root / "etc/apt/preferences.d/fwman-nvidia-dkms").is_file()
    again = fwman("apply", *where)
    assert again.code == 0 and "nothing to do: fwman's part is in place" in again.stdout
    assert fwman("apply", "--json", *where).json()["changed"] is False
    assert fwman("plan", "--json", *where).json()["parts"] == []


def test_apply_stops_at_a_failing_part_and_says_what_was_not_done(fwman: FwmanEnv, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    # the DKMS pin's place is taken by a directory: the hooks part goes through, the dkms part cannot write
    (root / "etc/apt/preferences.d/fwman-nvidia-dkms").mkdir(parents=True)
    r = fwman("apply", "--root", str(root))
    assert r.code == 6  # PartialError: something was done before it stopped
    assert "apply stopped at dkms:" in r.stderr
    assert "done: write /etc/kernel/postinst.d/fwman" in r.stderr and "not done: dkms" in r.stderr
    assert (root / "etc/kernel/postinst.d/fwman").is_file()  # what was done stays done
    (root / "etc/apt/preferences.d/fwman-nvidia-dkms").rmdir()
    again = fwman("apply", "--json", "--root", str(root)).json()
    assert [step for step in again["applied"] if "postinst.d/fwman" in step] == []  # it continues, not repeats
    [pin] = again["applied"]
    assert pin.startswith("write /etc/apt/preferences.d/fwman-nvidia-dkms (")


def test_apply_check_says_what_is_missing_with_exit_4(fwman: FwmanEnv) -> None:
    r = fwman("--snapshot", str(EXAMPLE_HOST), "apply", "--check")
    assert r.code == 4
    assert "missing: hooks:" in r.stdout and "blocked: IOMMU translated" in r.stdout
    assert "the box is not at its P2P target" in r.stderr and "hint: fwman hooks install" in r.stderr
    doc = fwman("--snapshot", str(EXAMPLE_HOST), "apply", "--check", "--json").json()
    assert doc["schema"] == "fwman.apply-check/1" and doc["at_target"] is False
    assert "driver.fork" in {f["id"] for f in doc["findings"]}


@pytest.mark.parametrize("argv", [("apply",), ("apply", "--dry-run")])
def test_apply_on_a_replay_is_refused_but_its_dry_run_is_the_plan(fwman: FwmanEnv, argv: tuple[str, ...]) -> None:
    r = fwman("--snapshot", str(EXAMPLE_HOST), *argv)
    if "--dry-run" in argv:
        assert r.code == 0 and r.stdout == fwman("--snapshot", str(EXAMPLE_HOST), "plan").stdout
    else:
        assert r.code == 2 and "cannot run on a --snapshot replay" in r.stderr


def test_doctor_ends_with_the_next_command(fwman: FwmanEnv) -> None:
    """The firmware blocker is the owner's: its fix is next; a driver blocker is fwman's part: `sudo fwman apply`."""
    from fwman.app.doctor import doctor_failure, next_command
    from fwman.core.findings import Finding, Severity
    from fwman.reports.doctor.checks import CHECKS
    from fwman.reports.doctor.run import DoctorReport, Step

    r = fwman("--snapshot", str(EXAMPLE_HOST), "doctor")
    assert r.code == 4 and "hint: next: upgrade to 94.02.42.80.27" in r.stderr
    assert r.stderr.rstrip().endswith("`fwman plan` lists every step")
    driver = Finding(id="driver.fork", severity=Severity.BLOCK, message="stock driver", fix="install the fork")
    report = DoctorReport(host="h", gpus=4, steps=[Step(CHECKS[0], [driver])])
    assert (
        next_command(report)
        == "`sudo fwman apply` (fwman's part of `fwman plan`, which shows the whole way), then reboot"
    )
    failure = doctor_failure(report)
    assert failure is not None and failure.hint is not None and failure.hint.startswith("next: `sudo fwman apply`")
    assert next_command(DoctorReport(host="h", gpus=4)) is None


def test_a_replay_that_lacks_a_part_s_files_says_so_and_never_guesses(fwman: FwmanEnv, tmp_path: Path) -> None:
    """A recording that did not record one of the hooks' files: the plan names the path, --check cannot verify."""
    host = tmp_path / "rig"
    shutil.copytree(EXAMPLE_HOST, host)
    doc = json.loads((host / "snapshot.json").read_text())
    doc["absent"].remove("/etc/apt/apt.conf.d/99fwman-boot-check")
    (host / "snapshot.json").write_text(json.dumps(doc))
    r = fwman("--snapshot", str(host), "plan")
    assert r.code == 0, r.stderr
    assert f"hooks: not known from this replay: snapshot {host} did not record /etc/apt/apt.conf.d/" in r.stdout
    plan = fwman("--snapshot", str(host), "plan", "--json").json()
    hooks = next(p for p in plan["parts"] if p["part"] == "hooks")
    assert hooks["steps"] == [] and "did not record" in hooks["not_recorded"]
    check = fwman("--snapshot", str(host), "apply", "--check")
    assert check.code == 4 and "cannot verify hooks: not known from this replay" in check.stdout


def test_one_gpu_needs_none_of_fwman_s_parts(fwman: FwmanEnv) -> None:
    """The real H200 capture (one GPU): nothing of fwman's to install, and --check says the box is at its target."""
    host = str(EXAMPLE_HOST.parent / "h200-1gpu")
    r = fwman("--snapshot", host, "plan")
    assert r.code == 0 and "target: the 580.159.04 driver as it is" in r.stdout
    assert "fwman's part: not needed: one GPU: peer-to-peer between GPUs does not apply" in r.stdout
    assert "hooks" not in r.stdout and "then: reboot" not in r.stdout
    doc = fwman("--snapshot", host, "plan", "--json").json()
    assert doc["parts"] == [] and doc["not_needed"].startswith("one GPU")
    check = fwman("--snapshot", host, "apply", "--check", "--json")
    assert check.code == 0 and check.json()["at_target"] is True


def test_p2p_that_already_works_with_another_driver_needs_no_fork() -> None:
    """Every pair OK in topo -p2p r with a module fwman did not install: the fork is not needed; fwman's own fork
    (its manifest matches) stays managed (hooks, DKMS, every kernel)."""
    from fwman.app.plan import _fork_not_needed
    from fwman.gpu.topo import parse_p2p_matrix
    from fwman.reports.audit.model import AuditReport, KernelModule, LoadedModule, P2PBranch
    from fwman.reports.doctor.facts import Fact

    matrix = parse_p2p_matrix(" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n\nLegend:\n\n  X    = Self\n")

    def facts(origin: str) -> Any:
        module = KernelModule(kernel="6.8.12-4-pve", name="nvidia", path="/x/nvidia.ko", origin=origin)
        loaded = LoadedModule(version="575.51.02", flavour="open", proc_version=None, sys_version="575.51.02")
        audit = AuditReport(reference="575.51.02", reference_source="module", running_kernel="6.8.12-4-pve",
                            loaded=loaded, modules=[module],
                            host_libs={}, host_compat=[], smi_version=None, firmware=[], containers=[], rows=[],
                            p2p=P2PBranch(version="575.51.02", status="unknown"))  # fmt: skip
        return type("F", (), {"audit": Fact.known(audit), "p2p_read": Fact.known(matrix)})()

    assert (_fork_not_needed(2, facts("unknown")) or "").startswith("the 575.51.02 driver already reads OK")
    assert _fork_not_needed(2, facts("patched")) is None
    assert _fork_not_needed(1, facts("patched")) is not None
