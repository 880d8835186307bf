"""Parsers of sysfs attributes, config space, nvidia-smi XML and topo matrices: exact on known input, and any
input gives a model or a ParseError, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.hostgen.pci import GIB, MIB, ConfigSpec, build_config_space, gpu_resource
from fixtures.hostgen.rig import rig_4x3090, smi_xml, topo_m, topo_p2p
from fwman.core.errors import ParseError
from fwman.gpu.config_space import parse_config_space
from fwman.gpu.smi import normalise_bus_id, parse_smi_xml
from fwman.gpu.sysfs import parse_hex_id, parse_link_speed, parse_resource
from fwman.gpu.topo import parse_p2p_matrix, parse_topo_matrix

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- sysfs -----------------------------------------------------------------------------------------------
def test_resource_bar1_size() -> None:
    bars = parse_resource(gpu_resource(0xF0000000, 0x7000000000, 32 * GIB, 0x7800000000, 0xE000))
    assert bars[1].size == 32 * GIB
    assert bars[0].size == 16 * MIB
    assert bars[2].size == 0  # upper half of the 64-bit BAR1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("16.0 GT/s PCIe\n", 16.0), ("2.5 GT/s PCIe", 2.5), ("8.0 GT/s", 8.0), ("Unknown", None), ("", None)],
)
def test_link_speed(text: str, expected: float | None) -> None:
    assert parse_link_speed(text) == expected


def test_bad_sysfs_values_name_what_is_wrong() -> None:
    with pytest.raises(ParseError, match="line 2"):
        parse_resource("0x0 0x0 0x0\n0xzz 0x1 0x2\n")
    with pytest.raises(ParseError, match="end address before start"):
        parse_resource("0x2000 0x1000 0x0\n")
    with pytest.raises(ParseError, match="0xNNNN"):
        parse_hex_id("nvidia", "vendor")


@FUZZ
@given(st.text(max_size=300))
def test_sysfs_parsers_never_crash(text: str) -> None:
    for parse in (parse_resource, parse_link_speed, lambda t: parse_hex_id(t, "x")):
        try:
            parse(text)
        except ParseError:
            pass


# -- config space ----------------------------------------------------------------------------------------
@FUZZ
@given(
    st.sampled_from([2.5, 5.0, 8.0, 16.0, 32.0]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.sampled_from([2.5, 5.0, 8.0, 16.0]),
    st.sampled_from([1, 4, 8, 16]),
    st.lists(st.integers(min_value=20, max_value=47), unique=True, max_size=20),
    st.integers(min_value=20, max_value=40),
)
def test_config_space_round_trip(
    max_speed: float, max_width: int, speed: float, width: int, rebar_bits: list[int], current_bit: int
) -> None:
    sizes = sorted(1 << b for b in rebar_bits)
    spec = ConfigSpec(
        vendor=0x10DE,
        device=0x2204,
        subsystem_vendor=0x3842,
        subsystem_device=0x3987,
        max_speed=max_speed,
        max_width=max_width,
        speed=speed,
        width=width,
        rebar_sizes=sizes,
        rebar_current=1 << current_bit,
    )
    cfg = parse_config_space(build_config_space(spec))
    assert (cfg.vendor_id, cfg.device_id, cfg.subsystem_vendor_id, cfg.subsystem_device_id) == (
        "10de",
        "2204",
        "3842",
        "3987",
    )
    assert (cfg.link_max_speed_gts, cfg.link_max_width, cfg.link_speed_gts, cfg.link_width) == (
        max_speed,
        max_width,
        speed,
        width,
    )
    entry = cfg.rebar_for(1)
    if sizes:
        assert entry is not None and entry.supported_bytes == sizes and entry.current_bytes == 1 << current_bit
    else:
        assert entry is None


def test_config_space_as_non_root_shows_only_the_header() -> None:
    full = build_config_space(ConfigSpec(vendor=0x10DE, device=0x2204, rebar_sizes=[32 * GIB]))
    cfg = parse_config_space(full[:64])
    assert cfg.vendor_id == "10de" and cfg.rebar == [] and not cfg.extended_visible


def test_config_space_loop_is_an_error_not_a_hang() -> None:
    data = bytearray(build_config_space(ConfigSpec(vendor=0x10DE, device=0x2204)))
    data[0x79] = 0x60  # PCIe capability points back to the first one
    with pytest.raises(ParseError, match="loop"):
        parse_config_space(bytes(data))


def test_hidden_extended_capabilities_are_handled() -> None:
    data = bytearray(build_config_space(ConfigSpec(vendor=0x10DE, device=0x2204, rebar_sizes=[GIB])))
    data[0x100:0x104] = b"\0\0\0\0"  # a hypervisor hides the list
    assert parse_config_space(bytes(data)).rebar == []


@FUZZ
@given(st.binary(max_size=4096))
def test_config_space_any_bytes(data: bytes) -> None:
    try:
        parse_config_space(data)
    except ParseError as e:
        assert e.field


@FUZZ
@given(st.data())
def test_config_space_flipped_bytes(data: st.DataObject) -> None:
    raw = bytearray(build_config_space(ConfigSpec(vendor=0x10DE, device=0x2204, rebar_sizes=[GIB, 32 * GIB])))
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, 0x200))] = data.draw(st.integers(0, 255))
    try:
        parse_config_space(bytes(raw))
    except ParseError:
        pass


# -- nvidia-smi XML --------------------------------------------------------------------------------------
def test_smi_xml_of_the_example_rig() -> None:
    log = parse_smi_xml(smi_xml(rig_4x3090()))
    assert log.driver_version == "570.86.16" and log.cuda_version == "12.8"
    g = log.gpus[2]
    assert g.bus_id == "0000:41:00.0"
    assert (g.vendor_id, g.device_id, g.subsystem_vendor_id, g.subsystem_device_id) == ("10de", "2204", "3842", "3987")
    assert g.vbios_version == "94.02.26.48.15"
    assert g.vram_bytes == 24 * GIB and g.bar1_bytes == 256 * MIB
    assert (g.power_limit_w, g.default_power_limit_w) == (420.0, 420.0)
    assert (g.pcie_gen_max, g.link_width_current) == (4, 16)
    assert g.persistence_mode is True  # what `driver power --persistence` reads back


def test_smi_xml_persistence_mode_enabled_disabled_or_not_said() -> None:
    def mode(value: str) -> bool | None:
        xml = f'<nvidia_smi_log><gpu id="00000000:0A:00.0">{value}</gpu></nvidia_smi_log>'
        return parse_smi_xml(xml).gpus[0].persistence_mode

    assert mode("<persistence_mode>Enabled</persistence_mode>") is True
    assert mode("<persistence_mode>Disabled</persistence_mode>") is False
    assert mode("<persistence_mode>N/A</persistence_mode>") is None and mode("") is None


def test_smi_xml_older_power_element_and_na_fields() -> None:
    xml = """<nvidia_smi_log><driver_version>535.54.03</driver_version>
    <gpu id="00000000:0A:00.0"><product_name>NVIDIA GeForce RTX 3090</product_name>
    <vbios_version>94.02.26.48.15</vbios_version><board_id>N/A</board_id>
    <power_readings><power_limit>350.00 W</power_limit><default_power_limit>350.00 W</default_power_limit>
    </power_readings><bar1_memory_usage><total>[N/A]</total></bar1_memory_usage></gpu></nvidia_smi_log>"""
    g = parse_smi_xml(xml).gpus[0]
    assert g.bus_id == "0000:0a:00.0" and g.power_limit_w == 350.0 and g.board_id is None and g.bar1_bytes is None


def test_smi_xml_refuses_entities_and_foreign_documents() -> None:
    with pytest.raises(ParseError, match="entity"):
        parse_smi_xml('<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>')
    with pytest.raises(ParseError, match="root element"):
        parse_smi_xml("<html/>")
    with pytest.raises(ParseError, match="not well-formed"):
        parse_smi_xml("<nvidia_smi_log><gpu>")


def test_bus_id_normalisation() -> None:
    assert normalise_bus_id("00000000:41:00.0") == "0000:41:00.0"
    assert normalise_bus_id("0000:C1:00.0") == "0000:c1:00.0"


@FUZZ
@given(st.text(max_size=500))
def test_smi_xml_any_text(text: str) -> None:
    try:
        parse_smi_xml(text)
    except ParseError:
        pass


@FUZZ
@given(st.data())
def test_smi_xml_mutated(data: st.DataObject) -> None:
    xml = smi_xml(rig_4x3090()[:1])
    cut = data.draw(st.integers(0, len(xml)))
    insert = data.draw(st.text(max_size=20))
    try:
        parse_smi_xml(xml[:cut] + insert + xml[cut + data.draw(st.integers(0, 30)) :])
    except ParseError:
        pass


# -- topo ------------------------------------------------------------------------------------------------
def test_topo_matrix_of_the_example_rig() -> None:
    m = parse_topo_matrix(topo_m(rig_4x3090()))
    assert m.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert m.cell("GPU0", "GPU3") == "NODE" and m.cell("GPU2", "GPU2") == "X"
    assert m.extra["GPU1"]["CPU Affinity"] == "0-31" and m.extra["GPU1"]["NUMA Affinity"] == "0"


def test_p2p_matrix_of_the_example_rig() -> None:
    m = parse_p2p_matrix(topo_p2p(rig_4x3090(), "CNS"))
    assert {m.cell(a, b) for a in m.gpus for b in m.gpus if a != b} == {"CNS"}


def test_topo_of_the_real_single_gpu_host() -> None:
    from tests.support.env import HOSTS

    snap = HOSTS / "h200-1gpu"
    from fwman.host.snapshot import SnapshotHost

    host = SnapshotHost(snap)
    m = parse_topo_matrix(host.run(["nvidia-smi", "topo", "-m"]).stdout)
    assert m.gpus == ["GPU0"] and m.cell("GPU0", "GPU0") == "X" and m.extra["GPU0"]["CPU Affinity"] == "0-15"
    p = parse_p2p_matrix(host.run(["nvidia-smi", "topo", "-p2p", "r"]).stdout)
    assert p.gpus == ["GPU0"] and p.cell("GPU0", "GPU0") == "X"


def test_topo_errors_name_the_place() -> None:
    with pytest.raises(ParseError, match="GPU0"):
        parse_topo_matrix("nothing here\n")
    with pytest.raises(ParseError, match="unknown value"):
        parse_p2p_matrix("\tGPU0\tGPU1\nGPU0\tX\tWAT\nGPU1\tOK\tX\n")


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("GPU0123 \tXSYNODEPHBOKCN\n\x1b[4m")), max_size=300))
def test_topo_any_text(text: str) -> None:
    for parse in (parse_topo_matrix, parse_p2p_matrix):
        try:
            parse(text)
        except ParseError:
            pass


def test_a_link_says_narrow_slow_and_downtrained_from_one_rule() -> None:
    from fwman.gpu.card import LinkState

    narrow = LinkState(16.0, 16.0, 8, 16)
    slow = LinkState(2.5, 16.0, 16, 16)
    full = LinkState(16.0, 16.0, 16, 16)
    assert (narrow.narrow, narrow.slow, narrow.downtrained) == (True, False, True)
    assert (slow.narrow, slow.slow, slow.downtrained) == (False, True, True)
    assert (full.narrow, full.slow, full.downtrained) == (False, False, False)
    half = LinkState(current_width=8, max_width=16)  # the speed unreadable: the width still tells
    assert (half.narrow, half.slow, half.downtrained) == (True, None, True)
    assert LinkState().downtrained is None
