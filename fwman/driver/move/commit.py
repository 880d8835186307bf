"""The commit of a move: the staged modules of each kernel installed (swapped in, depmod, verified, the manifest
written); the removal of the move's working set; where a move's time went."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwman.core.errors import MissingError, ParseError, VerificationError
from fwman.driver.build import install
from fwman.driver.build.manifest import (
    Manifest,
    WriteManifest,
    failed_path,
    install_dir,
    load_manifest,
    now_iso,
    pending_path,
)
from fwman.driver.move.packages import AptPackages
from fwman.driver.move.stage import StageModules, staged_build, staged_dir
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Action, RemoveFile, apply_all
from fwman.host.base import Host


@dataclass
class InstallStaged:
    """Install the staged modules of ``kver`` (staged, swapped in, depmod, verified) and write its manifest."""

    kver: str
    target: str
    branch: str | None

    def describe(self) -> str:
        """Return what is installed."""
        return (
            f"install the staged {self.target} modules for {self.kver} into {install_dir(self.kver)} (depmod, manifest)"
        )

    def is_needed(self, host: Host) -> bool:
        """Return True unless the installed manifest names the staged build (or, before staging, the branch)."""
        try:
            manifest = load_manifest(host, self.kver)
        except (ParseError, MissingError):
            return True
        if manifest is None:
            return True
        stamp = staged_build(host, self.kver)
        if stamp is None:
            return manifest.branch != self.branch
        return (manifest.commit, manifest.branch) != (stamp.get("commit"), stamp.get("branch"))

    def apply(self, host: Host) -> None:
        """Install. Raises MissingError when nothing is staged, VerificationError when the set is not in effect."""
        stamp = staged_build(host, self.kver)
        if stamp is None:
            raise MissingError(f"nothing staged for {self.kver} in {staged_dir(self.kver)}")
        built = {n: host.read_bytes(f"{staged_dir(self.kver)}/{n}.ko") for n in MODULE_NAMES}
        actions, entries = install.install_actions(self.kver, built)
        apply_all(host, actions)
        manifest = Manifest(
            kernel=self.kver, fork=stamp.get("fork"), branch=stamp.get("branch"), commit=stamp.get("commit"),
            modules=entries, built_at=now_iso(), source=stamp.get("source"), compiler=stamp.get("compiler"),
            signed=stamp.get("signed"), object_cache_hit=bool(stamp.get("object_cache_hit")),
            patches=list(stamp.get("patches") or []),
        )  # fmt: skip
        bad = [c for c in install.check_installed(host, manifest) if not c.ok]
        if bad:
            raise VerificationError(f"{self.kver}: installed but not in effect: {bad[0].name}: {bad[0].problem}")
        apply_all(
            host, [WriteManifest(manifest), RemoveFile(failed_path(self.kver)), RemoveFile(pending_path(self.kver))]
        )


@dataclass
class RemoveTree:
    """Remove a directory fwman made (``what`` names it)."""

    path: str
    what: str

    def describe(self) -> str:
        """Return what goes."""
        return f"remove {self.what} {self.path}"

    def is_needed(self, host: Host) -> bool:
        """Return True while it is there."""
        return host.exists(self.path)

    def apply(self, host: Host) -> None:
        """Remove it."""
        host.remove_tree(self.path)


def phases(actions: Sequence[Action], total: float) -> dict[str, float]:
    """Return where a move's ``total`` wall seconds went: ``builds`` (make, per kernel), ``packages`` (apt's
    downloads and installs), ``own`` (the rest: staging, keeping, installing the modules, depmod, the records)."""
    builds = sum(a.seconds for a in actions if isinstance(a, StageModules))
    packages = sum(a.seconds for a in actions if isinstance(a, AptPackages))
    parts = {"builds": builds, "packages": packages, "own": total - builds - packages, "total": total}
    return {k: round(v, 3) for k, v in parts.items()}
