"""The stage of a move: the target version's modules built for one kernel (in a build directory and log of the
move's own, against the kernel's installed headers) and staged, with a stamp saying what they were built from."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fwman.core import paths
from fwman.core.errors import MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver.build.source import Source, SourceSpec
from fwman.driver.move.record import STAGED, MoveRefused
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.driver.build.kbuild import KernelTree


def staged_dir(kver: str) -> str:
    """Return the directory the new modules of ``kver`` are staged in."""
    return f"{STAGED}/modules/{kver}"


def staged_stamp(kver: str) -> str:
    """Return the file that says what the staged modules of ``kver`` were built from."""
    return f"{staged_dir(kver)}.json"


def staged_build(host: Host, kver: str) -> dict[str, Any] | None:
    """Return the stamp of the modules staged for ``kver`` (kernel, version, fork, branch, commit, ...), None when
    none is staged or the stamp is not an object."""
    try:
        doc = parse_json(host.read_bytes(staged_stamp(kver)), "staged stamp")
    except (MissingError, ParseError):
        return None
    return doc if isinstance(doc, dict) else None


def move_tree(host: Host, kver: str) -> KernelTree:
    """Return where the move builds for ``kver``: the installed kernel's headers (the common ones when Debian splits
    them), in a build directory and with a log of the move's own (the installed kernel's build state is not
    touched)."""
    from fwman.driver.build.kbuild import KernelTree

    moddir = paths.modules_dir(kver)
    common = f"{moddir}/source"
    return KernelTree(
        f"{moddir}/build", common if host.is_dir(f"{common}/include") else None,
        f"{paths.CACHE_DIR}/move/{kver}", f"{paths.LOG_DIR}/move-{kver}.log",
    )  # fmt: skip


@dataclass
class SourceOnce:
    """The fork branch of the target version, resolved (fetched) once for every kernel's build."""

    spec: SourceSpec
    fetch: Callable[[], Source]
    source: Source | None = None

    def get(self) -> Source:
        """Return the resolved source. Raises what the resolution raises (SourceError: the branch cannot be had)."""
        if self.source is None:
            self.source = self.fetch()
        return self.source


@dataclass
class StageModules:
    """Build the target version's modules for ``kver`` and stage them; a failed build refuses the move."""

    kver: str
    target: str
    source: SourceOnce
    tell: Tell = silent
    #: wall seconds of the build (the tree, the patches, make), once applied: not the move's own time
    seconds: float = 0.0

    def describe(self) -> str:
        """Return what is built and where it is staged."""
        spec = self.source.spec.describe()
        return f"build the {self.target} modules for {self.kver} ({spec}), stage them in {staged_dir(self.kver)}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless every module is staged with a stamp naming the target version."""
        stamp = staged_build(host, self.kver)
        if stamp is None or stamp.get("version") != self.target:
            return True
        return not all(host.exists(f"{staged_dir(self.kver)}/{n}.ko") for n in MODULE_NAMES)

    def apply(self, host: Host) -> None:
        """Build and stage. Raises MoveRefused when the build fails or the branch builds another version."""
        from fwman.driver.build.kbuild import compile_for_kernel, kernel_patches
        from fwman.driver.build.pipeline import phase_lines
        from fwman.driver.build.source import source_version
        from fwman.driver.kernels import headers_present
        from fwman.driver.kmod import sign
        from fwman.driver.kmod.kofile import read_module

        if not headers_present(host, self.kver):
            raise MoveRefused(
                f"kernel {self.kver} has no headers: the {self.target} modules cannot be built for it, so the move "
                "would leave it without working modules",
                hint=f"install its headers (apt install linux-headers-{self.kver}) or remove the kernel, then move",
            )
        source = self.source.get()
        version = source_version(host, source)
        if version != self.target:
            raise MoveRefused(f"{source.label} builds driver {version or 'unknown'}, not {self.target}")
        tree = move_tree(host, self.kver)
        patches = kernel_patches(host, self.kver, tell=self.tell)
        result = compile_for_kernel(
            host, source, self.kver, self.tell, progress=phase_lines(self.tell), patches=patches, headers=tree
        )
        self.seconds = result.seconds
        if not result.ok:
            failure = result.failure
            where = f"{failure.file}:{failure.line}: " if failure and failure.file and failure.line else ""
            raise MoveRefused(
                f"the {self.target} modules do not build for {self.kver}: {where}"
                f"{failure.message if failure else 'make failed'}; nothing was changed",
                hint=f"the build log is {result.log_path}; every installed kernel must build before the driver moves",
            )
        built = {name: host.read_bytes(path) for name, path in result.modules.items()}
        for name, data in built.items():
            info = read_module(data)
            if info.kernel_release != self.kver:
                raise MoveRefused(f"{name}.ko built for {self.kver} has vermagic {info.vermagic!r}")
        signed: str | None = None
        key = sign.configured_key(host)
        if key is not None:
            built, signed = sign.sign_for_kernel(host, self.kver, built, key)
        host.remove_tree(staged_dir(self.kver))
        for name, data in built.items():
            host.write_bytes(f"{staged_dir(self.kver)}/{name}.ko", data)
        stamp = {
            "kernel": self.kver, "version": self.target, "fork": source.fork, "branch": source.branch,
            "commit": source.commit or source.source_id, "source": source.location, "compiler": result.compiler,
            "signed": signed, "object_cache_hit": result.cache_hit, "patches": [p.to_json() for p in result.patches],
        }  # fmt: skip
        host.write_bytes(staged_stamp(self.kver), (json.dumps(stamp, indent=2, sort_keys=True) + "\n").encode())
        host.remove_tree(result.tree)
