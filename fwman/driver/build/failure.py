"""Why a module build failed, read from its whole log: the first real cause, not make's last line.

A failed build of the real fork ends with make's ``*** [...] Error N`` lines, the result of whatever went wrong
first, often thousands of lines earlier: in the field report of issue 39 the cause, ``/bin/sh: 1: g++: not found``,
was line 829 of a 3,520-line log whose last make line named only ``Makefile:219: _out/Linux_x86_64/dp_auxretry.o``.
:func:`parse_build_failure` scans the log in order for the first line that is a cause:

- a command the build ran that is not installed: dash's ``/bin/sh: 1: g++: not found``, bash's
  ``bash: line 1: g++: command not found``, make's own ``make: g++: No such file or directory`` (a recipe make runs
  without a shell) or ``make: g++: Command not found`` (older make), the compiler driver's ``cc: fatal error:
  cannot execute 'as': execvp: No such file or directory``;
- a program of the build that the dynamic loader cannot start for a missing shared library (``objtool: error
  while loading shared libraries: libelf.so.1: ...``);
- a compiler diagnostic ``FILE:LINE[:COL]: error: ...`` or ``... fatal error: ...`` of gcc or g++ (a missing
  header is ``fatal error: X.h: No such file or directory``; ``#error`` lines are errors too), its file made
  relative to the tree through make's ``Entering directory`` lines;

then, when there is none, the weaker signs: a ``<command-line>`` error, a linker or modpost ``ERROR:``, a line of
the fork's conftest, make's first ``***`` line. The phase is the build phase (:mod:`.progress`) the log was in at
the cause. Pure: text in, a :class:`BuildFailure` out, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.jsonout import OMIT, meta
from fwman.driver.build.progress import Progress
from fwman.driver.build.toolchain import package_of

#: what kind of cause a failure is (``BuildFailure.cause``)
CAUSES = (
    "missing-tool",
    "missing-library",
    "missing-header",
    "compile-error",
    "link-error",
    "conftest",
    "make",
    "patch",
    "unknown",
)


@dataclass
class BuildFailure:
    """Where a build failed, as a person wants to read it.

    Its JSON form (a kernel's ``failure`` in ``fwman.modules-build/2``; :func:`fwman.core.jsonout.fields_of`):
    the message as ``error``, the tool as ``missing_tool``, the library left out.
    """

    file: str | None  # path relative to the source tree, e.g. kernel-open/nvidia/nv-pci.c
    line: int | None
    message: str = field(metadata=meta(key="error"))  # the compiler's first error (or the tool's first complaint)
    excerpt: list[str] = field(default_factory=list)
    #: the build phase make was in at the cause (progress.PHASES), None when none had started
    phase: str | None = None
    #: what kind of cause (:data:`CAUSES`)
    cause: str = "unknown"
    #: the command that was not found (cause ``missing-tool``), else None
    tool: str | None = field(default=None, metadata=meta(key="missing_tool"))
    #: the shared library a program of the build could not load (cause ``missing-library``), else None
    library: str | None = field(default=None, metadata=OMIT)

    @property
    def hint(self) -> str | None:
        """Return what fixes a missing tool (``apt install g++``) or library, None for other causes."""
        if self.library is not None:
            # fwman keeps no table of which package holds which library: apt-file answers it for the host's release
            return f"install the package that provides {self.library} (`apt-file search {self.library}` names it)"
        if self.tool is None:
            return None
        package = package_of(self.tool)
        return f"install it: apt install {package}" if package else f"install {self.tool}"


_GCC_ERROR = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<fatal>fatal )?error: (?P<msg>.+)$"
)
_MISSING_FILE = re.compile(r": No such file or directory\s*$")
#: dash (``/bin/sh: 1: g++: not found``), bash (``bash: line 1: g++: command not found``, ``sh: g++: not found``)
_SHELL_NOT_FOUND = re.compile(
    r"^(?:\S*/)?(?:ba|da)?sh: (?:line )?(?:\d+: )?(?P<tool>[^\s:/]+|/\S+): (?:command )?not found\s*$"
)
#: GNU make running a recipe without a shell: ``make[2]: g++: No such file or directory`` (4.x), ``Command not
#: found`` (3.x)
_MAKE_NOT_FOUND = re.compile(
    r"^make(?:\[\d+\])?: (?P<tool>[^\s:*][^\s:]*): (?:No such file or directory|Command not found)\s*$"
)
#: the compiler driver missing one of its own programs: ``cc: fatal error: cannot execute 'as': execvp: No such
#: file or directory`` (gcc 12 quotes with ‘’ in a UTF-8 locale)
_DRIVER_NOT_FOUND = re.compile(
    r"^\S+: fatal error: cannot execute [‘'`](?P<tool>[^’'`]+)[’'`]: execvp: No such file or directory\s*$"
)
#: the dynamic loader refusing a program of the build (``objtool`` of a kernel's kbuild tools): ``./tools/objtool/
#: objtool: error while loading shared libraries: libelf.so.1: cannot open shared object file: No such file or
#: directory`` (ld.so's message; a trixie root whose headers' tools came without their library, the trixie story)
_NO_LIBRARY = re.compile(
    r"^(?P<program>\S+): error while loading shared libraries: (?P<library>[^\s:]+): cannot open shared object file"
)
_CMDLINE_ERROR = re.compile(r"^<command-line>: (?:fatal )?error: (?P<msg>.+)$")
_LD_ERROR = re.compile(r"^(?:ld|.*/ld|ERROR): (?P<msg>.+)$")
_ENTERING = re.compile(r"^make(?:\[\d+\])?: (Entering|Leaving) directory '([^']+)'")
_MAKE_ERROR = re.compile(r"^make(?:\[\d+\])?: \*\*\* (?P<msg>.+)$")
_CONFTEST_LINE = re.compile(r"^(?P<msg>conftest:.*)$")
#: make's line for the target a missing command failed: ``make[2]: *** [Makefile:219: _out/x/dp_auxretry.o] Error 127``
_MAKE_TARGET = re.compile(r"^make(?:\[\d+\])?: \*\*\* \[(?:[^\]]*?:\d+: )?(?P<target>[^\]]+)\] Error 127")


def _phase_at(lines: list[str], index: int) -> str | None:
    state = Progress("")
    for line in lines[:index]:
        state.feed(line)
    return state.phase


def parse_build_failure(log: str, tree: str | None = None) -> BuildFailure:
    """Return the first cause of a failed build in ``log``: the failing file (relative to ``tree``), line, message,
    the kind of cause, the missing tool, and the build phase at that point. Never raises."""
    lines = log.splitlines()
    prefix = (tree.rstrip("/") + "/") if tree else None

    def rel(path: str, directory: str | None) -> str:
        if not path.startswith("/") and directory:
            path = f"{directory.rstrip('/')}/{path}"  # relative to the sub-make's directory
        if prefix and path.startswith(prefix):
            return path[len(prefix) :]
        return path

    directories: list[str] = []
    for i, line in enumerate(lines):
        entering = _ENTERING.match(line)
        if entering:
            if entering.group(1) == "Entering":
                directories.append(entering.group(2))
            elif directories:
                directories.pop()
            continue
        here = directories[-1] if directories else None
        missing = _SHELL_NOT_FOUND.match(line) or _MAKE_NOT_FOUND.match(line) or _DRIVER_NOT_FOUND.match(line)
        if missing:
            tool = missing.group("tool").rsplit("/", 1)[-1]
            making = ""
            at = next((j for j in range(i + 1, min(len(lines), i + 40)) if _MAKE_TARGET.match(lines[j])), None)
            if at is not None:  # the target make failed for it, in the directory that make leaves next
                target = _MAKE_TARGET.match(lines[at])
                leaving = next((m for ln in lines[at + 1 : at + 4] if (m := _ENTERING.match(ln))), None)
                directory = leaving.group(2) if leaving and leaving.group(1) == "Leaving" else here
                making = f" (making {rel(target.group('target'), directory)})" if target else ""
            excerpt = lines[max(0, i - 2) : i + 4]
            return BuildFailure(
                None, None, f"{tool}: command not found{making}", excerpt, _phase_at(lines, i), "missing-tool", tool
            )
        library = _NO_LIBRARY.match(line)
        if library:
            program, name = library.group("program").rsplit("/", 1)[-1], library.group("library")
            message, excerpt = f"{program} cannot run: {name} is not installed", lines[max(0, i - 2) : i + 3]
            return BuildFailure(None, None, message, excerpt, _phase_at(lines, i), "missing-library", library=name)
        m = _GCC_ERROR.match(line)
        if m:
            message = m.group("msg").strip()
            header = bool(m.group("fatal")) and _MISSING_FILE.search(message) is not None
            cause = "missing-header" if header else "compile-error"
            where = rel(m.group("file"), here)
            return BuildFailure(where, int(m.group("line")), message, lines[i : i + 6], _phase_at(lines, i), cause)
    # each kind in turn over the whole log: (pattern, cause, excerpt lines before and after the cause's line)
    weaker = [(_CMDLINE_ERROR, "compile-error", 0, 4), (_LD_ERROR, "link-error", 0, 4)]
    weaker += [(_CONFTEST_LINE, "conftest", 3, 1), (_MAKE_ERROR, "make", 3, 1)]
    for pattern, cause, before, after in weaker:
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if m:
                message = m.group("msg").strip()
                if cause == "compile-error" and _MISSING_FILE.search(message):
                    cause = "missing-header"
                excerpt = lines[max(0, i - before) : i + after]
                return BuildFailure(None, None, message, excerpt, _phase_at(lines, i), cause)
    tail = [ln for ln in lines if ln.strip()][-1:] or ["the build failed without output"]
    return BuildFailure(None, None, tail[0].strip(), tail, _phase_at(lines, len(lines)))
