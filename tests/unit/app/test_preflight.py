"""`fwman modules preflight` as a use case: which kernels, what is recorded, fwman's hold placed and lifted.

apt is a stand-in here only for what a temp root cannot have (an archive): ``apt-get -s`` prints a simulation
in apt 2.6.1's format. The verdicts come from the pre-flight record (so nothing is built: building against
real header packages is the story's, tests/story/test_preflight.py), keyed as the use case keys them; the hold
is the real pin file and record under the root.
"""

from __future__ import annotations

import json
from pathlib import Path

from fwman.driver import preflight as pf
from fwman.driver.build.kbuild import compiler_version
from fwman.driver.build.source import local_source
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.preflight import FIRST, preflight_machine, simulation

UPDATE, BROKEN = "6.1.0-56-amd64", "6.1.0-57-amd64"
PIN = "etc/apt/preferences.d/fwman-kernel-preflight"
_simulation = simulation


def _machine(tmp_path: Path, *offered: str) -> tuple[FwmanEnv, Path, Path]:
    """Return (fwman with a stand-in apt-get, the root, the file the stand-in prints as its simulation)."""
    return preflight_machine(tmp_path, *offered)


def _record(root: Path, verdicts: dict[str, str]) -> None:
    """Write the pre-flight record: ``verdicts`` {kernel: status}, keyed as the use case will key them."""
    host = LiveHost(str(root))
    source = local_source(host, "/src/tree")
    compiler = compiler_version(host)
    state = pf.State()
    for kver, status in verdicts.items():
        n = kver.split("-")[1]
        key = pf.verdict_key(kver, f"6.1.192-{n}", source.source_id, [], compiler)
        verdict = pf.KernelVerdict(kver, status, "recorded", key, at="2026-12-01T00:00:00+00:00")
        if status == pf.BROKEN:
            verdict.file, verdict.line, verdict.error = "kernel-open/nvidia/nv-pci.c", 42, '#error "no"'
        state.kernels[kver] = verdict
    (root / "var/lib/fwman").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/fwman/preflight.json").write_bytes(state.to_bytes())


def test_hold_pins_the_unbuildable_kernel_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    run, root, _ = _machine(tmp_path, UPDATE, BROKEN)
    _record(root, {UPDATE: pf.SAFE, BROKEN: pf.BROKEN})
    result = run("modules", "preflight", "--hold", "--json", "--root", str(root))
    assert result.code == 4, result.stderr
    doc = result.json()
    assert [(k["kernel"], k["status"], k["held"]) for k in doc["kernels"]] == [
        (UPDATE, "safe", False),
        (BROKEN, "will-not-build", True),
    ]
    assert doc["kernels"][1]["verdict"] == 'will not build: kernel-open/nvidia/nv-pci.c:42: #error "no"'
    assert doc["changed"] is True and doc["newly_held"] == [BROKEN]
    pin = (root / PIN).read_text()
    assert f"Package: linux-headers-{BROKEN} linux-image-{BROKEN}\nPin: version *\nPin-Priority: -1\n" in pin
    assert UPDATE not in pin and "common" not in pin
    hold = json.loads((root / "var/lib/fwman/kernel-hold.json").read_text())
    assert hold["kernels"][BROKEN]["packages"] == {
        f"linux-headers-{BROKEN}": "6.1.192-57",
        f"linux-image-{BROKEN}": "6.1.192-57",
    }
    again = run("modules", "preflight", "--hold", "--json", "--root", str(root))
    assert again.code == 4 and again.json()["changed"] is False and again.json()["actions"] == []
    assert (root / PIN).read_text() == pin
    # the installed kernel's own upgrade is not a kernel to pre-flight
    assert FIRST not in [k["kernel"] for k in doc["kernels"]]


def test_a_held_kernel_apt_no_longer_offers_is_checked_again_and_released_once_it_builds(tmp_path: Path) -> None:
    run, root, sim = _machine(tmp_path, UPDATE, BROKEN)
    _record(root, {UPDATE: pf.SAFE, BROKEN: pf.BROKEN})
    assert run("modules", "preflight", "--hold", "--root", str(root)).code == 4
    sim.write_text(_simulation(UPDATE))  # the pin works: apt no longer offers the held kernel
    held = run("modules", "preflight", "--json", "--root", str(root))
    entry = held.json()["kernels"][1]
    assert held.code == 4 and (entry["kernel"], entry["offered"], entry["held"]) == (BROKEN, False, True)
    _record(root, {UPDATE: pf.SAFE, BROKEN: pf.SAFE})  # a fork commit (or a patch) that builds it
    passed = run("modules", "preflight", "--json", "--root", str(root))
    assert passed.code == 0, passed.stderr
    assert passed.json()["released_kernels"] == [BROKEN] and passed.json()["changed"] is True
    assert not (root / PIN).exists() and not (root / "var/lib/fwman/kernel-hold.json").exists()
    assert (root / "etc/apt/preferences.d/owner-pin").exists(), "a pin fwman did not place was touched"


def test_release_lifts_only_fwmans_hold_and_says_when_there_is_none(tmp_path: Path) -> None:
    run, root, _ = _machine(tmp_path, UPDATE, BROKEN)
    _record(root, {UPDATE: pf.SAFE, BROKEN: pf.BROKEN})
    assert run("modules", "preflight", "--hold", "--root", str(root)).code == 4
    dry = run("modules", "preflight", "--release", "--dry-run", "--root", str(root))
    assert dry.code == 0 and f"would remove /{PIN}" in dry.stdout and (root / PIN).exists()
    done = run("modules", "preflight", "--release", "--json", "--root", str(root))
    assert done.code == 0 and done.json()["released_kernels"] == [BROKEN] and done.json()["changed"] is True
    assert not (root / PIN).exists() and (root / "etc/apt/preferences.d/owner-pin").exists()
    none = run("modules", "preflight", "--release", "--root", str(root))
    assert none.code == 0 and "fwman holds no kernel back" in none.stdout
    both = run("modules", "preflight", "--release", "--hold", "--root", str(root))
    assert both.code == 2


def test_dry_run_says_what_it_would_build_and_writes_nothing(tmp_path: Path) -> None:
    run, root, _ = _machine(tmp_path, UPDATE, BROKEN)
    _record(root, {UPDATE: pf.SAFE})
    before = (root / "var/lib/fwman/preflight.json").read_bytes()
    result = run("modules", "preflight", "--dry-run", "--hold", "--root", str(root))
    assert result.code == 0, result.stderr
    assert f"{UPDATE} (offered by apt): safe to install (recorded)" in result.stdout
    assert f"{BROKEN} (offered by apt): would download linux-headers-{BROKEN}=6.1.192-57 and build" in result.stdout
    assert (root / "var/lib/fwman/preflight.json").read_bytes() == before and not (root / PIN).exists()


def test_no_module_source_is_a_usage_error_naming_the_command_that_sets_one(tmp_path: Path) -> None:
    run, root, sim = _machine(tmp_path, UPDATE)
    (root / "etc/fwman/config.toml").write_text("")
    result = run("modules", "preflight", "--root", str(root))
    assert result.code == 2 and "`fwman plan` names the fork and branch for this box" in result.stderr
    # with no new kernel offered there is nothing to build: no source needed (a host using fwman for firmware)
    sim.write_text(_simulation())
    quiet = run("modules", "preflight", "--json", "--root", str(root))
    assert quiet.code == 0 and quiet.json()["kernels"] == [] and quiet.json()["safe"] is True, quiet.stderr
    last = json.loads((root / "var/lib/fwman/preflight.json").read_text())["last_run"]
    assert last["kernels"] == [] and last["at"]


def test_a_kernel_with_nova_core_is_named_not_safe_to_boot_until_the_blacklist(tmp_path: Path) -> None:
    """The record holds what the headers' .config said (CONFIG_NOVA_CORE=m); the blacklist is judged each run."""
    run, root, _ = _machine(tmp_path, UPDATE)
    _record(root, {UPDATE: pf.SAFE})
    state = pf.read_state(LiveHost(str(root)))
    state.kernels[UPDATE].nova_config = "m"
    (root / "var/lib/fwman/preflight.json").write_bytes(state.to_bytes())
    doc = run("modules", "preflight", "--json", "--root", str(root)).json()
    [kernel] = doc["kernels"]
    assert kernel["verdict"] == (
        f"builds, but NOT safe to boot: {UPDATE} has nova_core (CONFIG_NOVA_CORE=m in its headers' .config): it "
        "takes the GPU before nvidia.ko can probe it; blacklist it: fwman driver settings --apply"
    )
    assert kernel["result"]["nova_core"]["config"] == "m"
    (root / "etc/modprobe.d").mkdir(parents=True)
    (root / "etc/modprobe.d/fwman-nvidia-p2p.conf").write_text("blacklist nova_core\n")
    again = run("modules", "preflight", "--json", "--root", str(root)).json()["kernels"][0]
    assert again["verdict"] == "safe to install" and again["result"]["nova_core"]["problem"] is None


def test_the_headers_config_says_whether_the_kernel_has_nova_core(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    build = tmp_path / "usr/src/linux-headers-7.0.0-3-amd64"
    build.mkdir(parents=True)
    assert pf.headers_nova_config(host, "/usr/src/linux-headers-7.0.0-3-amd64") is None  # no .config
    (build / ".config").write_text("CONFIG_RUST=y\nCONFIG_NOVA_CORE=m\n")
    assert pf.headers_nova_config(host, "/usr/src/linux-headers-7.0.0-3-amd64") == "m"
    real = Path("/usr/src/linux-headers-6.1.0-57-amd64/.config")
    if real.is_file():  # Debian 12's kernel predates nova_core
        assert pf.headers_nova_config(LiveHost("/"), str(real.parent)) is None
