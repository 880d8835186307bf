"""Ubuntu-shaped test packages: stand-ins named, laid out and scripted like the real Ubuntu packages.

Every fact here is read from Ubuntu's archive and written down in docs/ubuntu.md (Packages indexes of jammy-updates
and noble, the packages' file lists and maintainer scripts): the names, versions, ``Depends``/``Provides``, where
the ``.ko`` files go (``/lib/modules/<kver>/kernel/nvidia-580-open/``) and what the postinst/postrm run. What is
NOT Ubuntu's: the ``.ko`` files are stand-ins built by code (fixtures/tinymod/elfgen: an ELF with NVIDIA's
modinfo tags, never NVIDIA's code), and the stand-in kernel image carries a placeholder ``vmlinuz``, an empty
``System.map`` and no maintainer scripts (the real one's postinst runs /etc/kernel/postinst.d through a dpkg
trigger, which would build an initramfs of a kernel that does not exist). The os-release texts are base-files'
(``/usr/lib/os-release`` of base-files 12ubuntu4.7 and 13ubuntu10.5, to which ``/etc/os-release`` links).

Packages are built with the real ``dpkg-deb --build``; :func:`unpack_into` installs them into a ``--root`` tree
with the real ``dpkg --root --unpack`` (which runs no postinst: these packages have no preinst), and the system
test installs them into a real Debian root with apt (tests/system/test_ubuntu_prebuilt.py).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fixtures.tinymod.elfgen import build_module, nvidia_tags

#: /usr/lib/os-release of Ubuntu 22.04 (base-files 12ubuntu4.7)
JAMMY_OS_RELEASE = (
    'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nVERSION="22.04.5 LTS (Jammy Jellyfish)"\n'
    'VERSION_CODENAME=jammy\nID=ubuntu\nID_LIKE=debian\nHOME_URL="https://www.ubuntu.com/"\n'
    'SUPPORT_URL="https://help.ubuntu.com/"\nBUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
    'PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"\nUBUNTU_CODENAME=jammy\n'
)
#: /usr/lib/os-release of Ubuntu 24.04 (base-files 13ubuntu10.5)
NOBLE_OS_RELEASE = (
    'PRETTY_NAME="Ubuntu 24.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION="24.04.5 LTS (Noble Numbat)"\n'
    'VERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\nHOME_URL="https://www.ubuntu.com/"\n'
    'SUPPORT_URL="https://help.ubuntu.com/"\nBUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
    'PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"\nUBUNTU_CODENAME=noble\n'
    "LOGO=ubuntu-logo\n"
)

#: jammy-updates/restricted: nvidia-kernel-common-580, nvidia-dkms-580-open and nvidia-driver-580-open
DRIVER = "580.178.04"
DRIVER_PACKAGE_VERSION = "580.178.04-0ubuntu0.22.04.1"
#: two HWE 6.8 kernels of jammy-updates with prebuilt 580-open modules, and their package versions
OLD_ABI, OLD_VERSION = "6.8.0-138-generic", "6.8.0-138.138~22.04.1+3"
NEW_ABI, NEW_VERSION = "6.8.0-149-generic", "6.8.0-149.149~22.04.1"
MODULE_NAMES = ("nvidia-drm", "nvidia-modeset", "nvidia-peermem", "nvidia-uvm", "nvidia")
META = "linux-modules-nvidia-580-open-generic-hwe-22.04"

# The maintainer scripts of linux-modules-nvidia-580-open-6.8.0-149-generic (linux-restricted-signatures-hwe-6.8,
# 6.8.0-149.149~22.04.1), with the kernel release as a parameter. `image_path=/boot/-$version` is as shipped.
MODULES_POSTINST = """#!/bin/sh
set -e

version={kver}
image_path=/boot/-$version

if [ "$1" != configure ]; then
    exit 0
fi

depmod -a -F /boot/System.map-$version $version || true
if [ -d /etc/kernel/postinst.d ]; then
    cat - >/usr/lib/linux/triggers/$version <<EOF
DEB_MAINT_PARAMS="$*" run-parts --report --exit-on-error --arg=$version \\
\t    --arg="$image_path" /etc/kernel/postinst.d
EOF
    dpkg-trigger --no-await linux-update-$version
fi

exit 0
"""
MODULES_POSTRM = """#!/bin/sh
set -e

version={kver}
image_path=/boot/-$version

if [ "$1" != remove ]; then
    exit 0
fi

depmod -a -F /boot/System.map-$version $version 2>/dev/null || true

exit 0
"""


@dataclass
class Pkg:
    """One package to build: control fields, files (path -> bytes) and maintainer scripts (name -> text)."""

    name: str
    version: str
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: tuple[str, ...] = ()
    scripts: dict[str, str] = field(default_factory=dict)
    arch: str = "amd64"


def _doc(name: str) -> dict[str, bytes]:
    return {f"/usr/share/doc/{name}/copyright": b"stand-in for a test: not Ubuntu's package\n"}


def kernel_image(kver: str, version: str) -> Pkg:
    """Return the stand-in ``linux-image-<kver>``: a placeholder image, an empty System.map, the module tree."""
    files = {f"/boot/vmlinuz-{kver}": b"placeholder, not a kernel\n", f"/boot/System.map-{kver}": b""}
    files[f"/lib/modules/{kver}/modules.builtin"] = b""
    files[f"/lib/modules/{kver}/modules.order"] = b""
    return Pkg(
        f"linux-image-{kver}",
        version,
        {"Section": "kernel"},
        {**files, **_doc(f"linux-image-{kver}")},
        dirs=(f"/lib/modules/{kver}/kernel",),
    )


def prebuilt_modules(kver: str, version: str) -> Pkg:
    """Return ``linux-modules-nvidia-580-open-<kver>``: the signed .ko files in ``kernel/nvidia-580-open/``
    (stand-ins built by code) and the real package's postinst and postrm."""
    name = f"linux-modules-nvidia-580-open-{kver}"
    files = {
        f"/lib/modules/{kver}/kernel/nvidia-580-open/{m}.ko": build_module(
            nvidia_tags(DRIVER, kver, name=m.replace("-", "_"))
        )
        for m in MODULE_NAMES
    }
    fields = {
        "Source": "linux-restricted-signatures-hwe-6.8",
        "Section": "restricted/kernel",
        "Depends": f"linux-image-{kver} | linux-image-unsigned-{kver}, nvidia-kernel-common-580 (<= {DRIVER}-1), "
        f"nvidia-kernel-common-580 (>= {DRIVER})",
        "Built-Using": f"nvidia-dkms-580-open (= {DRIVER_PACKAGE_VERSION})",
    }
    return Pkg(
        name,
        version,
        fields,
        {**files, **_doc(name)},
        dirs=("/lib/modules/kernel/nvidia-580-open", "/usr/lib/linux/triggers"),
        scripts={"postinst": MODULES_POSTINST.format(kver=kver), "postrm": MODULES_POSTRM.format(kver=kver)},
    )


def prebuilt_meta(kver: str, version: str) -> Pkg:
    """Return ``linux-modules-nvidia-580-open-generic-hwe-22.04``: depends on one kernel's modules and provides
    ``nvidia-dkms-580-open``."""
    fields = {
        "Source": "linux-restricted-modules-hwe-6.8",
        "Section": "restricted/kernel",
        "Provides": f"nvidia-dkms-580-open (= {DRIVER_PACKAGE_VERSION}), nvidia-prebuilt-kernel",
        "Depends": f"linux-modules-nvidia-580-open-{kver} (= {version}), nvidia-kernel-common-580 (>= {DRIVER})",
    }
    return Pkg(META, version, fields, _doc(META))


def signatures(kver: str, version: str) -> Pkg:
    """Return ``linux-signatures-nvidia-<kver>``: ``*.ko.sig`` files for the proprietary branches' ``bits/``."""
    name = f"linux-signatures-nvidia-{kver}"
    files = {
        f"/lib/modules/{kver}/kernel/{d}/bits/{m}.ko.sig": bytes(790)
        for d in ("nvidia-580", "nvidia-580srv")
        for m in MODULE_NAMES
    }
    return Pkg(name, version, {"Source": "linux-restricted-signatures-hwe-6.8"}, {**files, **_doc(name)})


def driver_packages() -> list[Pkg]:
    """Return stand-ins of nvidia-kernel-common-580, nvidia-dkms-580-open and nvidia-driver-580-open (their
    version relations as in jammy-updates; no files but a copyright)."""
    v = DRIVER_PACKAGE_VERSION
    return [
        Pkg(
            "nvidia-kernel-common-580",
            v,
            {"Provides": f"nvidia-kernel-common, nvidia-kernel-common-580-{DRIVER}"},
            _doc("nvidia-kernel-common-580"),
        ),
        Pkg(
            "nvidia-dkms-580-open",
            v,
            {"Provides": "nvidia-dkms-kernel", "Conflicts": "nvidia-dkms-kernel"},
            _doc("nvidia-dkms-580-open"),
        ),
        Pkg(
            "nvidia-driver-580-open",
            v,
            {
                "Depends": f"nvidia-dkms-580-open (<= {DRIVER}-1), nvidia-dkms-580-open (>= {DRIVER}), "
                f"nvidia-kernel-common-580 (>= {DRIVER})"
            },
            _doc("nvidia-driver-580-open"),
        ),
    ]


def archive() -> list[Pkg]:
    """Return every package of the test archive: two kernels with their prebuilt modules and metapackage versions,
    the signatures of the newer one, and the driver stand-ins."""
    return [
        kernel_image(OLD_ABI, OLD_VERSION),
        kernel_image(NEW_ABI, NEW_VERSION),
        prebuilt_modules(OLD_ABI, OLD_VERSION),
        prebuilt_modules(NEW_ABI, NEW_VERSION),
        prebuilt_meta(OLD_ABI, OLD_VERSION),
        prebuilt_meta(NEW_ABI, NEW_VERSION),
        signatures(NEW_ABI, NEW_VERSION),
        *driver_packages(),
    ]


def build(pkg: Pkg, work: Path, out: Path) -> Path:
    """Build ``pkg`` with the real ``dpkg-deb --build`` under ``work``; return the .deb written into ``out``."""
    tree = work / f"{pkg.name}_{pkg.version}"
    (tree / "DEBIAN").mkdir(parents=True)
    control = {
        "Package": pkg.name,
        "Version": pkg.version,
        "Architecture": pkg.arch,
        "Maintainer": "fwman tests <tests@example.invalid>",
        **pkg.fields,
        "Description": f"stand-in of Ubuntu's {pkg.name} for fwman's tests",
    }
    (tree / "DEBIAN/control").write_text("".join(f"{k}: {v}\n" for k, v in control.items()))
    for script, text in pkg.scripts.items():
        (tree / "DEBIAN" / script).write_text(text)
        (tree / "DEBIAN" / script).chmod(0o755)
    for d in pkg.dirs:
        (tree / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path, data in pkg.files.items():
        target = tree / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    out.mkdir(parents=True, exist_ok=True)
    deb = out / f"{pkg.name}_{pkg.version.replace(':', '%3a')}_{pkg.arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def write_repo(pkgs: list[Pkg], work: Path, repo: Path) -> None:
    """Build ``pkgs`` into the flat repository ``repo`` and index it (``Packages`` by dpkg-scanpackages)."""
    for pkg in pkgs:
        build(pkg, work, repo)
    index = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True, capture_output=True, text=True
    )
    (repo / "Packages").write_text(index.stdout)


def ubuntu_root(root: Path, os_release: str = JAMMY_OS_RELEASE) -> Path:
    """Make ``root`` an empty Ubuntu-shaped tree: os-release as base-files lays it out, an empty dpkg database."""
    (root / "usr/lib").mkdir(parents=True, exist_ok=True)
    (root / "usr/lib/os-release").write_text(os_release)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/os-release").symlink_to("../usr/lib/os-release")
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "var/lib/dpkg/status").touch()
    return root


def unpack_into(root: Path, pkgs: list[Pkg], work: Path) -> None:
    """Unpack ``pkgs`` into the tree ``root`` with the real ``dpkg --root --unpack`` (dpkg writes its status and
    file lists; no postinst runs, so the packages stay "unpacked")."""
    debs = [str(build(p, work, work / "debs")) for p in pkgs]
    subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--unpack", *debs], check=True, capture_output=True)
