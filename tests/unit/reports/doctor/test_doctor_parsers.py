"""Doctor's own pure parsers: kernel command line, NCCL levels, vLLM flags (env files, units and Proxmox configs:
test_platform.py). Examples from real formats, and hypothesis: any text gives a value, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.reports.doctor.parsers import (
    disables_custom_all_reduce,
    mentions_vllm,
    nccl_level_covers,
    nccl_level_needed,
    parse_cmdline,
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
    assert isinstance(mentions_vllm(text), bool) and isinstance(disables_custom_all_reduce(text), bool)
    assert nccl_level_covers(text, "SYS") in (True, False, None)
    topo_rank(text)
