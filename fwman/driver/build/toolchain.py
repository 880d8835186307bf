"""The tools the P2P fork's build runs, checked before a build starts, and their fingerprint.

What the real tree's build runs (aikitoria/open-gpu-kernel-modules, branch ``570.86.16-p2p``; the same in every
P2P branch of that fork; docs/modules.md, "The toolchain", quotes the lines):

- ``make``: GNU make with ``$(eval)`` (``utils.mk`` refuses an older one: "This Makefile requires a GNU Make
  that supports 'eval'");
- ``gcc``: ``CC ?= gcc`` (``utils.mk``) compiles the C sources of ``src/nvidia`` and ``src/nvidia-modeset``;
  kernel-open's kbuild uses the compiler the kernel was built with (``CONFIG_CC_VERSION_TEXT``, ``gcc-12`` on
  Debian 12, which the headers package pulls in) or ``cc``;
- ``g++``: ``CXX ?= g++`` (``utils.mk``); ``NV_GET_SOURCE_TYPE`` compiles every ``.cpp`` with it, and
  ``src/nvidia-modeset/srcs.mk`` lists the DisplayPort library in C++ (``SRCS_CXX +=
  ../common/displayport/src/dp_auxretry.cpp`` and more): without g++ the build dies with
  ``/bin/sh: 1: g++: not found`` (field report, docs/modules.md);
- ``ld`` and ``objcopy``: ``LD ?= ld``, ``OBJCOPY ?= objcopy`` (``utils.mk``): ``src/nvidia/Makefile`` links
  ``nv-kernel.o`` with ``ld -r`` and localizes symbols with ``objcopy``; ``READ_ONLY_OBJECT_FROM_FILE_RULE``
  embeds the shaders with both; gcc and g++ run ``as`` (binutils; without it: ``cc: fatal error: cannot execute
  'as'``);
- ``xz``: ``XZ ?= xz`` (``utils.mk``); ``src/nvidia-modeset/Makefile``'s ``COMPRESS_SHADERS`` runs
  ``xz -ce -C none`` on every shader blob (xz-utils);
- ``patch``: fwman's own, for ``/etc/fwman/patches.d``, the compat patches fwman ships and a donor patch.

``sed``, ``sh``, ``date``, ``hostname``, ``whoami`` are Essential in Debian and not checked.

:func:`missing_tools` is pure (a ``which`` callable in); :func:`check_toolchain` asks the Host and raises the one
error a person can act on: every missing tool and the ``apt install`` line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from fwman.core.errors import MissingError
from fwman.host.base import Host


@dataclass(frozen=True)
class Tool:
    """A command the build runs, the Debian package that provides it, and why it is needed."""

    command: str
    package: str
    why: str


#: what every build needs (the module docstring cites where the fork's Makefiles use each)
BUILD_TOOLS = (
    Tool("make", "make", "runs the fork's Makefiles"),
    Tool("gcc", "gcc", "compiles the C sources"),
    Tool("g++", "g++", "compiles nvidia-modeset's C++ DisplayPort library"),
    Tool("as", "binutils", "assembles what gcc and g++ compile"),
    Tool("ld", "binutils", "links nv-kernel.o"),
    Tool("objcopy", "binutils", "post-processes nv-kernel.o and the shader objects"),
    Tool("xz", "xz-utils", "compresses nvidia-modeset's shaders"),
)
#: what a build that applies a patch needs as well
PATCH_TOOL = Tool("patch", "patch", "applies patches.d, fwman's compat patches and donor patches")

#: the commands whose name maps to another package, for a tool a build log says is missing (not one fwman checks)
_PACKAGE_OF = {t.command: t.package for t in (*BUILD_TOOLS, PATCH_TOOL)} | {
    "cc": "gcc",
    "c++": "g++",
    "as": "binutils",
    "ar": "binutils",
    "git": "git",
    "perl": "perl",
    "python3": "python3",
    "bc": "bc",
    "flex": "flex",
    "bison": "bison",
    "pkg-config": "pkgconf",
}


def package_of(command: str) -> str | None:
    """Return the Debian package that provides ``command`` (``g++`` -> ``g++``, ``xz`` -> ``xz-utils``), or None
    when fwman does not know it. ``gcc-12`` and the like are versioned compilers of their own package."""
    if command in _PACKAGE_OF:
        return _PACKAGE_OF[command]
    for base in ("gcc", "g++", "cpp"):
        if command.startswith(base + "-") and command[len(base) + 1 :].isdigit():
            return command
    return None


def required_tools(patching: bool) -> tuple[Tool, ...]:
    """Return the tools a build needs: :data:`BUILD_TOOLS`, and ``patch`` when it applies a patch."""
    return (*BUILD_TOOLS, PATCH_TOOL) if patching else BUILD_TOOLS


def missing_tools(which: Callable[[str], str | None], patching: bool) -> list[Tool]:
    """Return the tools of :func:`required_tools` that ``which`` does not find, in that order."""
    return [t for t in required_tools(patching) if which(t.command) is None]


def install_line(tools: list[Tool]) -> str:
    """Return the ``apt install`` line for ``tools`` (each package once, in order)."""
    return "apt install " + " ".join(dict.fromkeys(t.package for t in tools))


def missing_error(tools: list[Tool]) -> MissingError:
    """Return the error that names ``tools`` (non-empty), why each is needed, and the line that installs them."""
    names = ", ".join(t.command for t in tools)
    verb = "is" if len(tools) == 1 else "are"
    # why each is needed, while that stays one readable line (a bare machine misses them all)
    why = f" ({'; '.join(f'{t.command} {t.why}' for t in tools)})" if len(tools) <= 2 else ""
    return MissingError(
        f"the module build needs {names}, which {verb} not installed{why}",
        hint=f"install the build tools: {install_line(tools)}",
    )


def check_toolchain(host: Host, patching: bool = False) -> None:
    """Return when every tool the build needs is on the host's PATH.

    Raises MissingError (exit 5) naming every missing tool and the ``apt install`` line, before anything is
    fetched, copied or compiled.
    """
    missing = missing_tools(host.which, patching)
    if missing:
        raise missing_error(missing)


def version_line(host: Host, command: str) -> str:
    """Return the first line of ``COMMAND --version``, or ``COMMAND: not installed``. Never raises for the tool."""
    result = host.run([command, "--version"], timeout=30)
    if result.missing or not result.ok or not result.stdout.strip():
        return f"{command}: not installed"
    return result.stdout.splitlines()[0].strip()


@dataclass(frozen=True)
class Toolchain:
    """The compilers' version lines and where each tool is: what a failed build is remembered with."""

    cc: str  #: first line of ``cc --version`` (the object cache key and the manifest's ``compiler``)
    cxx: str  #: first line of ``g++ --version``
    tools: tuple[tuple[str, str], ...]  #: (command, path or "") for every tool of :func:`required_tools`

    @property
    def fingerprint(self) -> str:
        """Return a short digest of everything here: another compiler, or a tool installed or removed, changes it."""
        text = "\n".join([self.cc, self.cxx, *(f"{c}={p}" for c, p in self.tools)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def current_toolchain(host: Host) -> Toolchain:
    """Return the host's toolchain now (runs ``cc --version`` and ``g++ --version``; never raises for a tool)."""
    tools = tuple((t.command, host.which(t.command) or "") for t in required_tools(True))
    return Toolchain(version_line(host, "cc"), version_line(host, "g++"), tools)
