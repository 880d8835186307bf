"""Per-kernel compatibility patches: ``/etc/fwman/patches.d/*.patch``, applied in the build tree of the kernels
they name, the way DKMS applies ``PATCH[#]`` where ``PATCH_MATCH[#]`` matches (dkms(8), dkms.conf: patches in
``-p1`` format applied with ``patch -p1`` before the build, a ``PATCH_MATCH`` regular expression matched against
the kernel being built for, a patch that fails halting the build).

A patch file is a unified diff (``-p1``: ``a/...`` and ``b/...`` paths from the tree's root) whose leading text,
before the diff, may say which kernels it is for::

    Kernels: ^6\\.1\\.0-53-
    Fix the call of pci_resize_resource() for the 4-argument declaration of Debian's 6.1.0-53 headers.
    --- a/kernel-open/nvidia/nv-pci.c
    +++ b/kernel-open/nvidia/nv-pci.c
    ...

``Kernels:`` is a regular expression searched in the kernel release (as DKMS's ``grep -E``); without one the
patch is for every kernel. Patches apply in file-name order. A patch that changes a file outside
``kernel-open/`` changes kernel-independent objects, so it is part of the object cache key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.errors import ParseError
from fwman.host.base import Host

MAX_PATCH_BYTES = 16 << 20
_KERNELS = re.compile(r"^Kernels:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_TARGET = re.compile(r"^\+\+\+ (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Declaration:
    """What a compat patch fwman ships is for (:mod:`fwman.driver.build.compat`): ``header`` (relative to the
    kernel's include root) declares ``function`` with ``arguments`` arguments."""

    header: str
    function: str
    arguments: int

    def text(self) -> str:
        """Return the condition for people: ``include/linux/pci.h declares pci_resize_resource() with 4 arguments``."""
        return f"{self.header} declares {self.function}() with {self.arguments} arguments"


@dataclass(frozen=True)
class KernelPatch:
    """One patch of patches.d: its file, what it says it is for, the files it changes, its digest."""

    name: str  # file name in patches.d
    path: str  # host path
    kernels: str | None  # the regular expression; None: every kernel
    files: tuple[str, ...]  # the tree paths it changes (``-p1`` stripped)
    sha256: str
    #: a donor-patch fork's patch: where it came from (its URL or file); None for a patch of patches.d
    origin: str | None = None
    #: a compat patch fwman ships: what the kernel's headers declare for it to apply; None for any other patch
    declaration: Declaration | None = None

    @property
    def title(self) -> str:
        """Return the patch for messages: ``kernel patch /etc/fwman/patches.d/NAME`` or ``donor patch URL``."""
        if self.declaration is not None:
            return f"fwman's compat patch {self.name}"
        return f"donor patch {self.origin}" if self.origin else f"kernel patch {paths.KERNEL_PATCHES_DIR}/{self.name}"

    def applies_to(self, kver: str) -> bool:
        """Return True when this patch is for kernel ``kver``."""
        return self.kernels is None or re.search(self.kernels, kver) is not None

    @property
    def kernel_independent(self) -> bool:
        """Return True when it changes a file outside ``kernel-open/`` (objects the object cache shares)."""
        return any(not f.startswith("kernel-open/") for f in self.files)

    def to_json(self) -> dict[str, str | None]:
        """Return the patch as recorded in the manifest and shown by ``modules status`` (a compat patch fwman ships
        adds ``declaration``: what the kernel's headers declare for it to apply)."""
        doc: dict[str, str | None] = {"name": self.name, "sha256": self.sha256, "kernels": self.kernels}
        if self.declaration is not None:
            doc["declaration"] = self.declaration.text()
        return doc


def parse_patch(name: str, path: str, data: bytes) -> KernelPatch:
    """Return the KernelPatch in ``data``. Raises ParseError when it is not a ``-p1`` unified diff (no ``+++``
    line, a path that is absolute or climbs out of the tree) or its ``Kernels:`` is not a regular expression."""
    text = data.decode("utf-8", errors="replace")
    files: list[str] = []
    for target in _TARGET.findall(text):
        if target == "/dev/null":
            continue
        rel = target.split("/", 1)[1] if "/" in target else ""
        if target.startswith("/") or not rel or rel.startswith("/") or ".." in rel.split("/"):
            raise ParseError(name, "+++", f"{target[:80]!r} is not a -p1 path inside the tree")
        files.append(rel)
    if not files:
        raise ParseError(name, "diff", "no '+++ b/FILE' line: not a unified diff")
    m = _KERNELS.search(text.split("\n--- ", 1)[0])
    kernels = m.group(1) if m else None
    if kernels is not None:
        try:
            re.compile(kernels)
        except re.error as e:
            raise ParseError(name, "Kernels", f"{kernels[:60]!r} is not a regular expression: {e}") from e
    return KernelPatch(name, path, kernels, tuple(files), hashlib.sha256(data).hexdigest())


def load_patches(host: Host) -> list[KernelPatch]:
    """Return every patch of ``/etc/fwman/patches.d`` (``*.patch``, name order); [] when there is none.

    An empty file is not a patch: it turns off fwman's compat patch of that name (:func:`masked_names`).
    Raises ParseError for a patch that cannot be read as one (a build must not go on without it).
    """
    return [parse_patch(name, path, data) for name, path, data in _patch_files(host) if data.strip()]


def masked_names(host: Host) -> list[str]:
    """Return the names of the empty ``*.patch`` files of ``/etc/fwman/patches.d`` (a link to /dev/null too):
    each turns off fwman's compat patch of that name, as an empty unit file masks one in systemd."""
    return [name for name, _path, data in _patch_files(host) if not data.strip()]


def _patch_files(host: Host) -> list[tuple[str, str, bytes]]:
    """Return (name, host path, content) of each ``*.patch`` of patches.d, in name order."""
    if not host.is_dir(paths.KERNEL_PATCHES_DIR):
        return []
    names = [name for name in sorted(host.listdir(paths.KERNEL_PATCHES_DIR)) if name.endswith(".patch")]
    found = [(name, f"{paths.KERNEL_PATCHES_DIR}/{name}") for name in names]
    return [(name, path, host.read_bytes(path, limit=MAX_PATCH_BYTES)) for name, path in found]


def cache_salt(patches: list[KernelPatch]) -> str:
    """Return what the patches add to the object cache key: the digests of those changing kernel-independent
    files, "" when none does (a kernel-open/ patch is rebuilt per kernel anyway)."""
    shared = [p.sha256 for p in patches if p.kernel_independent]
    return "\0patches:" + ",".join(shared) if shared else ""


def failed_hunks(output: str) -> list[str]:
    """Return the lines of ``patch`` output that say what did not apply (``Hunk #2 FAILED at 40.``, a file
    that is missing, a reversed patch) with the file each is in. Never raises."""
    lines: list[str] = []
    current = ""
    for line in output.splitlines():
        lead = next((w for w in ("patching file ", "checking file ") if line.startswith(w)), None)
        if lead is not None:  # "checking file" is what --dry-run says
            current = line[len(lead) :].strip()
        elif "FAILED" in line or "can't find file" in line or "Reversed" in line or "No file to patch" in line:
            lines.append(f"{current}: {line.strip()}" if current and "FAILED" in line else line.strip())
    return lines
