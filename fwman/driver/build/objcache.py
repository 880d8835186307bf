"""The cache of kernel-independent objects, keyed by (source identity, compiler).

``make modules`` first builds ``src/nvidia/_out/Linux_x86_64/nv-kernel.o`` and
``src/nvidia-modeset/_out/Linux_x86_64/nv-modeset-kernel.o``: most of the work, and the same for every kernel.
fwman keeps both ``_out`` directories (intermediates and dependency files included, so make sees a complete,
up-to-date build) in ``/var/cache/fwman/objects/<key>/`` and restores them into the next kernel's build tree.

The key is the SHA-256 of the source identity (the fork commit, or a tree hash for a local directory) and the
compiler's ``--version`` line: a compiler update invalidates the cache, a kernel update does not.
"""

from __future__ import annotations

import hashlib

from fwman.core import clock, paths
from fwman.core.errors import FwmanError
from fwman.driver.localfs import local_dir
from fwman.host.base import Host

#: the directories of the kernel-independent build, relative to the source tree
OBJECT_DIRS = ("src/nvidia/_out", "src/nvidia-modeset/_out")
#: the two objects the cache entry must contain to be usable
OBJECT_FILES = (
    "src/nvidia/_out/Linux_x86_64/nv-kernel.o",
    "src/nvidia-modeset/_out/Linux_x86_64/nv-modeset-kernel.o",
)


def cache_key(source_id: str, compiler: str) -> str:
    """Return the cache key (hex) for a source identity and a compiler version line."""
    return hashlib.sha256(f"{source_id}\0{compiler}".encode()).hexdigest()[:32]


def entry_dir(key: str) -> str:
    """Return the host directory of cache entry ``key``."""
    return f"{paths.OBJECT_CACHE_DIR}/{key}"


def has_entry(host: Host, key: str) -> bool:
    """Return True when entry ``key`` holds both kernel-independent objects."""
    return all(host.exists(f"{entry_dir(key)}/{rel}") for rel in OBJECT_FILES)


def restore(host: Host, key: str, tree: str) -> None:
    """Copy cache entry ``key`` into build tree ``tree`` (a host path) and mark every restored file as new.

    Every restored file gets one timestamp, newer than the sources, so make treats the objects as up to date
    (a fresh checkout gives the sources the checkout time, which can be later than when the cache was filled).
    Raises FwmanError when a copy fails.
    """
    stamp = clock.now_utc().timestamp()
    for rel in OBJECT_DIRS:
        src = f"{entry_dir(key)}/{rel}"
        dst = f"{tree}/{rel}"
        host.mkdir(dst.rsplit("/", 1)[0])
        _run(host, ["rm", "-rf", local_dir(host, dst)])
        _run(host, ["cp", "-a", local_dir(host, src), local_dir(host, dst)])
        _run(host, ["find", local_dir(host, dst), "-exec", "touch", "-h", "-d", f"@{stamp:.0f}", "{}", "+"])


def store(host: Host, key: str, tree: str) -> bool:
    """Save the kernel-independent objects of build tree ``tree`` as entry ``key``; return True when stored.

    Nothing is stored unless both objects exist (a build that failed inside the object step leaves no usable
    entry). The entry is assembled in a temp directory and renamed into place, so a reader never sees half.
    """
    if not all(host.exists(f"{tree}/{rel}") for rel in OBJECT_FILES):
        return False
    final = entry_dir(key)
    tmp = f"{paths.OBJECT_CACHE_DIR}/.{key}.tmp"
    _run(host, ["rm", "-rf", local_dir(host, tmp)])
    for rel in OBJECT_DIRS:
        host.mkdir(f"{tmp}/{rel}".rsplit("/", 1)[0])
        _run(host, ["cp", "-a", local_dir(host, f"{tree}/{rel}"), local_dir(host, f"{tmp}/{rel}")])
    _run(host, ["rm", "-rf", local_dir(host, final)])
    host.rename(tmp, final)
    return True


def _run(host: Host, argv: list[str]) -> None:
    result = host.run(argv, timeout=600)
    if not result.ok:
        raise FwmanError(f"{argv[0]} failed while handling the object cache: {result.stderr.strip()}")
