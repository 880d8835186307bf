"""The cache of kernel-independent objects, keyed by (source identity, compiler).

``make modules`` first builds ``src/nvidia/_out/Linux_x86_64/nv-kernel.o`` and
``src/nvidia-modeset/_out/Linux_x86_64/nv-modeset-kernel.o``: most of the work, and the same for every kernel.
fwman keeps those two objects in ``/var/cache/fwman/objects/<key>/`` and restores them into the next kernel's
build tree, and that build names them to make as already made (``-o FILE``, :func:`assume_made`): the top-level
Makefile's rules for them are phony recipes that enter ``src/nvidia`` and ``src/nvidia-modeset``, where make would
otherwise read every dependency file and look at every source and header of the kernel-independent build
(thousands in the real tree) to find nothing to do. So neither the intermediates nor that walk are needed; an
entry written by an older fwman (the whole ``_out`` directories) is read the same way.

The key is the SHA-256 of the source identity (the fork commit, or a tree hash for a local directory) and the
compiler's ``--version`` line: a compiler update invalidates the cache, a kernel update does not.
"""

from __future__ import annotations

import hashlib
from itertools import pairwise

from fwman.core import clock, paths
from fwman.core.errors import FwmanError
from fwman.driver.localfs import local_dir
from fwman.host.base import Host

#: the two objects the cache entry holds, relative to the source tree; also the names the fork's top-level
#: Makefile gives their targets (``src/nvidia/$(OUTPUTDIR)/nv-kernel.o``, OUTPUTDIR ``_out/Linux_x86_64``)
OBJECT_FILES = ("src/nvidia/_out/Linux_x86_64/nv-kernel.o", "src/nvidia-modeset/_out/Linux_x86_64/nv-modeset-kernel.o")


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
    """Copy the two objects of cache entry ``key`` into build tree ``tree`` (a host path), dated now.

    The timestamp is newer than the sources' (a fresh checkout gives them the checkout time, which can be later
    than when the cache was filled), for a make that looks at them anyway. Raises FwmanError when a copy fails.
    """
    stamp = clock.now_utc().timestamp()
    for rel in OBJECT_FILES:
        dst = f"{tree}/{rel}"
        host.mkdir(dst.rsplit("/", 1)[0])
        _run(host, ["cp", "-f", local_dir(host, f"{entry_dir(key)}/{rel}"), local_dir(host, dst)])
        _run(host, ["touch", "-d", f"@{stamp:.0f}", local_dir(host, dst)])


def assume_made() -> list[str]:
    """Return the make options that take the restored objects as made: ``-o FILE`` for each (make neither runs
    their recipes nor enters the kernel-independent sub-makes)."""
    return [arg for rel in OBJECT_FILES for arg in ("-o", rel)]


def rebuilt_anyway(output: str) -> bool:
    """Return True when make's ``output`` shows it entered a kernel-independent sub-make after all (a fork whose
    Makefile names those targets differently from :data:`OBJECT_FILES`): the objects were then built again."""
    subdirs = {rel.split("/_out/", 1)[0] for rel in OBJECT_FILES}  # src/nvidia, src/nvidia-modeset
    recipes = [words for words in (line.split() for line in output.splitlines()) if words]
    # the recipe make echoes: `make -C src/nvidia`
    return any(
        w[0].startswith("make") and any(a == "-C" and b.rstrip("/") in subdirs for a, b in pairwise(w)) for w in recipes
    )


def store(host: Host, key: str, tree: str) -> bool:
    """Save the two kernel-independent objects of build tree ``tree`` as entry ``key``; return True when stored.

    Nothing is stored unless both objects exist (a build that failed inside the object step leaves no usable
    entry). The entry is assembled in a temp directory and renamed into place, so a reader never sees half.
    """
    if not all(host.exists(f"{tree}/{rel}") for rel in OBJECT_FILES):
        return False
    final = entry_dir(key)
    tmp = f"{paths.OBJECT_CACHE_DIR}/.{key}.tmp"
    host.remove_tree(tmp)
    for rel in OBJECT_FILES:
        host.mkdir(f"{tmp}/{rel}".rsplit("/", 1)[0])
        _run(host, ["cp", "-a", local_dir(host, f"{tree}/{rel}"), local_dir(host, f"{tmp}/{rel}")])
    host.remove_tree(final)
    host.rename(tmp, final)
    return True


def _run(host: Host, argv: list[str]) -> None:
    result = host.run(argv, timeout=600)
    if not result.ok:
        raise FwmanError(f"{argv[0]} failed while handling the object cache: {result.stderr.strip()}")
