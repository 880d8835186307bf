"""Paths inside a tree that someone else made (an unpacked package, a container's root): resolved as if the tree
were ``/``, so that no link in it leads fwman out of it.

A header package unpacked into the pre-flight's scratch root holds links (``lib/modules/KVER/build ->
/usr/src/linux-headers-KVER``); followed by the operating system, an absolute target is the *host's* path, and a
relative one with enough ``../`` climbs out of the scratch root into installed files, which fwman would then read,
rewrite and delete with the scratch root. :func:`resolve_in_root` follows links the way the kernel does under
``chroot``: an absolute target starts again at the tree's root, ``..`` at its root stays there, at most
:data:`MAX_LINKS` links. :func:`links_leaving` finds the links a tool would follow out of the tree (the build runs
``make`` there, and the operating system, not fwman, follows those).
"""

from __future__ import annotations

import posixpath

from fwman.core.errors import MissingError
from fwman.host.base import Host

#: links followed in one resolution, as Linux's MAXSYMLINKS (40)
MAX_LINKS = 40
#: entries a tree walk looks at: a kernel header tree has tens of thousands; more is not a header tree
MAX_ENTRIES = 200_000


def resolve_in_root(host: Host, root: str, path: str) -> str:
    """Return the host path that ``path`` (absolute, as seen inside the tree at host path ``root``) names, every
    link in it followed inside ``root``. The result is ``root`` or under it, whatever the links say.

    Raises MissingError past :data:`MAX_LINKS` links (a loop).
    """
    root = root.rstrip("/") or "/"
    base = "" if root == "/" else root
    todo = [p for p in path.split("/") if p]
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = f"{base}/{'/'.join([*done, part])}"
        if host.is_link(candidate):
            links += 1
            if links > MAX_LINKS:
                raise MissingError(f"{path}: more than {MAX_LINKS} links under {root} (a loop)")
            target = host.readlink(candidate)
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
            continue
        done.append(part)
    return f"{base}/{'/'.join(done)}" if done else root


def inside_target(root: str, link: str, target: str) -> str:
    """Return the relative target that makes link ``link`` (under ``root``) name what ``target`` names inside the
    tree: an absolute target taken from ``root``, ``..`` stopping there (as :func:`resolve_in_root` reads it)."""
    where = posixpath.normpath(posixpath.join("/", posixpath.dirname(link).removeprefix(root.rstrip("/")), target))
    return posixpath.relpath(root.rstrip("/") + where, posixpath.dirname(link))


def leaves(root: str, link: str, target: str) -> bool:
    """Return True when the operating system, following link ``link`` (a host path under ``root``) to ``target``,
    ends outside ``root``: an absolute target (the host's own path), or one whose ``..`` climb above ``root``."""
    if target.startswith("/"):
        return True
    where = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    return not (where == root.rstrip("/") or where.startswith(root.rstrip("/") + "/"))


def links_leaving(host: Host, root: str, top: str) -> list[tuple[str, str]]:
    """Return ``(link, target)`` for each link under ``top`` (a directory under ``root``, or ``root``) that leads
    out of ``root`` (:func:`leaves`), sorted; the walk does not follow links.

    Raises MissingError when the tree holds more than :data:`MAX_ENTRIES` entries.
    """
    found: list[tuple[str, str]] = []
    todo = [top.rstrip("/")]
    seen = 0
    while todo:
        directory = todo.pop()
        for name in host.listdir(directory):
            seen += 1
            if seen > MAX_ENTRIES:
                raise MissingError(f"{top}: more than {MAX_ENTRIES} entries: not a tree fwman walks")
            path = f"{directory}/{name}"
            if host.is_link(path):
                target = host.readlink(path)
                if leaves(root, path, target):
                    found.append((path, target))
            elif host.is_dir(path):
                todo.append(path)
    return sorted(found)
