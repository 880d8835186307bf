"""NVIDIA's ``.run`` installer, for container roots with a user space of their own (not installed by apt): the
installer of the target version staged once its SHA-256 is the owner's, and run in each root
(``--no-kernel-modules``); the roots' NVIDIA libraries and tools are kept whole, so a rollback removes what the move
added."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fwman.core.errors import FwmanError, MissingError, VerificationError
from fwman.driver.build.manifest import sha256_hex
from fwman.driver.localfs import local_dir
from fwman.driver.move.packages import last_line
from fwman.driver.move.record import STAGED, MoveRefused
from fwman.host.base import Host

#: where a container root's NVIDIA libraries are (Debian's multiarch directory) and which entries are NVIDIA's
CONTAINER_LIBDIR = "/usr/lib/x86_64-linux-gnu"
CONTAINER_LIBS = r"lib(cuda|nvidia-[a-z0-9-]+)\.so(\.[0-9.]+)?"


def run_name(version: str) -> str:
    """Return the file name of NVIDIA's installer of ``version`` (``NVIDIA-Linux-x86_64-VERSION.run``)."""
    return f"NVIDIA-Linux-x86_64-{version}.run"


def container_owned(root: str) -> list[tuple[str, str]]:
    """Return the directories (and name patterns) of a container root's NVIDIA libraries and tools, kept whole."""
    base = root.rstrip("/")
    return [(f"{base}{CONTAINER_LIBDIR}", CONTAINER_LIBS), (f"{base}/usr/bin", r"nvidia-smi")]


@dataclass
class StageRun:
    """Stage NVIDIA's ``.run`` installer of ``target`` (the owner's file, read by ``read``) once its SHA-256 is the
    one the owner gave."""

    read: Callable[[], bytes]
    sha256: str
    target: str

    @property
    def path(self) -> str:
        """Return where the installer is staged."""
        return f"{STAGED}/{run_name(self.target)}"

    def describe(self) -> str:
        """Return what is staged."""
        return f"stage {run_name(self.target)} (sha256 {self.sha256[:12]}..., checked) in {STAGED}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless the staged installer hashes as given."""
        try:
            return sha256_hex(host.read_bytes(self.path)) != self.sha256
        except MissingError:
            return True

    def apply(self, host: Host) -> None:
        """Check and stage. Raises MoveRefused when the file does not hash as given."""
        data = self.read()
        if sha256_hex(data) != self.sha256:
            raise MoveRefused(f"{run_name(self.target)}: sha256 {sha256_hex(data)} is not the {self.sha256} given")
        host.write_bytes(self.path, data, 0o755)


@dataclass
class InstallRunInContainer:
    """Install the staged ``.run``'s user space in a container root: ``sh FILE --no-kernel-modules --silent``
    chrooted into it (the container's own libraries, as ``pct exec`` or ``systemd-nspawn`` would run it)."""

    root: str
    target: str
    versions: Callable[[Host, str], set[str]]

    def describe(self) -> str:
        """Return the step."""
        return (
            f"install the {self.target} user space in the container root {self.root} "
            f"(chroot: sh /tmp/{run_name(self.target)} --no-kernel-modules --silent)"
        )

    def is_needed(self, host: Host) -> bool:
        """Return True unless the container's driver libraries are all of the target version."""
        return self.versions(host, self.root) != {self.target}

    def command(self, host: Host) -> list[str]:
        """Return the installer's command line."""
        inner = f"/tmp/{run_name(self.target)}"
        return ["chroot", local_dir(host, self.root, "install into"), "sh", inner, "--no-kernel-modules", "--silent"]

    def apply(self, host: Host) -> None:
        """Copy the staged installer into the container, run it, remove the copy. Raises FwmanError when it fails or
        the container's libraries are not all of the target version afterwards."""
        inside = f"{self.root.rstrip('/')}/tmp/{run_name(self.target)}"
        host.write_bytes(inside, host.read_bytes(f"{STAGED}/{run_name(self.target)}"), 0o755)
        try:
            result = host.run(self.command(host), timeout=1800)
        finally:
            host.unlink(inside)
        if not result.ok:
            raise FwmanError(
                f"{run_name(self.target)} in {self.root} failed (exit {result.rc}): {last_line(result, '')}"
            )
        found = self.versions(host, self.root)
        if found != {self.target}:
            raise VerificationError(
                f"{self.root}: the driver libraries are {', '.join(sorted(found))} after the install"
            )
