"""Kernel tracks for a Debian root: metapackages that make real apt offer chosen kernels as an upgrade.

Debian's own ``linux-image-amd64`` follows the newest ABI only, so a root that must be offered a *chosen*
kernel (or two: one a fork builds and one it refuses) gets one small metapackage per kernel, built in the root
with ``dpkg-deb -b``: version 1 (installed) depends on the root's running kernel, version 2 (in a local
repository, ``deb [trusted=yes] file:/srv/story-kernels ./``, indexed with ``apt-ftparchive``) on the chosen
kernel's real image and headers packages from Debian's archive. ``apt-get -s dist-upgrade`` then offers the
chosen kernels as it offers a new ABI to an owner with the metapackage.
"""

from __future__ import annotations

import shlex

from tests.support.debroot import DebRoot, kernel_packages

REPO = "/srv/story-kernels"


def _meta(name: str, version: str, kver: str) -> str:
    """Return the shell that builds metapackage ``name`` ``version`` depending on ``kver``'s image and headers."""
    image, headers = kernel_packages(kver)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: story <story@localhost>\n"
        f"Depends: {image}, {headers}\nDescription: the story owner's kernel track {name}\n"
    )
    d = f"/root/meta/{name}-{version}"
    return (
        f"mkdir -p {d}/DEBIAN && printf '%s' {shlex.quote(control)} > {d}/DEBIAN/control && dpkg-deb -b {d} >/dev/null"
    )


def offer_kernels(root: DebRoot, installed: str, tracks: dict[str, str]) -> None:
    """Install a track per name of ``tracks`` at version 1 (on kernel ``installed``) and offer version 2 (on the
    track's kernel) in the root's local repository; ``apt-get update`` at the end."""
    script = [_meta(name, "1", installed) for name in tracks]
    script += [_meta(name, "2", kver) for name, kver in tracks.items()]
    script += [
        "dpkg -i " + " ".join(f"/root/meta/{name}-1.deb" for name in tracks),
        f"mkdir -p {REPO} && cp /root/meta/*-2.deb {REPO}/",
        f"cd {REPO} && apt-ftparchive packages . > Packages",
        f"echo 'deb [trusted=yes] file:{REPO} ./' > /etc/apt/sources.list.d/story-kernels.list",
        "apt-get update -q",
    ]
    root.sh(" && ".join(script))
