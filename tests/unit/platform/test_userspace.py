"""The user-space driver reader's pure parsers: versioned library names and ``nvidia-smi --version``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.platform.userspace import parse_lib_name, parse_smi_version


def test_lib_name_and_smi_parsers() -> None:
    assert parse_lib_name("libcuda.so.570.86.16") == ("libcuda", "570.86.16")
    assert parse_lib_name("libnvidia-ml.so.595.71.05") == ("libnvidia-ml", "595.71.05")
    assert parse_lib_name("libGLX_nvidia.so.565.77") == ("libGLX_nvidia", "565.77")
    assert parse_lib_name("libcuda.so.1") is None
    assert parse_lib_name("libcuda.so") is None
    assert parse_lib_name("libcudart.so.12.8.90") is None  # the CUDA runtime is not the driver
    assert parse_lib_name("libnvidia-ml.so.1") is None
    assert parse_smi_version("NVIDIA-SMI version  : 570.86.16\nDRIVER version      : 570.86.16\n") == "570.86.16"
    banner = "| NVIDIA-SMI 580.95.05     Driver Version: 580.95.05     CUDA Version: 13.0     |"
    assert parse_smi_version(banner) == "580.95.05"
    assert parse_smi_version("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_property_userspace_parsers_never_raise(text: str) -> None:
    parse_smi_version(text)
    got = parse_lib_name(text)
    if got is not None:
        assert text.endswith(got[1])
