"""Where a PCI function sits in the tree, and which bridges the traffic between two functions crosses.

sysfs names every function by its place: ``/sys/bus/pci/devices/0000:41:00.0`` links to
``/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0``, whose parent directories are the bridges above it (root
port first) and whose top ``pci0000:40`` is the host bridge (root bus). The functions here are pure over such
paths; :func:`device_path` is the one that asks a Host.
"""

from __future__ import annotations

import re

from fwman.core import paths
from fwman.host.base import Host

_FUNCTION = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT_BUS = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")


def device_path(host: Host, bus_id: str) -> str:
    """Return the real sysfs directory of function ``bus_id`` (``/sys/devices/pci.../<bus_id>``).

    Raises MissingError when sysfs does not have it, NotRecordedError on a snapshot that did not record it.
    """
    return host.realpath(f"{paths.PCI_DEVICES_DIR}/{bus_id}")


def chain(path: str) -> list[str]:
    """Return the bus ids of the bridges above the function at sysfs ``path``, nearest first (root port last).

    Components that are not function names (``pci0000:40``, virtual bus directories) are skipped.
    """
    parts = [p for p in path.split("/") if p]
    names = [p for p in parts[:-1] if _FUNCTION.match(p)]
    return list(reversed(names))


def root_bus(path: str) -> str | None:
    """Return the host bridge (``pci0000:40``) that function ``path`` hangs off, None when it names none."""
    return next((p for p in path.split("/") if _ROOT_BUS.match(p)), None)


def crossed_bridges(path_a: str, path_b: str) -> list[str]:
    """Return the bridges that traffic between the functions at ``path_a`` and ``path_b`` passes through.

    That is every bridge above each function below the lowest one they share: where the two meet (a switch's
    upstream port, or nothing when they sit under different root ports) the traffic turns, and every port it
    entered on the way there is one whose ACS controls apply. Order: ``a``'s side nearest first, then ``b``'s.
    """
    a, b = chain(path_a), chain(path_b)
    shared = set(a) & set(b) if root_bus(path_a) == root_bus(path_b) else set()
    return [x for x in a if x not in shared] + [x for x in b if x not in shared and x not in a]


def upstream_bridge(path: str) -> str | None:
    """Return the bridge directly above the function at ``path`` (its slot's port), None when on a root bus."""
    above = chain(path)
    return above[0] if above else None


def bridge_dir(path: str, bridge: str) -> str | None:
    """Return the sysfs directory of ``bridge`` inside function path ``path``, None when not on it."""
    parts = path.split("/")
    if bridge not in parts:
        return None
    return "/".join(parts[: parts.index(bridge) + 1])
