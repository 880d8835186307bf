"""``fwman doctor``'s container view: the Docker container that serves the model (replayed from recorded
``inspect`` answers, tests/support/engines.py), its driver, NCCL, P2P environment and vLLM's cached P2P verdict
against fwman's P2P record."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwman.core.errors import MissingError
from fwman.core.findings import Finding, Severity
from fwman.host.base import CommandResult
from fwman.host.snapshot import SnapshotHost
from fwman.p2p.history import KIND_COPY, Fingerprint, P2PRecord
from fwman.reports.audit.report import audit_host
from fwman.reports.doctor.checks.containers import check_containers
from fwman.reports.doctor.facts import Fact, Facts, Sources, _workloads
from tests.support.engines import (
    DRIVER,
    OLD_DRIVER,
    add_docker,
    docker_container,
    docker_snapshot,
    nvidia_cdi_spec,
)
from tests.support.env import EXAMPLE_HOST, FwmanEnv, copy_tree

NOW = Fingerprint(
    kernel="6.1.0-50-amd64",
    module_version=DRIVER,
    module_srcversion=None,
    module_flavour="open",
    manifest=None,
    userspace=DRIVER,
    iommu="passthrough",
)


def _record(ok: bool) -> P2PRecord:
    return P2PRecord(
        time="2026-12-01T10:00:00Z",
        kind=KIND_COPY,
        ok=ok,
        verdict="ok" if ok else "bytes differ",
        fingerprint=NOW,
        gpus=2,
    )


def _check(snap: Path, history: list[P2PRecord]) -> list[Finding]:
    """Return the container check over the audit of ``snap``, the P2P ``history`` and NOW (nothing else read)."""
    report = audit_host(SnapshotHost(snap), offline=True)
    gone: Fact[object] = Fact.failed(MissingError("not read by this test"))
    f = Facts(
        **{  # type: ignore[arg-type]
            name: gone
            for name in (
                "inventory",
                "topo",
                "p2p_read",
                "catalog",
                "iommu",
                "passthrough",
                "workloads",
                "virt",
                "acs",
                "slots",
            )
        },
        audit=Fact.known(report),
        p2p_history=Fact.known(history),
        fingerprint=Fact.known(NOW),
    )
    return check_containers(f)


def _by_id(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for x in findings:
        out.setdefault(x.id, []).append(x)
    return out


def test_running_container_is_the_one_that_serves_and_a_stale_vllm_cache_is_a_warning(tmp_path: Path) -> None:
    snap = docker_snapshot(
        tmp_path, spec=nvidia_cdi_spec(DRIVER), state="running", vllm_cache={"0->1": False, "1->0": False}
    )
    found = _by_id(_check(snap, [_record(ok=True)]))
    # only `hook` runs: the exited containers are not the server
    assert [x.message for x in found["containers.driver"]] == [
        f"docker container hook: user-space driver {DRIVER} is the kernel module's"
    ]
    cache = found["containers.vllm_cache"][0]
    assert cache.severity == Severity.WARN and "says no for 0->1, 1->0" in cache.message
    assert cache.fix == (
        "remove /var/lib/docker/overlay2/111111111111/merged/root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json "
        "and restart docker container hook: vLLM tests P2P again and writes a current verdict"
    )


def test_a_cache_that_allows_p2p_after_a_failed_test_is_a_warning(tmp_path: Path) -> None:
    snap = docker_snapshot(tmp_path, state="running", vllm_cache={"0->1": True})
    cache = _by_id(_check(snap, [_record(ok=False)]))["containers.vllm_cache"][0]
    assert cache.severity == Severity.WARN and "FAILED" in cache.message
    agree = docker_snapshot(tmp_path / "b", state="running", vllm_cache={"0->1": True})
    assert _by_id(_check(agree, [_record(ok=True)]))["containers.vllm_cache"][0].severity == Severity.OK


def test_no_container_running_checks_every_gpu_container(tmp_path: Path) -> None:
    snap = docker_snapshot(tmp_path, spec=nvidia_cdi_spec(OLD_DRIVER))
    found = _by_id(_check(snap, []))
    driver = {x.message.split(":")[0]: x for x in found["containers.driver"]}
    assert set(driver) == {"docker container hook", "docker container cdi", "docker container own"}
    assert driver["docker container hook"].severity == Severity.OK
    assert driver["docker container cdi"].severity == Severity.WARN
    assert driver["docker container cdi"].fix == (
        "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, then restart container cdi"
    )
    nccl = found["containers.nccl"]
    assert [(x.severity, x.message) for x in nccl] == [
        (Severity.WARN, "docker container own: its image ships NCCL 2.25.1, older than 2.27.5")
    ]


def test_the_container_environment_reaches_the_nccl_check(tmp_path: Path) -> None:
    host = SnapshotHost(docker_snapshot(tmp_path))
    report = audit_host(host, offline=True)
    sources = _workloads(host, Sources(), Fact.known(report)).sources
    hook = next(s for s in sources if s.where == "docker container hook")
    assert hook.env == {"NCCL_P2P_LEVEL": "SYS"} and hook.uses_gpu
    assert hook.fix("NCCL_P2P_LEVEL=SYS").startswith("create docker container hook again with `-e NCCL_P2P_LEVEL=SYS`")
    assert "docker container db" not in {s.where for s in sources}


def test_a_host_without_gpu_containers_has_nothing_to_say_unless_an_engine_is_down(tmp_path: Path) -> None:
    assert _check(docker_snapshot(tmp_path, docker=None), []) == []
    down = CommandResult(
        ("docker", "ps", "-a", "--format", "{{json .}}"), 1, "", "Cannot connect to the Docker daemon\n"
    )
    found = _check(docker_snapshot(tmp_path / "down", ps=down), [])
    assert [(x.id, x.severity) for x in found] == [("containers", Severity.INFO)]
    assert "Cannot connect to the Docker daemon" in found[0].message


def test_doctor_on_a_rig_with_a_vllm_container(tmp_path: Path) -> None:
    # the example rig (GPUs meet at NODE) serving from a Docker container whose environment disables P2P
    snap = copy_tree(EXAMPLE_HOST, tmp_path / "rig")
    merged = "/var/lib/docker/overlay2/abc/merged"
    vllm = docker_container("vllm", "a" * 12, {"Runtime": "nvidia"}, ["NCCL_P2P_DISABLE=1"], state="running")
    vllm["Config"]["Cmd"] = ["vllm", "serve", "/models/q", "--tensor-parallel-size", "4"]
    vllm["GraphDriver"]["Data"]["MergedDir"] = merged
    add_docker(snap, [vllm], {f"{merged}/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": b"nccl"})
    r = FwmanEnv()("--snapshot", str(snap), "doctor", "--json")
    assert "Traceback" not in r.stderr
    findings = [f for step in r.json()["steps"] for f in step["findings"]]
    disable = [f for f in findings if f["id"] == "nccl.level" and "docker container vllm" in f["message"]]
    assert disable and disable[0]["severity"] == "block" and "NCCL_P2P_DISABLE=1" in disable[0]["message"]
    allreduce = [f for f in findings if f["id"] == "vllm.allreduce" and "docker container vllm" in f["message"]]
    assert allreduce and allreduce[0]["severity"] == "warn"
    assert disable[0]["fix"].startswith("create docker container vllm again without `-e NCCL_P2P_DISABLE=1`")
    assert allreduce[0]["fix"] == (
        "create docker container vllm again with --disable-custom-all-reduce on its vLLM command line"
    )
    driver = [f for f in findings if f["id"] == "containers.driver"]
    assert [f["severity"] for f in driver] == ["ok"]  # the old NCCL is its own finding, not the driver's
    nccl = [f for f in findings if f["id"] == "containers.nccl"]
    assert [(f["severity"], f["message"]) for f in nccl] == [
        ("warn", "docker container vllm: its image ships NCCL 2.21.5, older than 2.27.5")
    ]


# -- NCCL versions with known P2P hangs (issue 40) ---------------------------------------------------------------
def _check_topo(snap: Path, topo: str | None) -> list[Finding]:
    """Return the container check with the topology ``topo`` (``nvidia-smi topo -m`` text; None: unreadable)."""
    from fwman.gpu.topo import parse_topo_matrix

    report = audit_host(SnapshotHost(snap), offline=True)
    gone: Fact[object] = Fact.failed(MissingError("not read by this test"))
    names = ("inventory", "p2p_read", "catalog", "iommu", "passthrough", "workloads", "virt", "acs", "slots")
    f = Facts(
        **{name: gone for name in names},  # type: ignore[arg-type]
        topo=Fact.known(parse_topo_matrix(topo)) if topo is not None else gone,  # type: ignore[arg-type]
        audit=Fact.known(report),
        p2p_history=Fact.known([]),
        fingerprint=Fact.known(NOW),
    )
    return check_containers(f)


def test_the_known_hang_table_starts_with_2_30_4_at_phb_and_its_source() -> None:
    from fwman.p2p.nccl_known import KNOWN_HANGS, known_hangs

    [row] = known_hangs(["2.27.5", "2.30.4"])
    assert (row.version, row.where) == ("2.30.4", ("PHB",))
    assert row.source == "local-inference-lab/rtx6kpro issue 15, June 2026" and "NCCL_P2P_DISABLE=1" in row.workaround
    assert known_hangs(["2.30.5", "2.30"]) == [] and row in KNOWN_HANGS


def test_a_container_whose_nccl_hangs_where_these_gpus_meet_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image of container ``own`` ships NCCL 2.25.1; a table row for that version (as 2.30.4's, at PHB)
    stands in for a real image with 2.30.4."""
    from fixtures.hostgen.rig import rig_4x3090, topo_m
    from fwman.p2p import nccl_known
    from fwman.reports.doctor.checks import containers

    row = nccl_known.KnownHang("2.25.1", ("PHB",), "hung on its first all_reduce", "NCCL_P2P_DISABLE=1", "a source")
    monkeypatch.setattr(containers, "known_hangs", lambda versions: nccl_known.known_hangs(versions, (row,)))
    snap = docker_snapshot(tmp_path)
    phb = topo_m(rig_4x3090()).replace("NODE\t", "PHB\t").replace("\tNODE", "\tPHB")
    [hang] = _by_id(_check_topo(snap, phb))["containers.nccl.hang"]
    assert hang.severity == Severity.WARN
    assert hang.message == "docker container own: NCCL 2.25.1 hung on its first all_reduce (GPUs here meet at PHB)"
    assert hang.evidence["source"] == "a source" and "NCCL_P2P_DISABLE=1" in (hang.fix or "")
    # GPUs that meet elsewhere: said, not a warning; topology unread: a warning that says so
    [elsewhere] = _by_id(_check_topo(snap, topo_m(rig_4x3090())))["containers.nccl.hang"]
    assert elsewhere.severity == Severity.INFO and "meet at NODE, not there" in elsewhere.message
    [unread] = _by_id(_check_topo(snap, None))["containers.nccl.hang"]
    assert unread.severity == Severity.WARN and "topology could not be read" in unread.message
