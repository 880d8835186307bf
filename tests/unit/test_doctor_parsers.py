"""Pure parsers behind fwman doctor: kernel command line, env files, systemd units, LXC and VM configs, NCCL
levels. Examples from real formats, and hypothesis: any text gives a value, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.reports.doctor.parsers import (
    disables_custom_all_reduce,
    hostpci_lines,
    mentions_vllm,
    nccl_level_covers,
    nccl_level_needed,
    parse_cmdline,
    parse_env_file,
    parse_lxc_environment,
    parse_unit_environment,
    topo_rank,
)

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


def test_cmdline_reads_iommu_parameters_last_one_wins_and_stops_at_init_arguments() -> None:
    c = parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet amd_iommu=on iommu=off iommu=pt -- iommu=off single\n")
    assert (c.iommu, c.amd_iommu, c.intel_iommu) == ("pt", "on", None)
    assert c.passthrough and not c.disabled
    assert c.tokens == ["amd_iommu=on", "iommu=off", "iommu=pt"]
    assert parse_cmdline("intel_iommu=on,pt").passthrough
    assert parse_cmdline("intel_iommu=off").disabled and parse_cmdline("iommu=off").disabled
    assert parse_cmdline("").tokens == [] and not parse_cmdline("").passthrough


def test_env_file_forms() -> None:
    text = (
        "# comment\n\nexport NCCL_P2P_LEVEL=SYS\nA='x y'\nB=\"q # not a comment\"\nC=plain # trailing\n"
        "not an assignment\n1BAD=x\nEMPTY=\n"
    )
    assert parse_env_file(text) == {
        "NCCL_P2P_LEVEL": "SYS",
        "A": "x y",
        "B": "q # not a comment",
        "C": "plain",
        "EMPTY": "",
    }


def test_unit_environment_quotes_continuations_and_files() -> None:
    unit = (
        "[Unit]\nDescription=vLLM\n[Service]\n"
        'Environment="NCCL_DEBUG=INFO" NCCL_P2P_LEVEL=SYS "CUDA_VISIBLE_DEVICES=0,1"\n'
        "Environment=HF_HOME=/models\n# Environment=NCCL_P2P_LEVEL=LOC\n"
        "EnvironmentFile=-/etc/default/vllm\n"
        "ExecStart=/opt/bin/vllm serve m \\\n  --disable-custom-all-reduce\n"
    )
    env, files, execs = parse_unit_environment(unit)
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_P2P_LEVEL": "SYS", "CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": "/models"}
    assert files == ["/etc/default/vllm"]
    assert len(execs) == 1 and disables_custom_all_reduce(execs[0]) and mentions_vllm(execs[0])
    # bad quoting falls back to whitespace-separated words instead of failing; the broken word is skipped
    assert parse_unit_environment('Environment="A=1 B=2\n')[0] == {"B": "2"}


def test_lxc_environment_current_section_only() -> None:
    conf = (
        "arch: amd64\nlxc.environment: NCCL_P2P_LEVEL=SYS\nlxc.environment = NCCL_DEBUG=INFO\n"
        "lxc.environment: garbage\n[snap1]\nlxc.environment: NCCL_P2P_LEVEL=LOC\n"
    )
    assert parse_lxc_environment(conf) == {"NCCL_P2P_LEVEL": "SYS", "NCCL_DEBUG": "INFO"}


def test_hostpci_lines_current_section_only() -> None:
    conf = "boot: order=scsi0\nhostpci0: 0000:81:00.0,pcie=1\nhostpci1 : 82:00\n[pending]\nhostpci2: 0000:83:00.0\n"
    assert hostpci_lines(conf) == ["hostpci0: 0000:81:00.0,pcie=1", "hostpci1 : 82:00"]


@pytest.mark.parametrize(
    ("cells", "needed"),
    [
        (["NV4"], None),
        (["PIX", "PXB"], None),
        (["PHB"], "PHB"),
        (["PXB", "NODE"], "SYS"),
        (["SYS", "PHB"], "SYS"),
        ([], None),
    ],
)
def test_nccl_level_needed(cells: list[str], needed: str | None) -> None:
    assert nccl_level_needed(cells) == needed


def test_nccl_level_covers() -> None:
    assert nccl_level_covers("SYS", "SYS") and nccl_level_covers("sys ", "PHB")
    assert nccl_level_covers("PHB", "PHB") and not nccl_level_covers("PHB", "SYS")
    assert nccl_level_covers("LOC", "PHB") is False
    assert nccl_level_covers("4", "SYS") is None and nccl_level_covers("NODE", "SYS") is None
    assert topo_rank("NV12") < topo_rank("PIX") < topo_rank("NODE") < topo_rank("SYS") < topo_rank("???")


def test_vllm_detection() -> None:
    assert mentions_vllm("python -m vllm.entrypoints.openai.api_server")
    assert not mentions_vllm("VLLM_PORT=8000")  # a variable name is not a command
    assert disables_custom_all_reduce("disable_custom_all_reduce: true")
    assert not disables_custom_all_reduce("--disable-custom-all-reduce-not")


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_parsers_never_raise(text: str) -> None:
    c = parse_cmdline(text)
    assert isinstance(c.passthrough, bool) and isinstance(c.disabled, bool)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parse_env_file(text).items())
    env, files, execs = parse_unit_environment(text)
    assert isinstance(env, dict) and isinstance(files, list) and isinstance(execs, list)
    assert isinstance(parse_lxc_environment(text), dict)
    assert all(line.startswith("hostpci") for line in hostpci_lines(text))
    assert isinstance(mentions_vllm(text), bool) and isinstance(disables_custom_all_reduce(text), bool)
    assert nccl_level_covers(text, "SYS") in (True, False, None)
    topo_rank(text)
