"""P2P branch names of the forks: ``<exact version>-p2p``, and the nearest versions a fork carries.

A P2P branch of a fork is named ``<exact version>-p2p``; every other branch name (``515``, ``VK551_06``,
``main``) is an inherited NVIDIA branch and not a P2P build. The version itself is
:class:`fwman.core.driver_version.DriverVersion`.
"""

from __future__ import annotations

from fwman.core.driver_version import P2P_SUFFIX, DriverVersion
from fwman.core.errors import ParseError


def parse_p2p_branch(name: str) -> DriverVersion | None:
    """Return the driver version a ``<version>-p2p`` branch carries, or None for any other branch name.

    ``refs/heads/`` in front is accepted. Never raises.
    """
    if name.startswith("refs/heads/"):
        name = name[len("refs/heads/") :]
    if not name.endswith(P2P_SUFFIX):
        return None
    version_text = name[: -len(P2P_SUFFIX)]
    # parse() tolerates surrounding whitespace; a branch name with whitespace is not a P2P branch
    if version_text != version_text.strip():
        return None
    try:
        return DriverVersion.parse(version_text)
    except ParseError:
        return None


def nearest(target: DriverVersion, available: list[DriverVersion]) -> tuple[DriverVersion | None, DriverVersion | None]:
    """Return (the highest version below ``target``, the lowest above it) among ``available``; None where none."""
    below = [v for v in available if v < target]
    above = [v for v in available if v > target]
    return (max(below) if below else None, min(above) if above else None)
