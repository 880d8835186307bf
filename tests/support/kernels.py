"""The two real Debian kernels the module tests build for, chosen by what matters, not by a point release.

The stand-in fork tree calls ``pci_resize_resource(dev, bar, size)`` with three arguments, as
``kernel-open/nvidia/nv-pci.c`` of the 570.86.16-p2p branch does. Debian's bookworm kernels changed that
declaration within 6.1.0 (``include/linux/pci.h`` of the ``-common`` headers gained a fourth argument,
``exclude_bars``), so the tests need one kernel whose headers declare three arguments (the fork builds: the
"good" kernel) and one that declares four (the build fails in nv-pci.c: the "bad" kernel).

Two users, standard library only:

- the Makefile's ``system-deps`` (``python3 tests/support/kernels.py packages``): which ``linux-headers-*``
  packages to install, chosen from what ``apt-cache`` offers now: none when an installed pair already differs,
  else the oldest and the newest offered (the change lies between them as long as the archive still offers a
  kernel from before it); ``python3 tests/support/kernels.py check`` then exits 1 unless the installed headers
  hold such a pair;
- ``tests/support/modules.py``: :func:`installed_pair` names the pair for the tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: ``linux-headers-6.1.0-50-amd64``: a versioned Debian header package of the amd64 flavour (not the metapackage)
_PACKAGE = re.compile(r"^linux-headers-(?P<kver>\d+\.\d+\.\d+-\d+-amd64)$")
_DECL = re.compile(r"\bpci_resize_resource\s*\((?P<args>[^)]*)\)\s*;")


def offered(apt_cache_search: str) -> list[str]:
    """Return the kernel releases of ``apt-cache search --names-only`` output, oldest first (version order)."""
    kvers = set()
    for line in apt_cache_search.splitlines():
        m = _PACKAGE.match(line.split(" - ", 1)[0].strip())
        if m:
            kvers.add(m.group("kver"))
    return sorted(kvers, key=_version_key)


def _version_key(kver: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", kver))


def resize_arguments(pci_h: str) -> int | None:
    """Return how many arguments ``pci.h`` declares for pci_resize_resource(), or None when it declares none."""
    m = _DECL.search(pci_h)
    if m is None:
        return None
    return len([a for a in m.group("args").split(",") if a.strip()])


def headers_arguments(kver: str, usr_src: Path = Path("/usr/src")) -> int | None:
    """Return the argument count of the installed headers of ``kver`` (None: not installed or not declared)."""
    common = usr_src / f"linux-headers-{kver.removesuffix('-amd64')}-common" / "include/linux/pci.h"
    if not (usr_src / f"linux-headers-{kver}").is_dir() or not common.is_file():
        return None
    return resize_arguments(common.read_text(errors="replace"))


def installed_pair(usr_src: Path = Path("/usr/src")) -> tuple[str, str] | None:
    """Return (good, bad): the newest installed kernel with 3 arguments and the oldest with 4; None without both."""
    kvers = sorted(
        (m.group("kver") for p in usr_src.glob("linux-headers-*-amd64") if (m := _PACKAGE.match(p.name))),
        key=_version_key,
    )
    three = [k for k in kvers if headers_arguments(k, usr_src) == 3]
    four = [k for k in kvers if headers_arguments(k, usr_src) == 4]
    return (three[-1], four[0]) if three and four else None


def packages_to_install(offered_kvers: list[str], pair: tuple[str, str] | None) -> list[str]:
    """Return the header packages to install: [] when ``pair`` is installed, else the oldest and newest offered."""
    if pair is not None or not offered_kvers:
        return []
    chosen = dict.fromkeys([offered_kvers[0], offered_kvers[-1]])
    return [f"linux-headers-{k}" for k in chosen]


def needed_now() -> list[str]:
    """Return the header packages to install now: :func:`packages_to_install` over what ``apt-cache`` offers and
    the installed headers. Raises subprocess.CalledProcessError when apt-cache fails."""
    search = subprocess.run(
        ["apt-cache", "search", "--names-only", r"^linux-headers-[0-9.]+-[0-9]+-amd64$"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return packages_to_install(offered(search), installed_pair())


def main(argv: list[str]) -> int:
    """``packages``: print the packages to install; ``check``: exit 1 unless a differing pair is installed."""
    if argv[1:] == ["packages"]:
        print(" ".join(needed_now()))
        return 0
    if argv[1:] == ["check"]:
        pair = installed_pair()
        if pair is None:
            print("no installed pair of kernel headers whose pci_resize_resource() differs (3 and 4 arguments)")
            return 1
        print(f"kernels for the module tests: {pair[0]} (3 arguments), {pair[1]} (4 arguments)")
        return 0
    print("usage: kernels.py packages|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
