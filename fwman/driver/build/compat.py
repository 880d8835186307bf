"""Compatibility patches fwman ships for kernel API changes of the distributions it supports.

A kernel update can change a function the P2P fork calls, and no branch of the fork builds until someone ports
it. Debian 12's kernels 6.1.0-53 and later declare ``int __must_check pci_resize_resource(struct pci_dev *dev,
int i, int size, int exclude_bars)`` (``include/linux/pci.h`` of ``linux-headers-6.1.0-57-common`` 6.1.192-3);
6.1.0-47's header declares ``(struct pci_dev *dev, int i, int size)``. Every P2P branch of
aikitoria/open-gpu-kernel-modules (550.54.15-p2p to 570.86.16-p2p) calls the three-argument form in
``nv_resize_pcie_bars()`` of ``kernel-open/nvidia/nv-pci.c``, so none builds there.

A compat patch is a ``-p1`` unified diff in ``fwman/compat/`` (package data) whose text before the diff says
when it applies, the way the fork's own conftest decides (by what the kernel's headers declare, never by a
release pattern: a backport to another release, or a distribution kernel that never had it, is judged right)::

    Declares: include/linux/pci.h pci_resize_resource 4

It is applied in the build tree of a kernel whose headers declare that function with that many arguments, after
the owner's ``/etc/fwman/patches.d`` patches, and the owner wins: a patches.d file of the same name replaces it
(an empty one turns it off), and an owner's patch for that kernel that changes one of its files leaves it out. A
compat patch that does not apply to the tree (a fork that carries the change itself) is left out with a line
saying so; the build goes on, and fails on its own if the tree needs it. Applied, it is recorded in the manifest
with the patches of patches.d and listed by ``fwman modules status``.

:func:`declared_arguments` and :func:`parse_compat_patch` are pure; :func:`select` reads the headers through
the Host and fwman's own data through :mod:`fwman.core.resources`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from fwman.core import resources
from fwman.core.errors import FwmanError, ParseError
from fwman.driver.build.patches import MAX_PATCH_BYTES, Declaration, KernelPatch, parse_patch
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

_DECLARES = re.compile(
    r"^Declares:[ \t]*(?P<header>\S+)[ \t]+(?P<function>[A-Za-z_]\w*)[ \t]+(?P<n>\d{1,2})[ \t]*$", re.M
)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")
#: the longest header a declaration is looked for in (pci.h of 6.1 is about 90 KB)
MAX_HEADER_BYTES = 4 << 20


def _split_arguments(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def declared_arguments(header: str, function: str) -> int | None:
    """Return how many parameters ``header`` (C text) declares for ``function``, or None when it declares none.

    A declaration or definition is the name after a return type (``int __must_check pci_resize_resource(...)``,
    ``static inline int f(...) {``), its parameter list closed by ``)`` and followed by ``;``, ``{`` or an
    attribute; a call inside another function (``return f(a, b);`` or ``x = f(a)``) is not. Comments are ignored;
    ``(void)`` is zero. The first declaration counts. Never raises.
    """
    text = _COMMENT.sub(" ", header)
    for m in re.finditer(rf"\b{re.escape(function)}\s*\(", text):
        before = text[max(0, m.start() - 200) : m.start()]
        statement = re.split(r"[;{}#]|\n\s*\n", before)[-1]
        words = statement.split()
        # a declaration: the name follows a type (an identifier or `*`), never `return`, `=`, `(`, `,` or an operator
        if not words or not (_IDENT.fullmatch(words[-1].lstrip("*")) or words[-1].endswith("*")):
            continue
        if words[-1] in ("return", "else", "do", "case", "sizeof") or any(c in statement for c in "=(,?:!&|+-<>"):
            continue
        depth, end = 1, m.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        if depth:
            return None  # a declaration cut off
        rest = text[end:].lstrip()
        if not rest or rest[0] not in ";{_":  # `;`, a body, or `__attribute__(...)` / `__must_check`-like
            continue
        params = [p for p in _split_arguments(text[m.end() : end - 1]) if p]
        if params == ["void"]:
            return 0
        return len(params)
    return None


def parse_compat_patch(name: str, path: str, data: bytes) -> KernelPatch:
    """Return the compat patch in ``data`` (a KernelPatch with its :class:`Declaration`).

    Raises ParseError when it has no ``Declares: HEADER FUNCTION N`` line before the diff, or is not a ``-p1``
    unified diff (:func:`fwman.driver.build.patches.parse_patch`).
    """
    patch = parse_patch(name, path, data)
    preamble = data.decode("utf-8", errors="replace").split("\n--- ", 1)[0]
    m = _DECLARES.search(preamble)
    if m is None:
        raise ParseError(name, "Declares", "no 'Declares: HEADER FUNCTION ARGUMENTS' line before the diff")
    header = m.group("header")
    if header.startswith("/") or ".." in header.split("/"):
        raise ParseError(name, "Declares", f"{header[:80]!r} is not a path inside the kernel's headers")
    decl = Declaration(header, m.group("function"), int(m.group("n")))
    return replace(patch, kernels=None, declaration=decl)


def shipped_patches() -> list[KernelPatch]:
    """Return the compat patches fwman ships, in file-name order. Raises ParseError for one that is not valid (a
    packaging error: fwman's own tests read every one)."""
    found = resources.list_data(resources.bundled_compat_patches(), "*.patch")
    return [parse_compat_patch(p.name, str(p), resources.read_data(p, limit=MAX_PATCH_BYTES)) for p in found]


def headers_declare(host: Host, decl: Declaration, include_roots: Sequence[str]) -> bool:
    """Return whether the kernel headers under ``include_roots`` (host paths, tried in order: the common tree of
    split Debian headers first) declare ``decl.function`` with ``decl.arguments`` arguments; False when the
    header is in none of them or declares it otherwise."""
    for root in include_roots:
        path = f"{root.rstrip('/')}/{decl.header}"
        try:
            if not host.exists(path):
                continue
            text = host.read_bytes(path, limit=MAX_HEADER_BYTES).decode("utf-8", errors="replace")
        except FwmanError:  # unreadable (a link that loops under --root): not declared, the build says the rest
            continue
        return declared_arguments(text, decl.function) == decl.arguments
    return False


def select(
    host: Host,
    kver: str,
    owner: Sequence[KernelPatch],
    include_roots: Sequence[str],
    masked: Sequence[str] = (),
    tell: Tell = silent,
) -> list[KernelPatch]:
    """Return fwman's compat patches for ``kver``: those whose declaration the kernel's headers (under
    ``include_roots``) make, less those the owner overrides.

    ``owner`` are the patches.d patches applied for ``kver``; ``masked`` the names of empty patches.d files. A
    compat patch named like an owner's patch or a masked name, or changing a file an owner's patch changes, is
    left out (one report line). Raises ParseError for a shipped patch that is not valid.
    """
    chosen = []
    owner_files = {f: p.name for p in owner for f in p.files}
    owner_names = {p.name for p in owner}
    for patch in shipped_patches():
        assert patch.declaration is not None
        if not headers_declare(host, patch.declaration, include_roots):
            continue
        if patch.name in masked:
            tell(f"fwman's compat patch {patch.name} left out: turned off by /etc/fwman/patches.d/{patch.name}")
            continue
        if patch.name in owner_names:
            tell(f"fwman's compat patch {patch.name} left out: /etc/fwman/patches.d/{patch.name} replaces it")
            continue
        clash = next((f for f in patch.files if f in owner_files), None)
        if clash is not None:
            tell(
                f"fwman's compat patch {patch.name} left out: the owner's patches.d/{owner_files[clash]} changes "
                f"{clash} for {kver}"
            )
            continue
        chosen.append(patch)
    return chosen
