"""The box's P2P target: what ``/etc/fwman/config.toml`` declares, completed where it is silent.

``fwman plan`` and ``fwman apply`` (fwman.app.plan) bring the host to it. The one open choice is the source of the
patched modules; everything else (hooks, the DKMS block, the module options, the user-space hold) has one right
state. The source is, first to last:

1. ``[modules]`` of config.toml (``driver-version``, ``fork`` + ``branch``, or ``source``), or the source an earlier
   ``fwman modules build`` remembered (the hook and the catch-up build from the same one);
2. otherwise the loaded module's driver version, from a fork that carries a P2P branch of it (``fwman audit``'s
   branch listing: the forks' cache, live where the cache is stale): the newest revision of that fork's branches
   for this host's GPUs, as ``fwman modules build --driver-version`` picks it.

Where neither can be had the target has no source, and the plan says what to decide (a named manual step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.core.config import load_config
from fwman.core.errors import FwmanError
from fwman.driver.build.source import SourceSpec, load_source_spec
from fwman.driver.versions import parse_p2p_branch
from fwman.host.base import Host
from fwman.reports.audit.model import AuditReport


@dataclass(frozen=True)
class Target:
    """The source the patched modules are built from, and why; ``problem`` when there is none yet."""

    spec: SourceSpec | None
    version: str | None  # the driver version the source builds, where known before a checkout
    why: str
    problem: FwmanError | None = field(default=None, compare=False)

    def describe(self) -> str:
        """Return one line: the source (and the version), or why there is none."""
        if self.spec is None:
            return f"no module source yet: {self.why}"
        at = f"driver {self.version}: " if self.version else ""
        return f"{at}{self.spec.describe()} ({self.why})"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"version", "fork", "branch", "source", "why", "problem", "fix"}`` (None where unknown)."""
        spec = self.spec
        return {
            "version": self.version,
            "fork": spec.fork if spec else None,
            "branch": spec.branch if spec else None,
            "source": spec.source_dir if spec else None,
            "why": self.why,
            "problem": None if self.problem is None else self.problem.message,
            "fix": None if self.problem is None else self.problem.hint,
        }


def _version_of(spec: SourceSpec) -> str | None:
    """Return the driver version a branch name says it builds (``570.86.16-p2p-v2``: 570.86.16), None if none."""
    parsed = parse_p2p_branch(spec.branch) if spec.branch else None
    return None if parsed is None else str(parsed)


def resolve_target(host: Host, audit: AuditReport | None) -> Target:
    """Return the module source the box should build from (see the module docstring for the order).

    ``audit``: the host's audit (its loaded module and the forks that carry its version), None where it could
    not be read. Never raises: a source that cannot be resolved is the target's ``problem``.
    """
    from fwman.app.modules.build import BuildRequest, configured_driver_version, source_spec

    try:
        configured = configured_driver_version(host)
        remembered = load_source_spec(host) if configured is None else None
    except FwmanError as e:
        return Target(None, None, "the configuration cannot be read", e)
    if configured is not None:
        fork, version = configured
        why = f"[modules] driver-version of {load_config(host).path}"
        try:
            return Target(source_spec(host, BuildRequest(fork=fork, driver_version=version)), version, why)
        except FwmanError as e:
            return Target(None, version, why, e)
    if remembered is not None:
        configured_here = remembered.origin != "--fork"  # [modules] of config.toml, else the last build's record
        why = remembered.origin if configured_here else "the source the last `fwman modules build` remembered"
        return Target(remembered, _version_of(remembered), why)
    loaded = audit.loaded if audit is not None else None
    running = loaded.version if loaded is not None else None
    if running is None:
        return Target(None, None, "no driver version is configured and no NVIDIA module is loaded",
                      FwmanError("choose the driver version to build",
                                 hint="`fwman driver branches` lists the versions the forks carry; set [modules] "
                                      "driver-version in /etc/fwman/config.toml"))  # fmt: skip
    version = running
    carriers = audit.p2p.forks if audit is not None and audit.p2p.status == "available" else []
    why = (
        f"the loaded module's version, carried by {', '.join(carriers)}" if carriers else "the loaded module's version"
    )
    if not carriers:
        nearest = [v for v in (audit.p2p.nearest_above, audit.p2p.nearest_below) if v] if audit is not None else []
        move = f"; or move to a version a fork carries (`fwman driver move --to {nearest[0]}`)" if nearest else ""
        return Target(None, version, why, FwmanError(
            f"no fork is known to carry a P2P branch of driver {version}",
            hint=f"`fwman driver branches --driver-version {version}` lists who carries it{move}"))  # fmt: skip
    try:
        spec = source_spec(host, BuildRequest(fork=carriers[0], driver_version=version))
    except FwmanError as e:
        return Target(None, version, why, e)
    return Target(spec, version, why)
