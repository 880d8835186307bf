"""fwman doctor: the chain in order on the example host, what is really there on the recorded H200, variants of
the constructed host (ready, VMs with passthrough, NCCL settings), the user's env/unit files on a live root, and
capture → replay giving the live answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from fixtures.hostgen.materialize import materialize
from fixtures.hostgen.pci import MIB
from fixtures.hostgen.rig import build_rig, rig_4x3090
from fwman.core.errors import ExitCode, MissingError, NotRecordedError
from fwman.core.findings import Finding, Severity
from fwman.host.recording import SnapshotWriter
from fwman.host.snapshot import SnapshotHost
from fwman.reports.doctor import Sources, run_doctor
from fwman.reports.doctor.checks import Check
from fwman.reports.doctor.facts import Facts, gather
from fwman.reports.doctor.run import run_check
from tests.support.env import EXAMPLE_HOST, HOSTS, FwmanEnv
from tests.support.smi import fake_nvidia_smi

H200 = HOSTS / "h200-1gpu"


def problems(findings: list[Finding]) -> list[tuple[str, str]]:
    """Return (id, severity) of the findings that are not ok/info, in order."""
    return [(f.id, f.severity.value) for f in findings if f.severity in (Severity.WARN, Severity.BLOCK)]


def rig(tmp_path: Path, name: str = "rig", ready_bar: bool = False, **options: Any) -> SnapshotHost:
    """Return a variant of the constructed example host (``ready_bar``: every card on ReBAR firmware, 32 GiB)."""
    gpus = rig_4x3090()
    if ready_bar:
        offered = [64 * MIB << i for i in range(10)]
        gpus = [dataclasses.replace(g, rebar_sizes=offered, bar1_size=32768 * MIB) for g in gpus]
    build_rig(gpus, note="doctor test variant", **options).write(tmp_path / name)
    return SnapshotHost(tmp_path / name)


READY = {
    "ready_bar": True,
    "driver_flavour": "open",
    "p2p_status": "OK",
    "iommu_type": "identity",
    "cmdline_extra": "amd_iommu=on iommu=pt",
    "lxc_environment": {"NCCL_P2P_LEVEL": "SYS"},
    "acs_control": 0,  # redirect cleared on the root ports (setpci ECAP_ACS+0x6.w=0000)
}


# -- the example host ---------------------------------------------------------------------------------------------
def test_example_host_lists_the_chain_in_order_and_exits_4(fwman: FwmanEnv) -> None:
    r = fwman("doctor", "--snapshot", str(EXAMPLE_HOST))
    assert r.code == ExitCode.VERIFICATION
    out = r.stdout
    order = [
        "BLOCK  2 cards need firmware with Resizable BAR: 0000:41:00.0, 0000:61:00.0 (3842:3987 on 94.02.26.48.15",
        "BLOCK  BAR1 not enlarged on 4 cards",
        "BLOCK  stock proprietary driver 570.86.16",
        "topo -p2p r: CNS for 12 of 12 pairs",
        "BLOCK  IOMMU translated for the GPUs (DMA-FQ; command line: amd_iommu=on)",
        "BLOCK  NCCL_P2P_LEVEL not set in container 101 (/etc/pve/lxc/101.conf): GPUs meet at NODE",
    ]
    positions = [out.index(line) for line in order]
    assert positions == sorted(positions)
    # the fixes the user needs, next to each problem
    assert "upgrade to 94.02.42.80.27, the catalog's Resizable-BAR image for 3842:3987" in out
    assert "'Above 4G Decoding' and 'Re-Size BAR Support'" in out and "systemctl reboot --firmware-setup" in out
    assert "add `iommu=pt` to the kernel command line" in out
    assert "add `lxc.environment: NCCL_P2P_LEVEL=SYS` to /etc/pve/lxc/101.conf" in out
    # the firmware cards that are fine are not flagged, and the VM there passes nothing through
    assert "ok     firmware offers a large BAR1 on 0000:01:00.0, 0000:21:00.0 (up to 32 GiB)" in out
    assert "no device is passed to a VM" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("verdict: blocked: 2 cards need firmware with Resizable BAR") and "5 more blockers" in last
    assert "peer-to-peer is blocked (6 blockers); first: firmware.rebar" in r.stderr


def test_example_host_json(fwman: FwmanEnv) -> None:
    r = fwman("doctor", "--snapshot", str(EXAMPLE_HOST), "--json")
    assert r.code == ExitCode.VERIFICATION
    doc = r.json()
    assert doc["schema"] == "fwman.doctor/2" and doc["gpu_count"] == 4
    assert doc["verdict"]["ready"] is False and doc["verdict"]["blocker_count"] == 6
    assert doc["verdict"]["first_blocker"]["id"] == "firmware.rebar"
    assert doc["verdict"]["first_blocker"]["evidence"]["catalog"] == "3842:3987/94.02.42.80.27"
    blockers = [f["id"] for s in doc["steps"] for f in s["findings"] if f["severity"] == "block"]
    assert blockers == ["firmware.rebar", "bar1.size", "driver.fork", "p2p.topo", "iommu.mode", "nccl.level"]
    assert [s["id"] for s in doc["steps"]][:4] == ["platform.vm", "gpus", "firmware.rebar", "bar1.size"]


# -- the real H200 snapshot -----------------------------------------------------------------------------------------
def test_real_h200_snapshot_says_what_is_there() -> None:
    report = run_doctor(SnapshotHost(H200))
    by_id: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_id.setdefault(f.id, []).append(f)
    assert report.gpus == 1 and report.ready
    assert report.verdict() == "ready (one GPU: peer-to-peer between GPUs does not apply)"
    assert by_id["gpus.count"][0].message.startswith("one GPU (NVIDIA H200 at 0000:00:06.0)")
    # BAR1 of 256 GiB covers 140 GiB of VRAM, though the VM hides the Resizable BAR capability
    assert [f.severity for f in by_id["firmware.rebar"]] == [Severity.OK]
    assert by_id["bar1.size"][0].message == "BAR1 covers VRAM on 0000:00:06.0 (256 GiB for 140.4 GiB)"
    assert by_id["p2p.topo"][0].message == "topo -p2p r lists 1 GPU: no pair to read"
    iommu = by_id["iommu.mode"][0]
    assert iommu.severity is Severity.INFO and iommu.message.startswith("IOMMU groups not visible")
    assert "command line: (no IOMMU parameter)" in iommu.message  # init's arguments after `--` were not read
    # the open module (not known to be the fork) is reported, but on one GPU it blocks nothing
    fork = by_id["driver.fork"][0]
    assert fork.severity is Severity.INFO and "open kernel module 580.159.04" in fork.message
    assert fork.message.endswith("(one GPU: nothing to fix for peer-to-peer here)")
    assert by_id["nccl.level"][0].message == "topo -m lists one GPU: NCCL has no pair"
    assert by_id["pcie.link"][0].message == "links at their maximum on 0000:00:06.0 (32 GT/s x16)"
    assert [f.severity for f in by_id["power.limit"]] == [Severity.OK]
    assert problems(report.findings) == []


def test_real_h200_snapshot_cli_exits_0(fwman: FwmanEnv) -> None:
    r = fwman("doctor", "--snapshot", str(H200))
    assert r.code == 0, r.stderr
    assert r.stdout.rstrip().endswith("verdict: ready (one GPU: peer-to-peer between GPUs does not apply)")


# -- variants -------------------------------------------------------------------------------------------------------
def test_a_host_with_every_step_done_is_ready(tmp_path: Path, fwman: FwmanEnv) -> None:
    host = rig(tmp_path, **READY)
    report = run_doctor(host)
    assert problems(report.findings) == []
    assert report.verdict() == "ready"
    messages = [f.message for f in report.findings]
    assert "IOMMU in passthrough for the GPUs (command line: amd_iommu=on iommu=pt)" in messages
    assert "topo -p2p r: OK for all 12 pairs" in messages
    assert "NCCL_P2P_LEVEL=SYS in container 101 (/etc/pve/lxc/101.conf): covers GPUs meeting at NODE" in messages
    r = fwman("doctor", "--snapshot", str(tmp_path / "rig"))
    assert r.code == 0 and r.stdout.rstrip().endswith("verdict: ready")


def test_before_recommending_passthrough_it_says_what_vms_lose(tmp_path: Path) -> None:
    host = rig(tmp_path, vm_hostpci=["0000:81:00.0,pcie=1"])
    report = run_doctor(host)
    vms = next(f for f in report.findings if f.id == "iommu.vms")
    assert vms.severity is Severity.WARN
    assert "vfio-pci: 0000:81:00.0" in vms.message and "VM 200: hostpci0: 0000:81:00.0,pcie=1" in vms.message
    assert vms.fix is not None and "VFIO keeps translating the devices given to VMs" in vms.fix
    assert "can then reach all host memory by DMA, the VMs' memory included" in vms.fix
    # already in passthrough: the same facts, as information
    done = run_doctor(rig(tmp_path, "done", vm_hostpci=["0000:81:00.0"], iommu_type="identity"))
    vms = next(f for f in done.findings if f.id == "iommu.vms")
    assert vms.severity is Severity.INFO and "already lost" in vms.message


@pytest.mark.parametrize(
    ("env", "nccl_conf", "expected"),
    [
        ({"NCCL_P2P_LEVEL": "PHB"}, None, [("nccl.level", "block")]),  # NODE pairs need SYS
        ({"NCCL_P2P_LEVEL": "sys"}, None, []),
        ({"NCCL_P2P_LEVEL": "5"}, None, [("nccl.level", "warn")]),  # integers changed meaning between releases
        ({"NCCL_P2P_LEVEL": "SYS", "NCCL_P2P_DISABLE": "1"}, None, [("nccl.level", "block")]),
        ({"NCCL_P2P_LEVEL": "SYS"}, "NCCL_P2P_LEVEL=PIX\n", [("nccl.level", "warn")]),
    ],
)
def test_nccl_settings_in_the_container_and_nccl_conf(
    tmp_path: Path, env: dict[str, str], nccl_conf: str | None, expected: list[tuple[str, str]]
) -> None:
    options = {**READY, "lxc_environment": env, "nccl_conf": nccl_conf}
    report = run_doctor(rig(tmp_path, **options))
    assert problems(report.findings) == expected


def test_nccl_needs_a_place_to_check_when_no_container_uses_the_gpus(tmp_path: Path) -> None:
    host = rig(tmp_path, **READY)
    # a replay keeps writes in memory: the container config loses its GPU lines
    host.write_bytes("/etc/pve/lxc/101.conf", b"arch: amd64\nhostname: web\n")
    report = run_doctor(host)
    nccl = [f for f in report.findings if f.id == "nccl.level"]
    assert [(f.severity, f.message.split(":")[0]) for f in nccl] == [(Severity.WARN, "GPUs meet at NODE")]
    assert nccl[0].fix is not None and "--env-file FILE" in nccl[0].fix
    assert report.ready  # a warning, not a blocker: doctor cannot see every place


def test_env_file_and_unit_are_read_for_nccl_and_vllm(tmp_path: Path) -> None:
    host = rig(tmp_path, **READY)
    host.write_bytes("/srv/vllm/.env", b"# vllm\nexport NCCL_P2P_LEVEL='SYS'\nHF_HOME=/models # cache\n")
    host.write_bytes(
        "/etc/systemd/system/vllm.service",
        b'[Service]\nEnvironment="NCCL_DEBUG=INFO" NCCL_P2P_LEVEL=PHB\nEnvironmentFile=-/etc/default/vllm\n'
        b"ExecStart=/opt/venv/bin/vllm serve /models/qwen \\\n  --tensor-parallel-size 4\n",
    )
    host.write_bytes("/etc/default/vllm", b"VLLM_PORT=8000\n")
    report = run_doctor(host, Sources(("/srv/vllm/.env",), ("/etc/systemd/system/vllm.service",)))
    found = [(f.id, f.severity.value, f.message) for f in report.findings if f.id in ("nccl.level", "vllm.allreduce")]
    assert ("nccl.level", "ok", "NCCL_P2P_LEVEL=SYS in /srv/vllm/.env: covers GPUs meeting at NODE") in found
    assert any(
        s == "block" and m.startswith("NCCL_P2P_LEVEL=PHB is too low in /etc/systemd/system/vllm.service")
        for i, s, m in found
    )
    vllm = [f for f in report.findings if f.id == "vllm.allreduce"]
    assert [(f.severity, f.message.split(" runs")[0]) for f in vllm] == [
        (Severity.WARN, "vLLM in /etc/systemd/system/vllm.service")
    ]
    # with the flag, vLLM is fine
    host.write_bytes(
        "/etc/systemd/system/vllm.service",
        b"[Service]\nEnvironment=NCCL_P2P_LEVEL=SYS\nExecStart=vllm serve m --disable-custom-all-reduce\n",
    )
    report = run_doctor(host, Sources((), ("/etc/systemd/system/vllm.service",)))
    assert problems(report.findings) == []


def test_a_file_the_snapshot_did_not_record_is_a_could_not_check(fwman: FwmanEnv) -> None:
    r = fwman("doctor", "--snapshot", str(EXAMPLE_HOST), "--env-file", "/srv/vllm/.env", "--json")
    nccl = [f for s in r.json()["steps"] for f in s["findings"] if f["id"] == "nccl.level"]
    assert any(
        f["severity"] == "info" and f["message"].startswith("could not check /srv/vllm/.env: not in this snapshot")
        for f in nccl
    )


def test_downtrained_link_and_lowered_power_limit(tmp_path: Path) -> None:
    gpus = rig_4x3090()
    gpus[2] = dataclasses.replace(gpus[2], width=8, power_limit=300.0)
    gpus[3] = dataclasses.replace(gpus[3], speed=2.5)  # idle GPUs drop the link speed: information only
    build_rig(gpus, note="x").write(tmp_path / "r")
    report = run_doctor(SnapshotHost(tmp_path / "r"))
    links = {f.severity: f.message for f in report.findings if f.id == "pcie.link"}
    assert (
        links[Severity.WARN] == "0000:41:00.0: link trained at 16 GT/s x8 of 16 GT/s x16: the width caps every transfer"
    )
    assert links[Severity.INFO].startswith("0000:61:00.0: link at 2.5 GT/s x16 of 16 GT/s x16: GPUs lower the link")
    power = [f for f in report.findings if f.id == "power.limit" and f.severity is Severity.WARN]
    assert [f.message for f in power] == ["0000:41:00.0: power limit 300 W is below the default 420 W"]


# -- degrading gracefully -------------------------------------------------------------------------------------------
def test_a_check_that_cannot_read_becomes_could_not_check(tmp_path: Path) -> None:
    def needs_missing(facts: Facts) -> list[Finding]:
        raise MissingError("the driver audit is not available in this fwman")

    def needs_unrecorded(facts: Facts) -> list[Finding]:
        raise NotRecordedError("snapshot x did not record /etc/nccl.conf")

    facts = gather(SnapshotHost(EXAMPLE_HOST))
    a = run_check(Check("driver", "Driver", needs_missing), facts)
    b = run_check(Check("nccl.level", "NCCL", needs_unrecorded), facts)
    assert [(f.id, f.severity, f.message) for f in a + b] == [
        ("driver", Severity.INFO, "could not check: the driver audit is not available in this fwman"),
        ("nccl.level", Severity.INFO, "could not check: not in this snapshot (x did not record /etc/nccl.conf)"),
    ]


def test_a_host_without_nvidia_gpu_exits_5(tmp_path: Path, fwman: FwmanEnv) -> None:
    w = SnapshotWriter(redact=False, constructed=True, note="no GPU")
    w.add_dir("/sys/bus/pci/devices", [])
    w.write(tmp_path / "empty")
    r = fwman("doctor", "--snapshot", str(tmp_path / "empty"))
    assert r.code == ExitCode.MISSING and "no NVIDIA GPU found" in r.stderr


# -- live root, user files, capture → replay ---------------------------------------------------------------------
def test_live_root_with_env_file_then_capture_replays_the_same_answer(tmp_path: Path) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    fake_nvidia_smi(tmp_path / "bin")
    env_file = root / "srv/vllm/.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text("NCCL_P2P_LEVEL=SYS\n")
    fw = FwmanEnv(path_prepend=[tmp_path / "bin"], variables={"PATH": "/usr/bin:/bin"})
    live = fw("doctor", "--root", str(root), "--env-file", "/srv/vllm/.env", "--json")
    assert live.code == ExitCode.VERIFICATION, live.stderr
    nccl = [f for s in live.json()["steps"] for f in s["findings"] if f["id"] == "nccl.level"]
    assert [f["severity"] for f in nccl] == ["ok", "block"]  # the env file sets it, container 101 does not

    assert fw("capture", str(tmp_path / "snap"), "--root", str(root)).code == 0
    replay = fw("doctor", "--snapshot", str(tmp_path / "snap"), "--json")
    assert replay.code == ExitCode.VERIFICATION, replay.stderr
    steps = lambda doc: [(s["id"], [(f["severity"], f["message"]) for f in s["findings"]]) for s in doc["steps"]]  # noqa: E731
    # the replay (without the env file, which capture does not know about) answers like the live run without it
    live_plain = fw("doctor", "--root", str(root), "--json")
    assert steps(replay.json()) == steps(live_plain.json())


def test_an_open_module_that_still_reads_cns_is_not_the_fork(tmp_path: Path) -> None:
    report = run_doctor(rig(tmp_path, **{**READY, "p2p_status": "CNS"}))
    fork = next(f for f in report.findings if f.id == "driver.fork")
    assert fork.severity is Severity.BLOCK
    assert fork.message == (
        "open kernel module 570.86.16 is not known to be the P2P fork (no fwman manifest) "
        "(topo -p2p r: CNS for 12 of 12 pairs)"
    )
    assert problems(report.findings) == [("driver.fork", "block"), ("p2p.topo", "block")]
