"""The NVIDIA user-space packages of a move: which versions apt offers (``apt-cache madison``, pure), and their
download (``apt-get download``, before anything changes) and install (``apt-get install`` of the downloaded
files, at the commit and at a rollback)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fwman.core import clock
from fwman.core.errors import FwmanError, MissingError
from fwman.driver import userspace_hold
from fwman.driver.aptsim import apt_root_options
from fwman.driver.localfs import local_dir, root_prefix
from fwman.driver.move.record import MoveRefused
from fwman.host.base import CommandResult, Host


def upstream_version(debian_version: str) -> str:
    """Return the upstream part of a Debian package version: without the epoch (``1:``) and the Debian revision
    (after the last ``-``), as deb-version(7) splits it. ``570.86.16-1`` -> ``570.86.16``;
    ``535.216.01-1~deb12u1`` -> ``535.216.01``."""
    text = debian_version.strip()
    if ":" in text.split("-", 1)[0]:
        text = text.split(":", 1)[1]
    return text.rsplit("-", 1)[0] if "-" in text else text


def parse_madison(text: str) -> dict[str, list[str]]:
    """Return {package: [versions, in apt's order]} from ``apt-cache madison`` output
    (``NAME | VERSION | SOURCE`` lines); other lines are skipped. Never raises."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not parts[0] or not parts[1] or " " in parts[0] or " " in parts[1]:
            continue
        versions = out.setdefault(parts[0], [])
        if parts[1] not in versions:
            versions.append(parts[1])
    return out


def version_for(versions: Sequence[str], target: str) -> str | None:
    """Return the first of ``versions`` (apt lists the preferred first) whose upstream part is ``target``, or
    None."""
    return next((v for v in versions if upstream_version(v) == target), None)


def deb_file_prefix(name: str, version: str) -> str:
    """Return how the file ``apt-get download NAME=VERSION`` writes begins: ``NAME_VERSION_`` with the epoch's
    colon written ``%3a``, as apt names downloaded archives."""
    return f"{name}_{version.replace(':', '%3a')}_"


def apt_argv(host: Host, *args: str) -> list[str]:
    """Return ``apt-get ARGS`` pointed at a temp root's configuration and lists (none for ``/``)."""
    return ["apt-get", *apt_root_options(root_prefix(host)), *args]


def last_line(result: CommandResult, default: str) -> str:
    """Return the last line of what a command printed (stderr, or stdout when stderr is empty), ``default`` when
    it printed nothing: what a failure message quotes."""
    tail = (result.stderr or result.stdout).strip().splitlines()
    return tail[-1] if tail else default


@dataclass
class AptPackages:
    """The packages ``packages`` ({name: version}) of the move in ``directory``, and what they are for
    (``what``): what a download and an install of them share."""

    directory: str
    packages: dict[str, str]
    what: str
    #: wall seconds apt took, once applied: not the move's own time
    seconds: float = 0.0

    def listed(self) -> str:
        """Return the packages as ``NAME VERSION, ...``, by name."""
        return ", ".join(f"{n} {v}" for n, v in sorted(self.packages.items()))

    def debs(self, host: Host) -> dict[str, str] | None:
        """Return {package: host path of its downloaded .deb} in the directory, None when one is missing."""
        try:
            files = host.listdir(self.directory) if host.is_dir(self.directory) else []
        except MissingError:
            files = []
        out: dict[str, str] = {}
        for name, version in self.packages.items():
            found = [f for f in files if f.startswith(deb_file_prefix(name, version)) and f.endswith(".deb")]
            if not found:
                return None
            out[name] = f"{self.directory}/{sorted(found)[0]}"
        return out

    def timed(
        self, host: Host, argv: list[str], env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        """Return the result of running ``argv`` (in ``cwd``, with ``env``), its wall seconds kept in
        :attr:`seconds`."""
        began = clock.monotonic()
        result = host.run(argv, timeout=1800, env=env, cwd=cwd)
        self.seconds = clock.monotonic() - began
        return result


@dataclass
class DownloadDebs(AptPackages):
    """Download ``packages`` ({name: version}) with ``apt-get download`` into ``directory``."""

    def describe(self) -> str:
        """Return which packages are downloaded where."""
        return f"download {self.what} ({self.listed()}) into {self.directory}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless a .deb of every package at its version is there."""
        return self.debs(host) is None

    def command(self, host: Host) -> list[str]:
        """Return the download command (for the door's check)."""
        return apt_argv(host, "download", *(f"{n}={v}" for n, v in sorted(self.packages.items())))

    def apply(self, host: Host) -> None:
        """Download. Raises MoveRefused with apt's message when a package cannot be had at its version."""
        host.mkdir(self.directory)
        result = self.timed(host, self.command(host), cwd=local_dir(host, self.directory, "download into"))
        if result.missing:
            raise MissingError("apt-get not found: the user space is moved with apt")
        if not result.ok or self.debs(host) is None:
            raise MoveRefused(
                f"cannot download {self.what}: {last_line(result, f'apt-get exit {result.rc}')}",
                hint="every package must be had at its exact version before the driver moves; check `apt-cache "
                "madison NAME`",
            )


@dataclass
class InstallDebs(AptPackages):
    """Install the packages downloaded in ``directory`` ({name: version}) with apt (downgrades allowed: a
    rollback goes back)."""

    def describe(self) -> str:
        """Return which versions are installed."""
        return f"install {self.listed()} from {self.directory} ({self.what})"

    def is_needed(self, host: Host) -> bool:
        """Return True when an installed version differs from the wanted one."""
        installed = userspace_hold.installed_packages(host) or {}
        return any(installed.get(n) != v for n, v in self.packages.items())

    def command(self, host: Host) -> list[str]:
        """Return the install command (the .deb files, or the directory where they are not there yet)."""
        debs = self.debs(host)
        files = [local_dir(host, p, "install from") for p in debs.values()] if debs else [f"{self.directory}/*.deb"]
        return apt_argv(host, "install", "-y", "-q", "--allow-downgrades", "--no-install-recommends", *sorted(files))

    def apply(self, host: Host) -> None:
        """Install. Raises MissingError when a package is not downloaded, FwmanError with apt's message."""
        if self.debs(host) is None:
            raise MissingError(
                f"the packages {', '.join(sorted(self.packages))} are not downloaded in {self.directory}"
            )
        result = self.timed(host, self.command(host), env={"DEBIAN_FRONTEND": "noninteractive"})
        if not result.ok:
            raise FwmanError(f"apt-get install failed (exit {result.rc}): {last_line(result, 'no output')}")
