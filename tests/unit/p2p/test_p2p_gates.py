"""The gates real boxes hit: VM guest, PCIe ACS between GPUs, slot versus link training, topology of any shape.

Parsers get exact cases and hypothesis (any input: a model or ParseError). The doctor steps run on the
constructed example rig (ACS redirect on, as Linux sets it under amd_iommu=on), variants of it, the constructed
Proxmox guest, and the real H200 capture (a Firecracker guest).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.hostgen.pci import ConfigSpec, build_config_space
from fixtures.hostgen.rig import build_rig, rig_4x3090, topo_m
from fwman.core.errors import ParseError
from fwman.core.findings import Finding, Severity
from fwman.gpu.acs import AcsState, parse_acs
from fwman.gpu.bridges import SlotFacts
from fwman.gpu.card import Card, LinkState
from fwman.gpu.pci_path import chain, crossed_bridges, root_bus, upstream_bridge
from fwman.gpu.topo import parse_p2p_matrix, parse_topo_matrix
from fwman.host.snapshot import SnapshotHost
from fwman.platform.virt import VirtEvidence, gather, judge, parse_cpu_flags
from fwman.reports.doctor import run_doctor
from fwman.reports.doctor.checks.pcie import slot_findings
from tests.support.env import EXAMPLE_HOST, HOSTS, FwmanEnv

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUEST = HOSTS / "pve-guest-4x3090"
H200 = HOSTS / "h200-1gpu"


def step(report: Any, check_id: str) -> list[Finding]:
    return next(s.findings for s in report.steps if s.check.id == check_id)


# -- the ACS parser ---------------------------------------------------------------------------------------------
def bridge_config(acs: tuple[int, int] | None) -> bytes:
    return build_config_space(ConfigSpec(vendor=0x1022, device=0x1483, class_code=0x060400, header_type=1, acs=acs))


def test_acs_registers_are_read_at_plus_4_and_plus_6() -> None:
    r = parse_acs(bridge_config((0x5F, 0x1D)))
    assert r.state is AcsState.PRESENT and r.offset == 0x200
    assert (r.capability, r.control) == (0x5F, 0x1D)
    assert r.redirect == 0x0C  # P2P Request Redirect (bit 2) and P2P Completion Redirect (bit 3)
    assert r.describe() == ("ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-")


def test_acs_without_redirect_and_without_the_capability() -> None:
    assert parse_acs(bridge_config((0x5F, 0x01))).redirect == 0
    assert parse_acs(bridge_config(None)).state is AcsState.ABSENT


@pytest.mark.parametrize("size", [64, 256])
def test_a_non_root_read_cannot_see_acs(size: int) -> None:
    r = parse_acs(bridge_config((0x5F, 0x1D))[:size])
    assert r.state is AcsState.UNREADABLE and r.redirect == 0 and r.config_bytes == size


def test_a_looping_extended_list_is_a_parse_error() -> None:
    cfg = bytearray(bridge_config(None))
    struct.pack_into("<I", cfg, 0x100, 0x000B | (1 << 16) | (0x100 << 20))  # points at itself
    with pytest.raises(ParseError, match="loop"):
        parse_acs(bytes(cfg))


@FUZZ
@given(st.binary(max_size=4096))
def test_acs_any_bytes(data: bytes) -> None:
    try:
        r = parse_acs(data)
    except ParseError:
        return
    assert r.redirect & ~0x0C == 0
    assert (r.state is AcsState.PRESENT) == (r.offset is not None)


@FUZZ
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0x100, 0xFF8).map(lambda x: x & ~3))
def test_acs_found_wherever_the_list_puts_it(cap: int, ctrl: int, where: int) -> None:
    cfg = bytearray(4096)
    if where != 0x100:
        struct.pack_into("<I", cfg, 0x100, 0x000B | (1 << 16) | (where << 20))
    struct.pack_into("<IHH", cfg, where, 0x000D | (1 << 16), cap, ctrl)
    r = parse_acs(bytes(cfg))
    assert (r.offset, r.capability, r.control) == (where, cap, ctrl)


# -- the path between two GPUs ----------------------------------------------------------------------------------
SWITCH_A = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
SWITCH_B = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0"
EPYC_A = "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0"
EPYC_B = "/sys/devices/pci0000:60/0000:60:01.1/0000:61:00.0"


def test_behind_one_switch_the_traffic_crosses_only_the_two_downstream_ports() -> None:
    assert chain(SWITCH_A) == ["0000:02:08.0", "0000:01:00.0", "0000:00:01.0"]
    assert crossed_bridges(SWITCH_A, SWITCH_B) == ["0000:02:08.0", "0000:02:10.0"]


def test_under_different_root_ports_the_traffic_crosses_both() -> None:
    assert crossed_bridges(EPYC_A, EPYC_B) == ["0000:40:01.1", "0000:60:01.1"]
    assert root_bus(EPYC_A) == "pci0000:40" and upstream_bridge(EPYC_A) == "0000:40:01.1"
    assert upstream_bridge("/sys/devices/pci0000:00/0000:00:06.0") is None  # the H200 VM: on the root bus


_fn = st.builds(lambda b, d: f"0000:{b:02x}:{d:02x}.0", st.integers(0, 255), st.integers(0, 31))


@FUZZ
@given(st.lists(_fn, max_size=4), st.lists(_fn, max_size=3), st.lists(_fn, max_size=3), _fn, _fn)
def test_crossed_bridges_never_include_the_shared_part(
    shared: list[str], a: list[str], b: list[str], end_a: str, end_b: str
) -> None:
    pa = "/".join(["/sys/devices/pci0000:00", *shared, *a, end_a])
    pb = "/".join(["/sys/devices/pci0000:00", *shared, *b, end_b])
    crossed = crossed_bridges(pa, pb)
    assert set(crossed) <= set(chain(pa)) | set(chain(pb))
    assert not set(crossed) & (set(chain(pa)) & set(chain(pb)))


# -- VM detection -------------------------------------------------------------------------------------------------
def test_the_real_h200_capture_is_a_vm_guest() -> None:
    verdict = judge(gather(SnapshotHost(H200)))
    assert verdict.guest is True
    assert verdict.evidence["cpu flag"] == "hypervisor (/proc/cpuinfo)"
    assert "0000:00:06.0" not in verdict.evidence["virtio PCI functions"]  # the GPU is no virtio device
    r = FwmanEnv()("--snapshot", str(H200), "doctor")
    first = r.stdout.split("\n\n")[1]
    assert first.startswith(" 1 Running inside a VM\n   info   running inside a virtual machine guest")


def test_the_constructed_proxmox_guest_says_vm_first_with_the_monitor() -> None:
    report = run_doctor(SnapshotHost(GUEST))
    assert report.steps[0].check.id == "platform.vm"
    [f] = report.steps[0].findings
    assert f.severity is Severity.WARN
    assert f.message.startswith("running inside a virtual machine guest (kvm): in a guest, BAR sizes")
    assert f.evidence["dmi sys_vendor"] == "QEMU" and f.evidence["systemd-detect-virt --vm"] == "kvm"
    assert "x-nv-gpudirect-clique" in (f.fix or "")
    # the card's firmware cannot be judged from inside: the firmware step points at the host, blocks nothing
    assert {x.severity for x in step(report, "firmware.rebar")} == {Severity.INFO}
    assert "read the firmware on the VM's host" in step(report, "firmware.rebar")[0].message


def test_the_example_rig_is_bare_metal() -> None:
    report = run_doctor(SnapshotHost(EXAMPLE_HOST))
    [f] = report.steps[0].findings
    assert f.severity is Severity.OK and f.message == "not a VM guest"
    assert f.evidence["systemd-detect-virt --vm"] == "none"


@pytest.mark.parametrize(
    ("evidence", "guest", "kind"),
    [
        (VirtEvidence(cpu_flags=frozenset({"fpu", "hypervisor"})), True, None),
        (VirtEvidence(cpu_flags=frozenset({"fpu"}), dmi={"sys_vendor": "VMware, Inc."}), True, "vmware"),
        (VirtEvidence(cpu_flags=frozenset({"fpu"}), dmi={"sys_vendor": "Amazon EC2"}), False, None),
        (VirtEvidence(hypervisor_type="xen"), True, "xen"),
        (VirtEvidence(detect_virt="none", cpu_flags=frozenset()), False, None),
        (VirtEvidence(), None, None),
    ],
)
def test_judge_weighs_each_kind_of_evidence(evidence: VirtEvidence, guest: bool | None, kind: str | None) -> None:
    v = judge(evidence)
    assert (v.guest, v.kind) == (guest, kind)


@FUZZ
@given(st.text(max_size=400))
def test_cpu_flags_of_any_text(text: str) -> None:
    flags = parse_cpu_flags(text)
    assert all(f and not any(c.isspace() for c in f) for f in flags)


# -- ACS in doctor --------------------------------------------------------------------------------------------------
def rig(
    tmp_path: Path, gpus: list[Any] | None = None, truncate_ports: int | None = None, **options: Any
) -> SnapshotHost:
    w = build_rig(gpus or rig_4x3090(), note="gates test variant", **options)
    if truncate_ports is not None:
        for path in [p for p in w.files if p.endswith(":01.1/config")]:
            w.files[path] = w.files[path][:truncate_ports]
    w.write(tmp_path / "rig")
    return SnapshotHost(tmp_path / "rig")


def test_the_example_rig_names_every_redirecting_port_its_bits_and_the_vm_caveat() -> None:
    [f] = step(run_doctor(SnapshotHost(EXAMPLE_HOST)), "pcie.acs")
    assert f.severity is Severity.WARN
    assert f.message.startswith(
        "ACS redirects peer-to-peer traffic to the root complex on 4 ports between the GPUs (0000:00:01.1, "
        "0000:20:01.1, 0000:40:01.1, 0000:60:01.1: P2P Request Redirect and P2P Completion Redirect on): 6 of 6 "
        "GPU pairs cross one"
    )
    assert f.evidence["0000:40:01.1"].startswith("ReqRedir+CmpltRedir (ACSCtl: SrcValid+ TransBlk- ReqRedir+")
    ports = ["0000:00:01.1", "0000:20:01.1", "0000:40:01.1", "0000:60:01.1"]  # the hint names them: it runs as printed
    assert "`" + "; ".join(f"setpci -s {p} ECAP_ACS+0x6.w=0000" for p in ports) + "`" in (f.fix or "")
    assert f"`pci=disable_acs_redir={';'.join(ports)}`" in (f.fix or "")
    assert "<port>" not in (f.fix or "")
    assert "ACS is what keeps devices passed to VMs isolated" in (f.fix or "")


def test_cleared_redirect_is_ok(tmp_path: Path) -> None:
    [f] = step(run_doctor(rig(tmp_path, acs_control=0x0001)), "pcie.acs")
    assert f.severity is Severity.OK
    assert f.message.startswith("no ACS redirect on the ports between the GPUs (ACS without redirect on 0000:00:01.1")


def test_without_root_acs_could_not_be_read(tmp_path: Path) -> None:
    [f] = step(run_doctor(rig(tmp_path, truncate_ports=64)), "pcie.acs")
    assert f.severity is Severity.INFO
    assert f.message.startswith("could not read ACS on 0000:00:01.1, 0000:20:01.1, 0000:40:01.1, 0000:60:01.1: only 64")
    assert f.fix == "sudo fwman doctor"


# -- slot width versus link training --------------------------------------------------------------------------------
def test_a_card_in_an_x4_slot_is_told_to_move(tmp_path: Path) -> None:
    gpus = rig_4x3090()
    gpus[2] = dataclasses.replace(gpus[2], width=4, slot_width=4)
    findings = step(run_doctor(rig(tmp_path, gpus)), "pcie.slot")
    [f] = [f for f in findings if f.severity is Severity.WARN]
    assert f.message.startswith("0000:41:00.0: the slot is x4 (port 0000:40:01.1 supports at most x4; the card x16)")
    assert "CPU-attached x16 slot" in (f.fix or "")


def test_a_link_that_trained_down_in_an_x16_slot_is_told_to_reseat(tmp_path: Path) -> None:
    gpus = rig_4x3090()
    gpus[1] = dataclasses.replace(gpus[1], width=8)
    [f] = [f for f in step(run_doctor(rig(tmp_path, gpus)), "pcie.slot") if f.severity is Severity.WARN]
    assert f.message == "0000:21:00.0: the link trained down to x8 in a slot whose port supports x16"
    assert (f.fix or "").startswith("reseat the card; replace or remove the riser")


def _card(speed: float, width: int) -> Card:
    link = LinkState(current_speed_gts=speed, max_speed_gts=16.0, current_width=width, max_width=16)
    return Card("0000:41:00.0", "10de", "2204", "3842", "3987", link=link)


def test_a_gen3_port_caps_the_speed_and_a_gen4_port_means_training() -> None:
    capped = slot_findings([SlotFacts("0000:41:00.0", _card(8.0, 16), "0000:40:01.1", 16, 8.0)], 4)
    assert capped[0].severity is Severity.WARN
    assert "supports at most 8 GT/s (Gen3) (the card 16 GT/s (Gen4)): the slot caps the speed" in capped[0].message
    trained = slot_findings([SlotFacts("0000:41:00.0", _card(8.0, 16), "0000:40:01.1", 16, 16.0)], 4)
    assert trained[0].severity is Severity.INFO and "not the slot" in trained[0].message
    unknown = slot_findings([SlotFacts("0000:41:00.0", _card(8.0, 8), problem="sits on a root bus")], 4)
    assert "cannot tell a narrow slot from a link that trained down" in unknown[0].message


# -- topology output of any shape ---------------------------------------------------------------------------------
# NVIDIA/nccl#933 (8 GPUs and 9 NICs, as GitHub shows it: space padded, the first row of that output)
REAL_NIC_TOPO = (
    "        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity\n"
    "GPU0     X      NV8     NODE    SYS     0-47,96-143     0\n"
    "GPU1    NV8      X      NODE    SYS     0-47,96-143     0\n"
    "NIC0    NODE    NODE     X      SYS\n"
    "NIC1    SYS     SYS     SYS      X\n"
)


def test_nic_rows_and_columns_and_space_padding_do_not_fail_the_gpu_matrix() -> None:
    m = parse_topo_matrix(REAL_NIC_TOPO)
    assert m.gpus == ["GPU0", "GPU1"] and m.cell("GPU0", "GPU1") == "NV8"
    assert m.cell("GPU0", "NIC1") == "SYS" and m.extra["GPU1"]["CPU Affinity"] == "0-47,96-143"


def test_older_device_names_and_words_in_non_gpu_cells_are_kept() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tPHB\tPXB\t0-31\nGPU1\tPHB\t X \tPIX\t0-31\nmlx5_0\tPXB\tPIX\t X \n"
    )
    m = parse_topo_matrix(text)
    assert m.devices == ["GPU0", "GPU1", "mlx5_0"] and m.cell("mlx5_0", "GPU1") == "PIX"


def test_the_disabled_by_regkey_cell_of_newer_drivers_parses() -> None:
    # noonghunna/club-3090#1229: a real 2x3090 `topo -p2p rw` legend lists "DR = Disabled by regkey"
    m = parse_p2p_matrix(" \tGPU0\tGPU1\t\n GPU0\tX\tDR\t\n GPU1\tDR\tX\t\n")
    assert m.cell("GPU0", "GPU1") == "DR"


def test_a_malformed_matrix_is_a_finding_never_a_crash(tmp_path: Path) -> None:
    w = build_rig(rig_4x3090(), note="malformed topo")
    broken = topo_m(rig_4x3090()).replace("NODE", "W@T", 1)
    from fwman.host.base import CommandResult

    w.add_command(CommandResult(("nvidia-smi", "topo", "-m"), 0, broken, "", False))
    w.write(tmp_path / "bad")
    r = FwmanEnv()("--snapshot", str(tmp_path / "bad"), "doctor", "--json")
    doc = json.loads(r.stdout)
    [f] = next(s for s in doc["steps"] if s["id"] == "nccl.level")["findings"]
    assert f["message"].startswith("could not check: unreadable output") and "W@T" in f["message"]


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("GPUNIC0123 \tXSYNODEPHBmlx_ OKCNSDRAffinity\n\x1b[4m")), max_size=400))
def test_topo_of_any_shape_is_a_matrix_or_a_parse_error(text: str) -> None:
    for parse in (parse_topo_matrix, parse_p2p_matrix):
        try:
            m = parse(text)
        except ParseError:
            continue
        for a in m.gpus:
            for b in m.gpus:
                m.cell(a, b)


def test_virtio_alone_decides_only_when_the_cpu_flags_are_unreadable() -> None:
    virtio = ("0000:00:01.0",)
    assert judge(VirtEvidence(virtio_functions=virtio)).guest is True
    bare = judge(VirtEvidence(cpu_flags=frozenset({"fpu"}), virtio_functions=virtio))
    assert bare.guest is False and bare.evidence["virtio PCI functions"] == "0000:00:01.0"


def test_the_new_checks_are_pure_over_facts() -> None:
    from fwman.core.errors import MissingError
    from fwman.gpu.acs import AcsReading
    from fwman.gpu.bridges import AcsFacts
    from fwman.gpu.inventory import Inventory
    from fwman.platform.virt import VirtVerdict
    from fwman.reports.doctor.checks.pcie import check_acs
    from fwman.reports.doctor.checks.platform import check_vm
    from fwman.reports.doctor.facts import Fact, Facts

    cards = [_card(16.0, 16), dataclasses.replace(_card(16.0, 16), bus_id="0000:61:00.0")]
    gone: Fact[Any] = Fact.failed(MissingError("not read in this test"))
    names = ("topo", "p2p_read", "audit", "catalog", "iommu", "passthrough", "workloads", "slots", "p2p_history")
    acs = AcsFacts(
        pairs={("0000:41:00.0", "0000:61:00.0"): ["0000:40:01.1", "0000:60:01.1"]},
        readings={
            "0000:40:01.1": AcsReading(AcsState.PRESENT, 4096, 0x200, 0x5F, 0x1D),
            "0000:60:01.1": AcsReading(AcsState.PRESENT, 4096, 0x200, 0x5F, 0x01),
        },
    )
    facts = Facts(
        inventory=Fact.known(Inventory(cards=cards)),
        virt=Fact.known(VirtVerdict(True, "kvm", {"dmi sys_vendor": "QEMU"})),
        acs=Fact.known(acs),
        fingerprint=gone,
        **{n: gone for n in names},
    )
    [vm] = check_vm(facts)
    assert vm.severity is Severity.WARN and vm.message.startswith("running inside a virtual machine guest (kvm)")
    found = check_acs(facts)
    assert found[0].severity is Severity.WARN and "on 1 port between the GPUs (0000:40:01.1:" in found[0].message
    assert found[-1].message.startswith("in a VM guest the ports above are emulated")
