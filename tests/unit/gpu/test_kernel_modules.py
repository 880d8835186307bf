"""Which module names are NVIDIA's driver (audit's rows, the flash's 'driver loaded' gate)."""

from __future__ import annotations

import pytest

from fwman.gpu.kernel_modules import MODULE_NAMES, is_driver_module


@pytest.mark.parametrize("name", [*MODULE_NAMES, "nvidia_uvm", "nvidia-current", "nvidia_current_drm"])
def test_the_driver_modules_in_either_spelling(name: str) -> None:
    assert is_driver_module(name)


@pytest.mark.parametrize("name", ["nvidiafb", "nvidia_wmi_ec_backlight", "nvidia-wmi-ec-backlight", "i2c_nvidia_gpu"])
def test_in_tree_drivers_that_share_the_prefix_are_not(name: str) -> None:
    assert not is_driver_module(name)
