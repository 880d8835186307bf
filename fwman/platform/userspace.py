"""The NVIDIA user-space driver on a host or inside a container root, read from file names only.

The driver's libraries carry the exact driver version in their file names (``libcuda.so.570.86.16``,
``libnvidia-ml.so.570.86.16``; ``libcuda.so.1`` is a link to one of them). CUDA forward-compatibility packages
put another ``libcuda.so.<ver>`` under ``/usr/local/cuda-*/compat/``: that one is reported as compat, never as
the driver. Nothing is run inside a container: a root directory is read like any other tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.driver_version import DriverVersion
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.host.base import Host
from fwman.host.capped import read_text_capped

#: where distributions and NVIDIA's .run put the libraries (and where the container toolkit mounts them)
LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)
#: where the kernel's firmware loader looks (after the `firmware_class.path` parameter, when set)
# libcuda, libnvcuvid, libnvoptix, libnvidia-*, and the vendor GL/EGL/GLES/Vulkan libraries
_LIB_RE = re.compile(
    r"(libcuda|libcudadebugger|libnvcuvid|libnvoptix|libnvidia-[A-Za-z0-9_\-]+|lib(?:GLX|EGL|GLESv2|GLESv1_CM)_nvidia)"
    r"\.so\.(\d[\d.]*)"
)
KEY_LIBS = ("libcuda", "libnvidia-ml")


@dataclass(frozen=True)
class DriverLib:
    """One versioned driver library file."""

    name: str  # library name without .so and version ("libcuda", "libnvidia-ml")
    version: str
    path: str  # host path as listed (under the container root for a container)


@dataclass
class UserSpace:
    """What one root (host or container) carries of the NVIDIA user space."""

    root: str  # "/" for the host
    libs: list[DriverLib] = field(default_factory=list)
    compat: list[DriverLib] = field(default_factory=list)  # CUDA forward-compatibility libcuda copies
    firmware: list[str] = field(default_factory=list)  # GSP firmware versions found (nvidia/<ver> directories)
    firmware_dirs: dict[str, str] = field(default_factory=dict)  # version -> the directory it was found in
    smi_version: str | None = None  # from `nvidia-smi --version` (host only)
    unreadable: list[str] = field(default_factory=list)  # what could not be read, for the user
    #: the entries of each library directory listed (its path as given: ``<root>/usr/lib/...``), so that a
    #: caller looking there for more (a container's NCCL) does not list it again
    listings: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)

    def versions(self) -> dict[str, list[DriverLib]]:
        """Return {version: libraries of that version} over the driver libraries (compat excluded)."""
        table: dict[str, list[DriverLib]] = {}
        for lib in self.libs:
            table.setdefault(lib.version, []).append(lib)
        return table


def parse_lib_name(filename: str) -> tuple[str, str] | None:
    """Return (library, driver version) for a versioned driver library file name, None for anything else.

    ``libcuda.so.1`` and ``libnvidia-ml.so`` (no driver version) give None. Never raises.
    """
    m = _LIB_RE.fullmatch(filename)
    if m is None:
        return None
    try:
        version = DriverVersion.parse(m.group(2))
    except ParseError:
        return None
    return m.group(1), str(version)


def parse_smi_version(text: str) -> str | None:
    """Return the driver version from ``nvidia-smi --version`` (``DRIVER version : X``) or its banner table.

    Returns None when there is none. Never raises.
    """
    for pattern in (r"DRIVER version\s*:\s*(\S+)", r"Driver Version:\s*(\S+)"):
        m = re.search(pattern, text)
        if m:
            try:
                return str(DriverVersion.parse(m.group(1)))
            except ParseError:
                return None
    return None


def _join(root: str, path: str) -> str:
    return path if root == "/" else root.rstrip("/") + path


def _listdir(host: Host, path: str, unreadable: list[str]) -> list[str]:
    try:
        return host.listdir(path) if host.is_dir(path) else []
    except NotRecordedError:
        unreadable.append(f"{path} (not recorded)")
    except MissingError:
        unreadable.append(path)
    return []


def scan_userspace(host: Host, root: str = "/", run_smi: bool = True) -> UserSpace:
    """Return the driver libraries, CUDA compat libraries and GSP firmware versions under ``root``.

    ``root`` "/" is the host itself (and ``nvidia-smi --version`` is run when ``run_smi``); another root is a
    container or image, read only. Never raises for unreadable places: they are listed in ``unreadable``.
    """
    result = UserSpace(root=root)
    seen_dirs: set[str] = set()
    for libdir in LIB_DIRS:
        path = _join(root, libdir)
        try:
            real = host.realpath(path)
        except (MissingError, NotRecordedError):
            real = path
        if root != "/" and not (real + "/").startswith(root.rstrip("/") + "/"):
            # an absolute link inside the container would lead to the host's own libraries
            if host.exists(path):
                result.unreadable.append(f"{path} (link leaves the container root)")
            continue
        if real in seen_dirs:  # /lib -> usr/lib on merged-/usr systems: list it once
            continue
        seen_dirs.add(real)
        names = _listdir(host, path, result.unreadable)
        result.listings[path] = names
        for name in names:
            parsed = parse_lib_name(name)
            if parsed is not None:
                result.libs.append(DriverLib(parsed[0], parsed[1], f"{path}/{name}"))
        present = set(names)
        for key in KEY_LIBS:
            # the name programs load (libcuda.so.1) may link into another directory: /usr/local/nvidia/lib64
            # when the container toolkit or a VM host provides the user space
            link = f"{key}.so.1"
            if link in present:
                found = _link_version(host, f"{path}/{link}", key, present, result.unreadable, root)
                if found is not None:
                    result.libs.append(found)
    # a link found in one directory that leads to a file listed in another is that file: keep the file
    listed = {lib.path for lib in result.libs if " -> " not in lib.path}
    result.libs = [lib for lib in result.libs if lib.path.split(" -> ")[-1] not in listed or " -> " not in lib.path]
    seen_compat: set[str] = set()
    for entry in _listdir(host, _join(root, "/usr/local"), result.unreadable):
        if not entry.startswith("cuda"):
            continue
        compat = _join(root, f"/usr/local/{entry}/compat")
        # cuda, cuda-13 and cuda-13.0 are often links (alternatives) to one directory: list it once
        real = _real_inside(host, compat, root)
        if real in seen_compat:
            continue
        seen_compat.add(real)
        for name in _listdir(host, compat, result.unreadable):
            parsed = parse_lib_name(name)
            if parsed is not None:
                result.compat.append(DriverLib(parsed[0], parsed[1], f"{compat}/{name}"))
    for fw_dir in firmware_dirs(host, root, result.unreadable):
        for name in _listdir(host, _join(root, f"{fw_dir}/nvidia"), result.unreadable):
            try:
                version = str(DriverVersion.parse(name))
            except ParseError:
                continue
            if version not in result.firmware_dirs:
                result.firmware.append(version)
                result.firmware_dirs[version] = f"{fw_dir}/nvidia/{version}"
    if root == "/" and run_smi:
        result.smi_version = _smi_version(host, result.unreadable)
    return result


def _link_version(
    host: Host, path: str, key: str, siblings: set[str], unreadable: list[str], root: str = "/"
) -> DriverLib | None:
    """Return the driver library a ``<key>.so.1`` link leads to, when that is not a file of the same directory.

    Links are followed one stored target at a time (at most 8), absolute targets taken inside ``root``, so a
    link in a container root never leads into the host's own files.
    """
    current = path
    target = ""
    try:
        for _ in range(8):
            if not host.is_link(current):
                break
            target = host.readlink(current)
            current = _join(root, target) if target.startswith("/") else f"{current.rsplit('/', 1)[0]}/{target}"
    except NotRecordedError:
        unreadable.append(f"{path} (link not recorded)")
        return None
    except MissingError:
        return None
    if current == path:
        return None
    base = current.rstrip("/").rsplit("/", 1)[-1]
    parsed = parse_lib_name(base)
    if parsed is None or parsed[0] != key:
        return None
    if "/" not in target and current.rsplit("/", 1)[0] == path.rsplit("/", 1)[0] and base in siblings:
        return None  # the versioned file is in this directory and listed already
    return DriverLib(parsed[0], parsed[1], f"{path} -> {current}")


def _real_inside(host: Host, path: str, root: str) -> str:
    """Return ``path`` with links resolved on the host, or ``path`` itself inside a container root / on error."""
    if root != "/":
        return path
    try:
        return host.realpath(path)
    except (MissingError, NotRecordedError):
        return path


def firmware_dirs(host: Host, root: str, unreadable: list[str]) -> list[str]:
    """Return the firmware directories the kernel searches, in order: ``firmware_class.path`` (host only, read
    from /sys), then /lib/firmware/updates and /lib/firmware."""
    dirs: list[str] = []
    if root == "/":
        try:
            if host.exists(paths.FIRMWARE_CLASS_PATH_PARAM):
                custom = read_text_capped(host, paths.FIRMWARE_CLASS_PATH_PARAM, 4096, "firmware path").strip()
                if custom.startswith("/"):
                    dirs.append(custom.rstrip("/"))
        except NotRecordedError:
            unreadable.append(f"{paths.FIRMWARE_CLASS_PATH_PARAM} (not recorded)")
        except (MissingError, ParseError):  # absent, or longer than a path (PATH_MAX): no custom directory
            pass
    return [*dirs, *paths.FIRMWARE_SEARCH_DIRS]


def _smi_version(host: Host, unreadable: list[str]) -> str | None:
    try:
        if host.which("nvidia-smi") is None:
            return None
        out = host.run(["nvidia-smi", "--version"], timeout=30)
    except NotRecordedError:
        unreadable.append("nvidia-smi --version (not recorded)")
        return None
    if not out.ok:
        unreadable.append(f"nvidia-smi --version (exit {out.rc}: {out.stderr.strip()[:80]})")
        return None
    return parse_smi_version(out.stdout)
