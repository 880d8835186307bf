"""Stand-in NVIDIA user-space packages in a local apt repository of a Debian root (the driver move's story and bench).

Two of Debian's package names for NVIDIA's driver libraries (``libnvidia-ml1``, ``libcuda1``), each shipping its
library under the versioned file name NVIDIA's installer uses (``libcuda.so.VERSION``, with the ``.so.1`` link),
built in the root with ``dpkg-deb -b`` at Debian revision ``-1`` and indexed with ``apt-ftparchive`` in
``deb [trusted=yes] file:/srv/story-nvidia ./``. The library files are a few bytes (an ELF magic and the name):
what fwman's audit reads of them is the version in the file name.
"""

from __future__ import annotations

import shlex

from tests.support.debroot import DebRoot

PACKAGES = {"libnvidia-ml1": "libnvidia-ml.so", "libcuda1": "libcuda.so"}
#: Debian's package of the GSP firmware (``/lib/firmware/nvidia/VERSION/gsp_*.bin``): it moves with the driver
FIRMWARE = "firmware-nvidia-gsp"
NAMES = (*PACKAGES, FIRMWARE)
LIBDIR = "/usr/lib/x86_64-linux-gnu"
REPO = "/srv/story-nvidia"


def _build(version: str) -> str:
    """Return the shell that builds the stand-in packages of ``version`` into the repository directory."""
    script = []
    for name, lib in PACKAGES.items():
        d = f"/root/nvpkg/{name}-{version}"
        control = (
            f"Package: {name}\nVersion: {version}-1\nArchitecture: all\nMaintainer: story <story@localhost>\n"
            f"Description: stand-in for NVIDIA's {name} {version}\n"
        )
        script.append(
            f"mkdir -p {d}/DEBIAN {d}{LIBDIR} && printf '%s' {shlex.quote(control)} > {d}/DEBIAN/control && "
            f"printf '\\177ELF {name} {version}' > {d}{LIBDIR}/{lib}.{version} && "
            f"ln -s {lib}.{version} {d}{LIBDIR}/{lib}.1 && dpkg-deb -b {d} {REPO}/ >/dev/null"
        )
    d = f"/root/nvpkg/{FIRMWARE}-{version}"
    control = (
        f"Package: {FIRMWARE}\nVersion: {version}-1\nArchitecture: all\nMaintainer: story <story@localhost>\n"
        f"Description: stand-in for the GSP firmware of NVIDIA's driver {version}\n"
    )
    script.append(
        f"mkdir -p {d}/DEBIAN {d}/lib/firmware/nvidia/{version} && printf '%s' {shlex.quote(control)} > "
        f"{d}/DEBIAN/control && printf 'GSP {version}' > {d}/lib/firmware/nvidia/{version}/gsp_ga10x.bin && "
        f"dpkg-deb -b {d} {REPO}/ >/dev/null"
    )
    return " && ".join(script)


def offer_user_space(root: DebRoot, installed: str, offered: list[str]) -> None:
    """Put the stand-in packages of ``installed`` and every version of ``offered`` in the root's local repository,
    ``apt-get update``, and install those of ``installed``."""
    versions = [installed, *offered]
    root.sh(
        f"mkdir -p {REPO} && "
        + " && ".join(_build(v) for v in versions)
        + f" && cd {REPO} && apt-ftparchive packages . > Packages && "
        f"echo 'deb [trusted=yes] file:{REPO} ./' > /etc/apt/sources.list.d/story-nvidia.list && "
        "apt-get update -q && apt-get install -y -q " + " ".join(f"{n}={installed}-1" for n in NAMES)
    )


#: a stand-in for nvidia-container-toolkit's ``nvidia-ctk cdi generate --output=FILE`` (NVIDIA's tool needs the
#: driver): it writes a CDI spec as NVIDIA's does, the libraries it finds mounted by their versioned host paths
NVIDIA_CTK = r"""#!/bin/sh
[ "$1" = cdi ] && [ "$2" = generate ] || { echo "stand-in nvidia-ctk: only 'cdi generate'" >&2; exit 2; }
out=
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}" ;; esac; done
[ -n "$out" ] || { echo "stand-in nvidia-ctk: --output=FILE" >&2; exit 2; }
{
  echo "---"
  echo "cdiVersion: 0.5.0"
  echo "containerEdits:"
  echo "  mounts:"
  for lib in /usr/lib/x86_64-linux-gnu/libcuda.so.*.* /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*.*; do
    [ -e "$lib" ] || continue
    echo "  - containerPath: $lib"
    echo "    hostPath: $lib"
    echo "    options: [ro, nosuid, nodev, bind]"
  done
  echo "devices:"
  echo "- containerEdits:"
  echo "    deviceNodes:"
  echo "    - path: /dev/nvidia0"
  echo "  name: all"
  echo "kind: nvidia.com/gpu"
} > "$out.tmp" && mv "$out.tmp" "$out"
echo "Generated CDI spec with version 0.5.0" >&2
"""


def install_nvidia_ctk(root: DebRoot) -> None:
    """Put the stand-in ``nvidia-ctk`` in the root's /usr/local/bin and write ``/etc/cdi/nvidia.yaml`` with it."""
    root.write_text("/usr/local/bin/nvidia-ctk", NVIDIA_CTK)
    root.sh(
        "chmod 755 /usr/local/bin/nvidia-ctk && mkdir -p /etc/cdi && "
        "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
    )


def stand_in_run(version: str) -> str:
    """Return a stand-in for NVIDIA's ``NVIDIA-Linux-x86_64-VERSION.run`` (NVIDIA's needs the hardware to be
    useful): with ``--no-kernel-modules`` it removes the previous installation's libraries, as nvidia-installer
    does, and installs the user space of ``version`` (the libraries under their versioned names, the .so.1
    links); without it, it refuses (this stand-in installs no kernel module)."""
    return rf"""#!/bin/sh
case " $* " in
  *" --no-kernel-modules "*) ;;
  *) echo "stand-in installer: user space only (--no-kernel-modules)" >&2; exit 1 ;;
esac
lib={LIBDIR}
mkdir -p $lib
for name in libcuda libnvidia-ml; do
  rm -f $lib/$name.so.*
  printf '\177ELF %s {version}' $name > $lib/$name.so.{version}
  ln -s $name.so.{version} $lib/$name.so.1
done
"""


def make_container_root(root: DebRoot, path: str, version: str) -> None:
    """Make an LXC-style container root at ``path`` inside the Debian root (a shell and the few tools the
    installer needs, with their libraries) and install the user space of ``version`` in it with the stand-in
    ``.run``, chrooted, as an owner does inside the container."""
    tools = "/bin/sh /usr/bin/dash /usr/bin/rm /usr/bin/ln /usr/bin/mkdir"
    run = f"/root/{run_file(version)}"
    root.write_text(run, stand_in_run(version))
    root.sh(
        f"mkdir -p {path}/tmp {path}{LIBDIR} && for b in {tools}; do cp --parents -L $b {path}; "
        f"for l in $(ldd $b | grep -o '/[^ ]*'); do cp --parents -L $l {path}; done; done && "
        f"cp {run} {path}/tmp/ && chroot {path} sh /tmp/{run_file(version)} --no-kernel-modules --silent && "
        f"rm {path}/tmp/{run_file(version)}"
    )


def run_file(version: str) -> str:
    """Return the name of NVIDIA's installer of ``version``."""
    return f"NVIDIA-Linux-x86_64-{version}.run"
