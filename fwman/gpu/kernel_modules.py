"""The NVIDIA kernel modules, by the two names each one has.

A module's *file* is named with dashes (``nvidia-uvm.ko``), and depmod, modinfo and fwman's install manifest use
that name; the *loaded* module is named with underscores (``nvidia_uvm`` in ``/proc/modules`` and for
``modprobe -r``). Every place that lists the modules uses one of these two tuples.
"""

from __future__ import annotations

#: file names (without ``.ko``), as built by the open kernel modules and recorded in fwman's manifest
MODULE_NAMES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")

#: loaded names, in an order that ``modprobe -r`` accepts (users of ``nvidia`` first)
UNLOAD_ORDER = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")


def loaded_name(file_name: str) -> str:
    """Return the loaded-module name of a module file name (``nvidia-uvm`` -> ``nvidia_uvm``)."""
    return file_name.replace("-", "_")


#: in-tree modules whose names begin like the driver's but are other drivers: the framebuffer driver and the
#: laptop backlight driver (drivers/platform/x86/nvidia-wmi-ec-backlight.c) that every Debian 6.1 kernel ships
NOT_THE_DRIVER = frozenset({"nvidiafb", "nvidia_wmi_ec_backlight"})


def is_driver_module(name: str) -> bool:
    """Return True when module ``name`` (as loaded or normalised by depmod) is one of NVIDIA's driver modules.

    By name, not by place: NVIDIA's installer puts its modules under ``kernel/drivers/video/``, DKMS and fwman
    under ``updates/``, Debian's packages rename them (``nvidia-current``); only the in-tree drivers of
    ``NOT_THE_DRIVER`` share the prefix.
    """
    name = loaded_name(name)
    return (name == "nvidia" or name.startswith("nvidia_")) and name not in NOT_THE_DRIVER
