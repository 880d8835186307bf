"""The version lockstep a build must keep: the module's driver version equals the user space's, everywhere.

The kernel module and the user-space driver (``libcuda.so.<ver>``, ``libnvidia-ml.so.<ver>``) must carry the
same version string on the host and in every container that uses the GPUs; otherwise NVML fails with
"Failed to initialize NVML: Driver/library version mismatch" while the module stays loaded. ``fwman modules
build`` refuses a branch whose version differs from what it finds, unless ``--force``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import BlockedError

NVML_MISMATCH = "Driver/library version mismatch"


@dataclass
class Lockstep:
    """The user-space versions found, by where (``host`` or a container name), and what they disagree with."""

    target: str | None  # the driver version the build produces
    found: dict[str, list[str]] = field(default_factory=dict)  # where -> versions found there
    unreadable: list[str] = field(default_factory=list)

    @property
    def mismatches(self) -> dict[str, list[str]]:
        """Return {where: versions} for each place whose user space is not exactly ``target``."""
        if self.target is None:
            return {}
        return {w: v for w, v in self.found.items() if v and v != [self.target]}

    def message(self) -> str | None:
        """Return the refusal line, or None when everything found matches."""
        bad = self.mismatches
        if not bad:
            return None
        places = "; ".join(f"{w} has {', '.join(v)}" for w, v in sorted(bad.items()))
        return (
            f"the branch builds driver {self.target} but the user space differs ({places}): loading this module "
            f'makes NVML fail with "{NVML_MISMATCH}"'
        )


def check(target: str | None, found: dict[str, list[str]]) -> Lockstep:
    """Return the lockstep verdict for ``target`` against ``found`` (pure)."""
    return Lockstep(target, {w: sorted(set(v)) for w, v in found.items()})


def refuse_unless_forced(verdict: Lockstep, force: bool) -> str | None:
    """Raise BlockedError for a mismatch unless ``force``; return the warning line when forced, else None."""
    line = verdict.message()
    if line is None:
        return None
    if not force:
        raise BlockedError(
            line,
            hint="build the branch of the installed user-space version, or move the user space (host and "
            "containers) to this version first; --force builds anyway",
        )
    return f"WARNING (--force): {line}"
