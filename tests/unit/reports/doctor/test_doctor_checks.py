"""The doctor's checks are pure over the facts they are given: built here from values, without any host.

What the chain says on real and constructed hosts is in test_doctor.py; this file pins that a check needs no
host (the place where new checks go) and how a fact that could not be read reaches the user.
"""

from __future__ import annotations

from pathlib import Path

from fwman.core.errors import FwmanError, MissingError, NotRecordedError
from fwman.core.findings import Severity
from fwman.gpu.card import Card, LinkState
from fwman.gpu.inventory import Inventory
from fwman.reports.doctor.checks import CHECKS
from fwman.reports.doctor.checks.iommu import check_iommu, check_vm_isolation
from fwman.reports.doctor.checks.links import check_links, check_power
from fwman.reports.doctor.facts import Fact, Facts, IommuState, Passthrough, iommu_mode
from fwman.reports.doctor.run import run_check

GONE = MissingError("not readable here")


def card(bus: str, *, width: int, power: float, iommu_group: int | None = 7) -> Card:
    return Card(
        bus_id=bus,
        vendor_id="10de",
        device_id="2204",
        subsystem_vendor_id="10de",
        subsystem_device_id="147d",
        link=LinkState(current_speed_gts=16.0, max_speed_gts=16.0, current_width=width, max_width=16),
        power_limit_w=power,
        default_power_limit_w=350.0,
        iommu_group=iommu_group,
    )


def facts(cards: list[Card], **fields: Fact[object]) -> Facts:
    """Return Facts with ``cards`` and every other fact failing, unless given in ``fields``."""
    given: dict[str, Fact[object]] = {
        name: Fact.failed(GONE)
        for name in (
            "topo",
            "p2p_read",
            "audit",
            "catalog",
            "iommu",
            "passthrough",
            "workloads",
            "virt",
            "acs",
            "slots",
            "p2p_history",
            "fingerprint",
        )
    }
    given.update(fields)
    return Facts(inventory=Fact.known(Inventory(cards=cards)), **given)  # type: ignore[arg-type]


def test_link_and_power_checks_from_values_alone() -> None:
    f = facts([card("0000:01:00.0", width=16, power=350.0), card("0000:02:00.0", width=8, power=300.0)])
    links = check_links(f)
    assert [(x.severity, x.message) for x in links] == [
        (Severity.WARN, "0000:02:00.0: link trained at 16 GT/s x8 of 16 GT/s x16: the width caps every transfer"),
        (Severity.OK, "links at their maximum on 0000:01:00.0 (16 GT/s x16)"),
    ]
    power = check_power(f)
    assert [x.severity for x in power] == [Severity.WARN, Severity.OK]
    assert power[0].fix is not None and "nvidia-smi -i 0000:02:00.0 -pl 350" in power[0].fix


def test_iommu_mode_is_decided_from_the_gathered_state() -> None:
    dma = IommuState("BOOT_IMAGE=/vmlinuz amd_iommu=on", ["7"], {"0000:01:00.0": "DMA-FQ"})
    assert iommu_mode(dma)[0] == "translated"
    assert iommu_mode(IommuState("iommu=pt", ["7"], {"0000:01:00.0": "identity"}))[0] == "passthrough"
    assert iommu_mode(IommuState("iommu=off", [], {}))[0] == "off"
    assert iommu_mode(IommuState("", [], {}))[0] == "not-visible"
    f = facts([card("0000:01:00.0", width=16, power=350.0)], iommu=Fact.known(dma))
    assert [x.severity for x in check_iommu(f)] == [Severity.BLOCK]


def test_vm_isolation_warns_before_iommu_pt_and_survives_an_unreadable_iommu() -> None:
    vms = Fact.known(Passthrough(["0000:81:00.0"], ["VM 100: hostpci0: 0000:81:00.0"], []))
    translated = Fact.known(IommuState("", ["7"], {"0000:01:00.0": "DMA"}))
    one = [card("0000:01:00.0", width=16, power=350.0)]
    assert check_vm_isolation(facts(one, passthrough=vms, iommu=translated))[0].severity is Severity.WARN
    # the IOMMU fact failing does not hide the VMs: the mode is taken as unknown (info, not warn)
    assert check_vm_isolation(facts(one, passthrough=vms))[0].severity is Severity.INFO


def test_a_fact_that_could_not_be_read_becomes_could_not_check_for_every_check_that_needs_it() -> None:
    f = facts([card("0000:01:00.0", width=16, power=350.0)], iommu=Fact.failed(NotRecordedError("snapshot s lost it")))
    by_id = {c.id: c for c in CHECKS}
    found = run_check(by_id["iommu.mode"], f)
    assert [(x.severity, x.message) for x in found] == [
        (Severity.INFO, "could not check: not in this snapshot (s lost it)")
    ]


def test_a_fact_is_read_once_and_its_error_kept() -> None:
    calls: list[int] = []

    def read() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise MissingError("first read fails")
        return 5

    fact = Fact(read)
    for _ in range(2):
        try:
            fact.get()
        except FwmanError as e:
            assert e.message == "first read fails"
        else:
            raise AssertionError("the kept error was not raised again")
    assert calls == [1]
    assert Fact.known(3).get() == 3


def test_nccl_level_advice_follows_the_nccl_tiers_p2p_against_shm_measurement() -> None:
    """Where ``fwman p2p --nccl`` timed P2P against its NCCL_P2P_DISABLE=1 control on this configuration,
    nccl.level follows the measurement: shared memory measured faster is not a blocker (issue 40)."""
    from fixtures.hostgen.rig import rig_4x3090, topo_m
    from fwman.gpu.topo import parse_topo_matrix
    from fwman.p2p.history import KIND_NCCL, Fingerprint, P2PRecord
    from fwman.reports.doctor.checks.workloads import check_nccl
    from fwman.reports.doctor.facts import EnvSource, Workloads

    now = Fingerprint(kernel="6.1.0-50-amd64", module_version="570.86.16", module_srcversion=None,
                      module_flavour="open", manifest=None, userspace="570.86.16", iommu="passthrough")  # fmt: skip
    unit = EnvSource("unit", "/etc/systemd/system/vllm.service", {}, "ExecStart=vllm serve")

    def level(faster: bool | None) -> list[tuple[Severity, str]]:
        record = P2PRecord(time="2026-12-01T10:00:00Z", kind=KIND_NCCL, ok=True, verdict="exact", fingerprint=now,
                           gpus=4, transport="SHM", p2p_faster=faster, advice="SHM 2.4x faster than P2P")  # fmt: skip
        f = facts(
            [],
            topo=Fact.known(parse_topo_matrix(topo_m(rig_4x3090()))),
            workloads=Fact.known(Workloads([unit], [])),
            p2p_history=Fact.known([record]),
            fingerprint=Fact.known(now),
        )
        return [(x.severity, x.message) for x in check_nccl(f)]

    [(sev, msg)] = level(False)
    assert sev == Severity.OK
    assert msg.startswith("NCCL_P2P_LEVEL not set in /etc/systemd/system/vllm.service: NCCL stages through host")
    assert "measured faster than P2P on this configuration" in msg and msg.endswith("): leave it")
    [(sev, msg)] = level(True)
    assert sev == Severity.BLOCK and msg.endswith("(measured: P2P faster and exact on this configuration, 2026-12-01)")
    [(sev, msg)] = level(None)  # no comparison: the rule, and the fix asks for the measurement
    assert sev == Severity.BLOCK and "measured" not in msg


def test_a_gpu_that_drives_a_display_is_named_as_a_p2p_risk_with_source_and_fix(tmp_path: Path) -> None:
    """sysfs boot_vga 1 on one GPU of the 4x3090 rig (materialised into a temp root): doctor names it (issue 40)."""
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import build_rig, rig_4x3090
    from fwman.gpu.inventory import scan_inventory
    from fwman.host.live import LiveHost
    from fwman.reports.doctor.checks.driver import check_display

    build_rig(rig_4x3090(), note="display", driver_flavour="open").write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    inventory = scan_inventory(LiveHost(str(root)), use_smi=False)
    assert inventory.displays == {}
    assert check_display(facts(inventory.cards)) == []  # the step is not shown
    (root / "sys/bus/pci/devices/0000:21:00.0/boot_vga").write_text("1\n")
    inventory = scan_inventory(LiveHost(str(root)), use_smi=False)
    assert inventory.displays == {"0000:21:00.0": "sysfs boot_vga 1 (the firmware's console GPU)"}
    f = Facts(**{**facts([]).__dict__, "inventory": Fact.known(inventory)})
    [risk] = check_display(f)
    assert risk.severity == Severity.WARN and risk.message.startswith("0000:21:00.0 drives a display")
    assert risk.evidence["source"] == "aikitoria/open-gpu-kernel-modules PRs 34, 36, 41; issue 31 (GB206)"
    assert risk.fix is not None and "NVreg_RMForceStaticBar1=1" in risk.fix


def test_nvidia_smi_display_active_is_read() -> None:
    from fixtures.hostgen.rig import rig_4x3090, smi_xml
    from fwman.gpu.smi import parse_smi_xml

    xml = smi_xml(rig_4x3090()[:1]).replace(
        "<fb_memory_usage>", "<display_active>Enabled</display_active>\n<fb_memory_usage>"
    )
    assert parse_smi_xml(xml).gpus[0].display_active is True
    assert parse_smi_xml(smi_xml(rig_4x3090()[:1])).gpus[0].display_active is None
