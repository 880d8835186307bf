"""Removing the patched modules fwman installed (``fwman modules remove``), as actions.

For each kernel: the installed modules (``/lib/modules/KVER/updates/fwman``), fwman's stored copy
(``/var/lib/fwman/modules/KVER.d``) and the manifest go, then ``depmod -a KVER`` runs so the module names resolve
to whatever else is installed (the stock or DKMS modules, or nothing). When no kernel keeps fwman's modules, the
depmod override (``/etc/depmod.d/fwman.conf``) goes too, before depmod runs. Build markers (``.failed``,
``.pending``), the object cache and the source record stay: they are not modules, and the package's purge (or
``fwman modules forget``) removes them.

The plan is :func:`remove_actions`; applying it twice changes nothing the second time, and ``--dry-run`` prints
the descriptions of the actions still needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import MissingError
from fwman.driver.build.install import remove_modules, run_depmod
from fwman.driver.build.manifest import install_dir, manifest_path, store_dir
from fwman.driver.kernels import installed_kernels, version_key
from fwman.host.actions import Action, RemoveFile, Tracked
from fwman.host.base import Host


def _present(host: Host, path: str) -> bool:
    return host.exists(path) or host.is_link(path)


def kernels_with_modules(host: Host) -> list[str]:
    """Return the kernels fwman has modules, a stored copy or a manifest for (installed or not), oldest first."""
    found = {k for k in installed_kernels(host) if _present(host, install_dir(k))}
    try:
        names = host.listdir(paths.MODULES_STATE_DIR) if host.is_dir(paths.MODULES_STATE_DIR) else []
    except MissingError:
        names = []
    for name in names:
        if name.endswith(".d"):
            found.add(name[: -len(".d")])
        elif name.endswith(".json") and name != "source.json":
            found.add(name[: -len(".json")])
    return sorted(found, key=version_key)


@dataclass
class RemoveKernelModules:
    """Make sure fwman has no installed modules, stored copy or manifest for ``kver``."""

    kver: str
    removed: list[str] = field(default_factory=list)  # the paths apply removed

    def targets(self, host: Host) -> list[str]:
        """Return the paths of fwman's that exist for the kernel (modules, stored copy, manifest)."""
        wanted = (install_dir(self.kver), store_dir(self.kver), manifest_path(self.kver))
        return [p for p in wanted if _present(host, p)]

    def describe(self) -> str:
        """Return what goes."""
        return (
            f"remove fwman's modules for {self.kver} ({install_dir(self.kver)}, the stored copy "
            f"{store_dir(self.kver)} and the manifest)"
        )

    def is_needed(self, host: Host) -> bool:
        """Return True while any of them exists."""
        return bool(self.targets(host))

    def apply(self, host: Host) -> None:
        """Remove them (files through the Host, directories with ``rm -rf``). Raises FwmanError when one cannot go."""
        found = self.targets(host)
        remove_modules(host, self.kver)  # the two directories
        if manifest_path(self.kver) in found:
            host.unlink(manifest_path(self.kver))
        self.removed += found
        if host.exists(paths.MODULES_STAMP):
            host.unlink(paths.MODULES_STAMP)  # the boot fast path must look again


@dataclass
class RefreshDepmod:
    """Run ``depmod -a KVER`` after a watched removal, so the names stop resolving to fwman's files."""

    kver: str
    after: Sequence[Tracked]

    def describe(self) -> str:
        """Return the command."""
        return f"run depmod -a {self.kver} (the module names resolve to what else is installed)"

    def is_needed(self, host: Host) -> bool:
        """Return True when a watched action changed something or still would, and depmod has an index here."""
        if not host.exists(f"{paths.modules_dir(self.kver)}/modules.dep"):
            return False  # the kernel itself is gone (or was never indexed): nothing to re-index
        return any(t.applied or t.is_needed(host) for t in self.after)

    def apply(self, host: Host) -> None:
        """Run depmod (see :func:`fwman.driver.build.install.run_depmod` for what it raises)."""
        run_depmod(host, self.kver)


def remove_actions(host: Host, kernels: Sequence[str]) -> list[Action]:
    """Return the actions that remove fwman's modules for ``kernels`` (and the override when none stays)."""
    removals = [Tracked(RemoveKernelModules(k)) for k in kernels]
    actions: list[Action] = list(removals)
    left = [k for k in kernels_with_modules(host) if k not in kernels]
    watched: list[Tracked] = []
    if not left:
        override = Tracked(RemoveFile(paths.DEPMOD_OVERRIDE))
        actions.append(override)
        watched.append(override)
    for removal, kver in zip(removals, kernels, strict=True):
        actions.append(RefreshDepmod(kver, [removal, *watched]))
    return actions
