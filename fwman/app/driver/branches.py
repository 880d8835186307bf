"""``fwman driver branches``: which driver versions the P2P forks carry, or who carries one version. Typed arguments in,
a result model out; no click. The CLI renders :class:`BranchesResult` as a table or, through
:meth:`BranchesResult.to_json`, as ``fwman.driver-branches/1``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fwman.app.text import Line, Out, Result, Span, say, table
from fwman.core import names
from fwman.core.config import load_config
from fwman.core.driver_version import DriverVersion
from fwman.core.errors import FwmanError, MissingError, PartialError
from fwman.core.jsonout import encode
from fwman.driver.families import PLAIN, CardMemory, describe, host_family
from fwman.driver.forks.config import configured_forks
from fwman.driver.forks.forge import api_base
from fwman.driver.forks.listing import choose_revision, list_branches
from fwman.driver.forks.model import BranchReport, ForkBranches, human_age, utc_text
from fwman.driver.versions import Revision, parse_p2p_branch
from fwman.gpu.inventory import scan_cards
from fwman.host.base import Host


@dataclass
class BranchesResult(Result):
    """The listing of every fork, and the answer for one version when one was asked."""

    report: BranchReport
    target: DriverVersion | None
    answer: dict[str, Any] | None  # version_answer() for ``target``
    #: the family this host's GPUs need (families.host_family; None: they need different ones)
    gpu_family: str | None = PLAIN

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.driver-branches/1`` (without the schema key)."""
        now = self.report.now
        fork_rows = [
            {
                "fork": f.fork,
                "url": f.url,
                "source": f.source,
                "fetched_at": f.fetched_at.isoformat() if f.fetched_at else None,
                "age_seconds": f.age_seconds(now),
                "error": f.error,
                "p2p_versions": [str(v) for v in f.p2p_versions()],
                "revisions": {str(v): encode(f.revisions_of(v)) for v in f.p2p_versions()},
                "donor": encode(f.donor),
                "default_branches": self.chosen(f),
            }
            for f in self.report.forks
        ]
        result: dict[str, Any] = {"forks": fork_rows, "gpu_family": self.gpu_family}
        if self.answer is not None:
            result.update(self.answer)
        return result

    def chosen(self, fork: ForkBranches) -> dict[str, str]:
        """Return {version: the branch ``modules build --driver-version`` builds for this host's GPUs}."""
        family = self.gpu_family
        if family is None:
            return {}
        picks = {str(v): choose_revision(fork.revisions_of(v), family) for v in fork.p2p_versions()}
        return {v: p[0].branch for v, p in picks.items() if p}

    def text(self, verbose: int = 0) -> Out:
        """Return the forks and their versions, every revision, the listing notes and the version's answer."""
        forks, now = self.report.forks, self.report.now
        out: Out = [table(["FORK", "SOURCE", "AGE", "P2P VERSIONS"], [
            [f.fork, f.source, human_age(f.age_seconds(now)) if f.available else "-",
             ", ".join(str(v) for v in f.p2p_versions()) or ("(none)" if f.available else "(unavailable)")]
            for f in forks
        ])]  # fmt: skip
        chosen = {f.fork: self.chosen(f) for f in forks}
        revisions = [
            [str(v), f.fork, r.family, str(r.revision) if r.revision is not None else "-",
             _branch_cell(r.branch, r.patch_sha256) + (" *" if chosen[f.fork].get(str(v)) == r.branch else ""),
             utc_text(r.date), (r.commit or "unknown")[:12],
             "tree" if r.from_tree else "name"]
            for f in forks for v in reversed(f.p2p_versions()) for r in _by_family(f.revisions_of(v))
        ]  # fmt: skip
        if revisions:
            headers = [
                "VERSION",
                "FORK",
                "FAMILY",
                "REV",
                "BRANCH (newest first)",
                "COMMITTED (UTC)",
                "COMMIT",
                "VERSION FROM",
            ]
            out += [say(), table(headers, revisions)]
            families = sorted({row[2] for row in revisions}, key=lambda fam: (fam != PLAIN, fam))
            out += [say(f"family {fam}: {describe(fam)}") for fam in families]
            if self.gpu_family is None:
                out.append(say("* none: this host's GPUs need different families (one module serves them all)"))
            else:
                out.append(say(f"* what `modules build --driver-version V` builds for this host's GPUs "
                               f"(family {self.gpu_family})"))  # fmt: skip
        for f in forks:
            if f.error:  # a fork read from neither git nor the API (the cache, or nothing) is said in yellow
                style = "" if f.source in ("git", "api") else "yellow"
                out.append(Line((Span(f"note: {f.fork}: {f.error}", style),), err=True))
        if self.target is not None:
            out += [say(), *(say(text) for text in (self.answer or {}).get("summary", []))]
        return out

    def failure(self) -> FwmanError | None:
        """Return MissingError (exit 5) when no fork could be listed, PartialError (6) when some could not."""
        if not self.report.any_available:
            return MissingError(
                "no fork could be listed and there is no cache",
                hint="check the network (or git/requests access to the forge), then run again",
            )
        if not self.report.complete:
            missing = ", ".join(f.fork for f in self.report.forks if not f.available)
            return PartialError(f"not listed (no cache either): {missing}", hint="run again when online")
        return None


def _by_family(revs: list[Revision]) -> list[Revision]:
    """Return ``revs`` (newest first) grouped by family, the plain family first, order kept inside a family."""
    order = {id(r): i for i, r in enumerate(revs)}
    return sorted(revs, key=lambda r: (r.family != PLAIN, r.family, order[id(r)]))


def gpu_family(host: Host) -> str | None:
    """Return the branch family this host's GPUs need (:func:`fwman.driver.families.host_family`; the plain
    family when there are none or they cannot be read: VRAM comes from nvidia-smi)."""
    try:
        cards = scan_cards(host)
    except FwmanError:
        return PLAIN
    return host_family(CardMemory(c.name, c.vram_bytes) for c in cards)


def _branch_cell(branch: str, patch_sha256: str | None) -> str:
    """Return the BRANCH cell: the branch, or a donor fork's upstream tag and the patch applied to it."""
    return branch if patch_sha256 is None else f"tag {branch} + patch {patch_sha256[:12]}"


def driver_branches(
    host: Host,
    variables: Mapping[str, str],
    version_text: str | None = None,
    fork_specs: Sequence[str] = (),
    offline: bool = False,
) -> BranchesResult:
    """List the branches of the configured forks (plus ``fork_specs``), live or from the cache.

    ``offline`` answers from the cache only (a replay must pass it: it must not reach the network). Raises
    UsageError for a bad version, fork option or configuration; a fork that cannot be listed is in the report.
    """
    target = names.driver_version(version_text, "--driver-version") if version_text is not None else None
    config = load_config(host)
    forks = configured_forks(config, fork_specs)
    report = list_branches(host, forks, api=api_base(config, variables), offline=offline)
    answer = version_answer(report, target) if target is not None else None
    return BranchesResult(report, target, answer, gpu_family(host))


def version_answer(report: BranchReport, target: DriverVersion) -> dict[str, Any]:
    """Return the ``--version`` part of the answer: carriers, nearest versions, what moving means, summary lines."""
    carriers = report.carrying(target)
    # branches whose name says the version but whose tree builds another: the name is only a hint, said so here
    # instead of leaving "no fork carries V-p2p" beside a branch of that very name
    misnamed = [
        {"fork": f.fork, "branch": r.branch, "builds": r.version}
        for f in report.forks
        for r in f.revisions
        if r.from_tree and r.driver_version() != target and parse_p2p_branch(r.branch) == target
    ]
    answer: dict[str, Any] = {
        "version": str(target),
        "branch": target.branch_name,
        "carried_by": carriers,
        "named_only": misnamed,
    }
    lines: list[str] = []
    notes = [
        f"{m['fork']}'s branch {m['branch']} builds {m['builds']} (its tree's version.mk), not {target}."
        for m in misnamed
    ]
    if not report.any_available:
        lines.append(f"Unknown whether any fork carries {target.branch_name}: no fork could be listed.")
        answer.update({"nearest_below": None, "nearest_above": None, "moves": [], "summary": lines})
        return answer
    if carriers:
        lines.append(f"{target.branch_name} is carried by: {', '.join(carriers)}.")
        answer.update({"nearest_below": None, "nearest_above": None, "moves": []})
    else:
        below, above = report.nearest(target)
        versions = report.versions()
        answer["nearest_below"] = _near(below, versions)
        answer["nearest_above"] = _near(above, versions)
        answer["moves"] = [move_plan(v) for v in (below, above) if v is not None]
        if not report.complete:
            lines.append(f"No listed fork carries {target.branch_name} (some forks could not be listed).")
        else:
            lines.append(f"No fork carries {target.branch_name}: version {target} has no P2P build yet.")
        if below is None and above is None:
            lines.append("No fork carries any P2P version.")
        for v in (below, above):
            if v is None:
                continue
            lines.append(f"Nearest with a branch: {v} ({', '.join(versions[v])}). Moving to it means:")
            lines.extend(f"  - {step}" for step in move_plan(v)["steps"])
    answer["summary"] = lines + notes
    return answer


def _near(version: DriverVersion | None, versions: dict[DriverVersion, list[str]]) -> dict[str, Any] | None:
    if version is None:
        return None
    return {"version": str(version), "branch": version.branch_name, "forks": versions[version]}


def move_plan(version: DriverVersion) -> dict[str, Any]:
    """Return what moving host and containers to exactly ``version`` takes (for people and JSON)."""
    return {
        "version": str(version),
        "steps": [
            f"host kernel module: build branch {version.branch_name} for every installed kernel",
            f"host user space: {version.run_file} --no-kernel-modules (libraries, nvidia-smi, firmware)",
            f"GSP firmware: /lib/firmware/nvidia/{version} (installed by that .run)",
            f"every container using the GPU: the same {version.run_file} --no-kernel-modules inside it",
        ],
    }
