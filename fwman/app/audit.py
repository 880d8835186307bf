"""``fwman audit`` as a use case: typed arguments in, an :class:`AuditReport` out (no click, no printing)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fwman.app.text import Cell, Out, Result, Span, say, table
from fwman.core.config import load_config
from fwman.core.errors import FwmanError, UsageError, VerificationError
from fwman.host.base import Host
from fwman.host.userfiles import user_path
from fwman.platform.containers import start_engine_reads
from fwman.reports.audit.model import AuditReport, Row


@dataclass(frozen=True)
class AuditRequest:
    """What the user asked for: extra roots (as typed: relative ones are taken from the current directory), extra
    forks (a known name, ``NAME=URL`` or a URL: ``forks.resolve_fork``), offline."""

    container_roots: tuple[str, ...] = ()
    fork_specs: tuple[str, ...] = ()
    offline: bool = False


ENGINE_KINDS = ("docker", "podman")
#: ContainerAudit fields that only a Docker/Podman container has
ENGINE_ONLY_FIELDS = (
    "engine_state",
    "image",
    "gpu",
    "cdi_devices",
    "legacy_hook",
    "injected",
    "filesystem",
    "nccl",
    "env",
    "mounts",
    "problems",
    "command",
    "vllm_cache",
    "vllm_cache_path",
    "vllm_cache_host_path",
)


@dataclass
class FixGroup:
    """Rows that one fix repairs (the five module files of a kernel; the same module on several kernels), with that
    fix once, naming every kernel."""

    rows: list[Row]
    fix: str | None


_KERNEL = re.compile(r"\(([^()\s]+)\)$")  # a row of one kernel ends with it: "nvidia.ko (6.8.12-4-pve)"


def fix_groups(rows: list[Row]) -> list[FixGroup]:
    """Return ``rows`` grouped by their fix, in the order each fix first appears; a row without a fix alone.

    Fixes that differ only in the kernel of their rows are one fix, naming the kernels in order: "for A, B" and
    "`--kernel A --kernel B`" (the modules build command takes the option once per kernel).
    """
    groups: dict[str, tuple[list[Row], list[str]]] = {}
    out: list[FixGroup | str] = []
    for r in rows:
        if r.fix is None:
            out.append(FixGroup([r], None))
            continue
        m = _KERNEL.search(r.component)
        kernel = m.group(1) if m and m.group(1) in r.fix else None
        key = r.fix if kernel is None else r.fix.replace(f"--kernel {kernel}", "\0").replace(kernel, "\1")
        if key not in groups:
            groups[key] = ([], [])
            out.append(key)
        members, kernels = groups[key]
        members.append(r)
        if kernel is not None and kernel not in kernels:
            kernels.append(kernel)

    def merged(key: str) -> FixGroup:
        members, kernels = groups[key]
        return FixGroup(
            members, key.replace("\0", " ".join(f"--kernel {k}" for k in kernels)).replace("\1", ", ".join(kernels))
        )

    return [item if isinstance(item, FixGroup) else merged(item) for item in out]


_COLOUR = {"match": "green", "mismatch": "red", "unknown": "yellow", "info": ""}


@dataclass
class Audit(Result):
    """``fwman audit``: the report, as a document (``fwman.audit/1``) and as the table people read."""

    report: AuditReport

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman audit --json`` (schema fwman.audit/1): the report, ``ok`` and ``counts``."""
        report = self.report
        payload: dict[str, Any] = report.model_dump(mode="json")
        if payload.get("userspace_hold") is None:  # no NVIDIA package, no hold, no .run installer: nothing to say
            payload.pop("userspace_hold", None)
        # no CDI spec, no engine asked, no prebuilt module package: nothing to say (and the keys of a host without
        # them stay as they were)
        for key in ("cdi_specs", "engine_problems", "prebuilt_modules"):
            if not payload.get(key):
                payload.pop(key, None)
        for container in payload.get("containers", []):
            if container.get("kind") not in ENGINE_KINDS:  # LXC and --container-root: the engine fields do not apply
                for key in ENGINE_ONLY_FIELDS:
                    container.pop(key, None)
        payload["ok"] = report.ok
        payload["counts"] = report.counts()
        return payload

    def text(self, verbose: int = 0) -> Out:
        """Return the reference version, one row per component, the details and fixes, P2P and the counts
        (what could not be read with ``verbose``)."""
        report = self.report
        out: Out = [say(f"Reference version: {report.reference or 'unknown'} ({report.reference_source})")]
        rows: list[list[Cell]] = [
            [r.component, r.version or "-", Span(r.status, _COLOUR[r.status]), r.where] for r in report.rows
        ]
        out.append(table(["COMPONENT", "VERSION", "STATUS", "WHERE"], rows))
        details = [r for r in report.rows if (r.detail and r.status != "info") or r.fix]
        out += [say()] if details else []
        for group in fix_groups(details):
            for r in group.rows:
                out.append(say(f"{r.component}: {r.detail}" if r.detail else f"{r.component}:"))
            out += [say(f"  fix: {group.fix}")] if group.fix else []
        from fwman.reports.audit.p2p import p2p_line  # with the report's modules: see audit()

        out += [say(), say(p2p_line(report.p2p))]
        if report.unreadable and verbose:
            out.append(say("not readable: " + "; ".join(report.unreadable), err=True))
        counts = report.counts()
        summary = f"{counts['match']} match, {counts['mismatch']} mismatch, {counts['unknown']} unknown"
        return [*out, say(summary + ("" if report.ok else " -> NOT consistent"))]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when something does not match or is unknown."""
        report = self.report
        if report.ok:
            return None
        counts = report.counts()
        return VerificationError(
            f"audit: {counts['mismatch']} mismatch(es), {counts['unknown']} unknown",
            hint="the lines after the table say what to fix; --json has every detail",
        )


def audit(host: Host, request: AuditRequest, variables: Mapping[str, str], *, replay: bool) -> Audit:
    """Return the audit of ``host``. A replay (``replay``) lists fork branches from the recorded cache only. Raises
    UsageError when a container root is not a directory, and what the configuration loader raises for a bad
    /etc/fwman/config.toml or fork spec."""
    roots = []
    for given in request.container_roots:
        # a relative DIR means the current directory on this machine (host paths are absolute)
        path = given if given.startswith("/") else user_path(given)
        if not host.is_dir(path):
            raise UsageError(f"--container-root {given}: not a directory", hint="give a mounted root filesystem")
        roots.append(path)
    config = load_config(host)
    # the container engines answer (`ps`, then `inspect`) in their own processes while the rest of audit is
    # imported and the host is read: asked first, they are the longest wait of an audit
    engine_reads = start_engine_reads(host)
    # imported only now, so that the engines' commands run meanwhile (tests/unit/cli/test_fast_path_imports.py)
    from fwman.driver.forks.config import configured_forks
    from fwman.driver.forks.forge import api_base
    from fwman.reports.audit.report import audit_host

    # a replay must not reach the network: the forks are looked up in the recorded cache only
    return Audit(
        audit_host(
            host,
            container_roots=roots,
            forks=configured_forks(config, request.fork_specs),
            offline=request.offline or replay,
            api=api_base(config, variables),
            engine_reads=engine_reads,
        )
    )
