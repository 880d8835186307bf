"""The doctor's checks are pure over the facts they are given: built here from values, without any host.

What the chain says on real and constructed hosts is in test_doctor.py; this file pins that a check needs no
host (the place where new checks go) and how a fact that could not be read reaches the user.
"""

from __future__ import annotations

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
