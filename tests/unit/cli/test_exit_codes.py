"""One test per documented exit code (README "Exit codes"), each through a real command."""

from __future__ import annotations

from pathlib import Path

from fixtures.hostgen.materialize import materialize
from fwman.core.errors import BlockedError, ExitCode, PartialError
from fwman.host.base import Host
from tests.support.env import EXAMPLE_HOST, REPO, FwmanEnv


def test_documented_codes() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "ERROR": 1,
        "USAGE": 2,
        "BLOCKED": 3,
        "VERIFICATION": 4,
        "MISSING": 5,
        "PARTIAL": 6,
        "INTERRUPTED": 130,
    }
    assert BlockedError("x").exit_code == 3 and PartialError("x").exit_code == 6
    readme = (REPO / "README.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in readme, f"exit code {int(code)} is not documented in README.md"


def test_0_ok(fwman: FwmanEnv) -> None:
    assert fwman("--snapshot", str(EXAMPLE_HOST), "scan").code == 0


class _BrokenHostEnv(FwmanEnv):
    """A runner whose host cannot be built: an exception fwman did not anticipate (a bug, as far as it knows)."""

    def live_host(self, root: str) -> Host:
        raise RuntimeError("the host factory broke")


def test_1_unexpected_error_is_one_line_with_traceback_only_on_v(tmp_path: Path) -> None:
    # (a corrupt snapshot used to be the example here; since issue 14 it is an expected error: exit 2)
    fwman = _BrokenHostEnv()
    r = fwman("--root", str(tmp_path), "scan")
    assert r.code == 1
    assert r.stderr.splitlines()[0] == "fwman: error: unexpected RuntimeError: the host factory broke"
    assert "Traceback" not in r.stderr
    assert "Traceback" in fwman("-v", "--root", str(tmp_path), "scan").stderr


def test_2_usage(fwman: FwmanEnv, tmp_path: Path) -> None:
    r = fwman("scan", "--no-such-option")
    assert r.code == 2 and "fwman: error: no such option" in r.stderr
    r = fwman("--root", str(tmp_path), "--snapshot", str(EXAMPLE_HOST), "scan")
    assert r.code == 2 and r.stderr.startswith("fwman: error: --root and --snapshot cannot be combined")
    assert fwman("no-such-command").code == 2


def test_4_verification_failed_on_malformed_host_data(tmp_path: Path) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/class").write_text("display\n")
    r = FwmanEnv(variables={"PATH": str(tmp_path)})("--root", str(root), "scan")
    assert r.code == 4
    assert r.stderr.startswith("fwman: error: sysfs: class: expected 0xCCSSPP")


def test_5_missing(fwman: FwmanEnv, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty/snapshot.json").write_text('{"format": "fwman-snapshot", "version": 1}')
    r = fwman("--snapshot", str(tmp_path / "empty"), "scan")
    assert r.code == 5
    assert "did not record the listing of /sys/bus/pci/devices" in r.stderr


def test_130_interrupted(tmp_path: Path) -> None:
    class Interrupting(FwmanEnv):
        def live_host(self, root: str):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    r = Interrupting()("--root", str(tmp_path), "scan")
    assert r.code == 130 and r.stderr.strip() == "fwman: error: interrupted"


def test_help_and_version_exit_0(fwman: FwmanEnv) -> None:
    r = fwman("--help")
    assert r.code == 0 and "Exit codes:" in r.stdout and "scan" in r.stdout
    r = fwman("--version")
    assert r.code == 0 and r.stdout.startswith("fwman, version ")


def test_3_blocked_by_a_safety_gate(fwman: FwmanEnv, tmp_path: Path) -> None:
    from fixtures.romgen import RomSpec, build_rom

    stripped = tmp_path / "stripped.rom"  # a VFIO-"patched" image: never a flash source
    stripped.write_bytes(build_rom(RomSpec(kind="stripped", subsystem_device=0x3987)))
    r = fwman("--snapshot", str(EXAMPLE_HOST), "rom", "verify", str(stripped), "--card", "41:00.0")
    assert r.code == 3
    assert "BLOCK  rom.kind" in r.stdout
    assert r.stderr.startswith("fwman: error: ")


def test_6_partial_success(tmp_path: Path) -> None:
    from fixtures.nvflash.rig import build_rig

    rig = build_rig(tmp_path)
    rig.set_fault("save:error@2")  # the stand-in nvflash fails to save the third card
    r = rig("backup", "--all")
    assert r.code == 6
    assert "fwman: error: 1 of 4 backups failed" in r.stderr
    assert len(rig("backup", "list", "--json").json()["backups"]) == 3


def test_usage_errors_speak_fwman_s_one_error_style_and_suggest_the_name_meant() -> None:
    run = FwmanEnv()
    for argv, first, hint in [
        (["scna"], "fwman: error: no such command 'scna'", "  hint: did you mean 'scan'? (`fwman --help`"),
        (["modules", "bild"], "fwman: error: no such command 'bild'", "  hint: did you mean 'build'? (`fwman modules"),
        (["scan", "--jsn"], "fwman: error: no such option '--jsn'", "  hint: did you mean '--json'? (`fwman scan --"),
        (["frobnicate"], "fwman: error: no such command 'frobnicate'", "  hint: `fwman --help` says how to use it"),
    ]:
        r = run(*argv)
        assert r.code == 2 and r.stdout == ""
        assert r.stderr.splitlines() == [first, r.stderr.splitlines()[1]] and r.stderr.splitlines()[1].startswith(hint)
        assert "Error:" not in r.stderr and "Usage:" not in r.stderr
