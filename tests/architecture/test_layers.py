"""The architecture test: fwman's layers and doors, checked on the source with the standard library's ``ast``.

Layers, low to high (a module may import its own package and any lower layer, never a higher one, nor a sibling
of the same rank unless SIBLINGS allows it)::

    core < host < (gpu, platform) < (firmware, driver) < p2p < reports < app < cli

Doors (the only modules that may touch the world; the effect kinds they own):

- ``fwman/host/*``: files, processes (subprocess, pty), the network (requests, in ``host/http.py``)
- ``fwman/core/clock.py``: the clock (``datetime.now``, ``time.time``/``monotonic``/``sleep``...)
- ``fwman/core/resources.py``: fwman's bundled data files
- ``fwman/p2p/cuda.py``: native code (ctypes to libcuda)

Imports inside functions and under ``TYPE_CHECKING`` count like any other: a lazy import is still a dependency.
Anything else that needs an exception goes in ALLOWED with its reason, and ALLOWED is kept short: an entry that
no longer matches anything fails the test too, so it gets deleted.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fwman"

#: rank of each top-level package of fwman (``fwman`` itself: the version string, as low as core); a package or
#: module that is not here fails the test (a new one gets its rank on purpose, never by default)
LAYERS: dict[str, int] = {
    "fwman": 0,
    "core": 0,
    "host": 1,
    "gpu": 2,
    "platform": 2,
    "firmware": 3,
    "driver": 3,
    "p2p": 4,
    "reports": 5,
    "app": 6,
    "cli": 7,
    "__main__": 8,
}
#: ranks inside a subject package, by the same rules (never up; a sibling of the same rank is not imported):
#: ``"package": {"subpackage or module": rank}``; the package's own ``__init__`` is "" (the lowest)
SUBLAYERS: dict[str, dict[str, int]] = {
    "firmware": {
        "": 0,
        "versions": 0,
        "rom": 0,
        "nvflash": 0,
        "catalog": 1,
        "verify": 2,
        "ops": 3,
        "upgrade": 4,
    },
    "driver": {
        "": 0,
        "versions": 0,
        "kernels": 0,
        "localfs": 0,
        "headers": 0,
        "kmod": 0,
        "userspace_hold": 0,
        "prebuilt": 0,
        "kernel_hold": 0,
        "aptsim": 0,
        "git": 0,
        "settings": 0,
        "nova_core": 0,
        "families": 0,
        "power": 0,
        "peering": 1,
        "forks": 1,
        "build": 2,
        "boot": 3,
        "dkms": 3,
        "preflight": 3,
        "move": 3,
        "settings_host": 4,
        "lifecycle": 4,
        "hooks": 5,
        "bundle": 5,
    },
    "reports": {"": 0, "audit": 0, "doctor": 1, "metrics": 2},
}
#: packages that are pure: they never import these (a parser and its model take bytes, never a Host), whatever
#: their rank would allow; ``"importer prefix": {"forbidden prefix", ...}``
PURE: dict[str, set[str]] = {"fwman.firmware.rom": {"fwman.host"}}
#: sibling imports (same rank, different package) that are allowed: (importer, imported); inside a package,
#: ("driver.boot", "driver.dkms")
SIBLINGS: set[tuple[str, str]] = set()

#: which modules own which effect (a module name, or a package prefix ending in ".")
DOORS: dict[str, set[str]] = {
    "fwman.host.": {"files", "processes", "environment"},
    "fwman.host.http": {"network"},
    "fwman.core.clock": {"clock"},
    "fwman.core.resources": {"files"},
    "fwman.p2p.cuda": {"native"},
    # the process's own environment (variables, euid, streams) is read once, into the CLI's Environment, which
    # tests build themselves; everything below gets it from there
    "fwman.cli.context": {"environment"},
}
#: modules that import by name at run time (startup time: the lazy command table); the checker counts
#: every ``fwman.x.y`` (or ``fwman.x.y:attr``) string constant in them as an import, so the layers still hold
LAZY_IMPORTERS: set[str] = {"fwman.cli.app"}

#: what a module of fwman/cli/ may import of fwman (a module, or the package it names and everything inside it):
#: the CLI parses, chooses the Host, calls one use case and renders its result; whatever else lies below app/
#: (firmware/, driver/, reports/, p2p/, platform/, gpu/, the rest of host/ and core/) is reached through a use
#: case. ``"fwman"`` is the package's own __init__ only (the version string), not everything under it.
CLI_MAY_IMPORT: dict[str, str] = {
    "fwman": "the version string, for --version and the man pages",
    "fwman.cli": "its own package",
    "fwman.app": "the use cases, their typed arguments and results (app/text: what a result says)",
    "fwman.core.errors": "the errors a command raises, and cli/app maps to exit codes",
    "fwman.core.names": "option values checked where they are parsed (a kernel release, a bus id)",
    "fwman.core.paths": "host paths named in help texts and option defaults",
    "fwman.core.termtext": "the output door (AppContext.echo) makes control characters from outside visible",
    "fwman.core.clock": "the clock door: cli/app installs the invocation's Environment.clock (tests' FixedClock)",
    "fwman.host.base": "the Host type the CLI hands the use cases",
    "fwman.host.live": "choosing the Host: the live host under --root",
    "fwman.host.snapshot": "choosing the Host: a --snapshot replay",
    "fwman.host.local": "questions about this machine before a Host is picked (is --root a directory, may this "
    "user write there) and the process's own streams (a closed stdout silenced)",
}

#: "<module> <what>" -> why it is allowed; <what> is an effect kind, "imports fwman.<package>" or "below app"
ALLOWED: dict[str, str] = {
    "fwman.host.pty clock": "a pty deadline is real time: a fixed test clock must not stall a running nvflash",
    "fwman.driver.build.lock files": "flock needs a real file descriptor; a Host has no lock primitive",
    "fwman.host.isolate clock": "a hung child's deadline is real time: a fixed test clock must not stall it",
}

# -- what counts as an effect ----------------------------------------------------------------------------------
#: importing one of these modules (or a submodule) is the effect
EFFECT_MODULES: dict[str, str] = {
    "subprocess": "processes",
    "pty": "processes",
    "asyncio": "processes",
    "multiprocessing": "processes",
    "concurrent.futures.process": "processes",
    "requests": "network",
    "urllib.request": "network",
    "urllib3": "network",
    "socket": "network",
    "http.client": "network",
    "http.server": "network",
    "ftplib": "network",
    "ctypes": "native",
    "fcntl": "files",
    "shutil": "files",
    "tempfile": "files",
    "glob": "files",
}
OS_FILE_CALLS = {
    "open", "fdopen", "remove", "unlink", "rename", "replace", "renames", "makedirs", "mkdir", "rmdir",
    "removedirs", "listdir", "scandir", "walk", "stat", "lstat", "chmod", "chown", "lchown", "symlink", "link",
    "readlink", "utime", "truncate", "mkfifo", "access", "fsync", "getcwd", "chdir",
}  # fmt: skip
OS_PATH_FILE_CALLS = {
    "exists", "lexists", "isfile", "isdir", "islink", "ismount", "getsize", "getmtime", "getatime", "getctime",
    "realpath", "abspath", "samefile",
}  # fmt: skip
OS_PROCESS_CALLS = {"system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn", "posix_spawnp"}
OS_PROCESS_PREFIXES = ("exec", "spawn")
#: what the process inherits or the machine is: a Host or the CLI's Environment says it
OS_ENVIRONMENT = {
    "environ", "environb", "getenv", "putenv", "unsetenv", "getuid", "geteuid", "getlogin", "cpu_count",
    "process_cpu_count", "sched_getaffinity", "uname",
}  # fmt: skip
OS_PATH_ENVIRONMENT = {"expanduser", "expandvars"}
#: Path methods with no path argument (a Host's methods of the same name take the path first)
PATH_READS = {"read_text", "read_bytes"}  # called with no positional argument
PATH_WRITES = {"write_text", "write_bytes"}  # called with exactly one positional argument (the data)
#: pathlib's filesystem methods: a Path calls them with no positional argument; a Host's namesakes take the path
PATH_FS_NOARG = {
    "exists", "is_dir", "is_file", "is_symlink", "is_mount", "is_socket", "is_fifo", "is_block_device",
    "is_char_device", "is_junction", "iterdir", "stat", "lstat", "mkdir", "unlink", "rmdir", "touch", "resolve",
    "absolute", "expanduser", "readlink", "cwd", "home", "walk",
}  # fmt: skip
#: ... and these with exactly one (a pattern, a target, a mode); a Host has none of them with one argument
PATH_FS_ONEARG = {"glob", "rglob", "rename", "replace", "symlink_to", "hardlink_to", "samefile", "chmod", "lchmod"}
TIME_CLOCK = {
    "time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "sleep", "localtime",
    "gmtime", "ctime", "asctime", "process_time", "thread_time",
}  # fmt: skip
DATETIME_CLOCK = {"now", "utcnow", "today"}
#: archive and compressed-file constructors: they open the path they are given (a BytesIO or fileobj= is pure)
ARCHIVE_OPENERS = {
    "zipfile.ZipFile", "zipfile.Path", "tarfile.open", "tarfile.TarFile", "gzip.open", "gzip.GzipFile",
    "bz2.open", "bz2.BZ2File", "lzma.open", "lzma.LZMAFile",
}  # fmt: skip
#: importing by a name computed at run time hides a dependency from this test
DYNAMIC_IMPORTS = {"importlib.import_module", "importlib.reload", "importlib.__import__", "builtins.__import__"}
#: Host methods that change the host or run a tool: the CLI only parses and dispatches, so ``fwman.cli`` never
#: calls them itself (a use case in app/, or an action, does)
HOST_CHANGES = {"write_bytes", "mkdir", "rename", "unlink", "symlink", "remove_tree", "run", "run_interactive"}


@dataclass(frozen=True)
class Violation:
    """One place where a module breaks a rule: ``what`` is an effect kind or ``imports fwman.<package>``."""

    module: str
    line: int
    what: str
    detail: str

    @property
    def key(self) -> str:
        """Return the ALLOWED key that would excuse this violation."""
        return f"{self.module} {self.what}"

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.what}: {self.detail}"


def _dotted(node: ast.expr) -> str | None:
    """Return ``a.b.c`` for a Name/Attribute chain, None for anything else (calls, subscripts)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Return the absolute module a relative ``from .x import`` in ``module`` names."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _package(module: str) -> str:
    """Return the layer key of a module name: ``fwman.gpu.smi`` -> ``gpu``; ``fwman`` -> ``fwman``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _subpackage(module: str) -> str:
    """Return the rank key inside a package: ``fwman.driver.build.pipeline`` -> ``build``, ``fwman.driver`` -> ``""``.

    ``fwman.driver.forks`` -> ``forks``: a module directly in the package is ranked like a sub-package.
    """
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


def _under(module: str, prefix: str) -> bool:
    """Return True when ``module`` is ``prefix`` or inside it (``fwman.firmware.rom.parse``: ``fwman.firmware.rom``)."""
    return module == prefix or module.startswith(prefix + ".")


def _private_across(module: str, is_package: bool, base: str, name: str) -> bool:
    """Return True for ``from fwman.x.y import _name`` in a module of another package than ``fwman.x``: a private
    name is its package's own (make it public in a module both may import instead)."""
    if not (base == "fwman" or base.startswith("fwman.")) or not name.startswith("_") or name.startswith("__"):
        return False
    mine = module if is_package else module.rpartition(".")[0]
    return base.rpartition(".")[0] != mine


def _effect_of_import(name: str) -> str | None:
    for mod, kind in EFFECT_MODULES.items():
        if name == mod or name.startswith(mod + "."):
            return kind
    return None


def _effect_of_name(full: str) -> tuple[str, str] | None:
    """Return (effect kind, detail) when naming ``full`` (a canonical dotted name: aliases undone) is an effect."""
    head, _, attr = full.rpartition(".")
    if head == "os":
        if attr in OS_FILE_CALLS:
            return "files", full
        if attr in OS_PROCESS_CALLS or attr.startswith(OS_PROCESS_PREFIXES):
            return "processes", full
        if attr in OS_ENVIRONMENT:
            return "environment", full
    if head == "os.path":
        if attr in OS_PATH_FILE_CALLS:
            return "files", full
        if attr in OS_PATH_ENVIRONMENT:
            return "environment", full
    if full == "concurrent.futures.ProcessPoolExecutor":
        return "processes", full
    if head == "time" and attr in TIME_CLOCK:
        return "clock", full
    if head.split(".")[-1] in ("datetime", "date") and attr in DATETIME_CLOCK:
        return "clock", full
    return None


_FWMAN_NAME = re.compile(r"fwman(\.\w+)+(:\w+)?")


def _cli_may_import(name: str) -> bool:
    """Return True when a module of fwman/cli/ may import ``name`` (CLI_MAY_IMPORT)."""
    return name == "fwman" or any(_under(name, allowed) for allowed in CLI_MAY_IMPORT if allowed != "fwman")


def _cli_imports(module: str, tree: ast.Module, *, is_package: bool, lazy: bool) -> Iterator[tuple[ast.AST, str]]:
    """Yield (node, module name) for each fwman module ``tree`` imports, as precisely as the source says it:
    ``from fwman.core import names`` is ``fwman.core.names``, ``from fwman import gpu`` is ``fwman.gpu``; in a
    lazy importer, a ``fwman.x.y:attr`` string too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module) if node.level else (node.module or "")
            for alias in node.names:
                full = f"{base}.{alias.name}"
                # `from fwman import __version__` takes a name; `from fwman import gpu` a package
                yield node, (base if _cli_may_import(base) and not (base == "fwman" and alias.name[:2] != "__")
                             else full)  # fmt: skip
        elif (
            lazy
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _FWMAN_NAME.fullmatch(node.value)
        ):
            yield node, node.value.split(":")[0]


def check_source(module: str, source: str, *, is_package: bool = False) -> list[Violation]:
    """Return every rule ``source`` (the text of fwman module ``module``) breaks, before doors and ALLOWED."""
    tree = ast.parse(source)
    found: list[Violation] = []
    me = _package(module)
    my_sub = _subpackage(module)

    def add(node: ast.AST, what: str, detail: str) -> None:
        found.append(Violation(module, getattr(node, "lineno", 0), what, detail))

    if me not in LAYERS:
        add(tree, "unranked", f"package fwman.{me} has no rank in LAYERS")
    elif me in SUBLAYERS and my_sub not in SUBLAYERS[me]:
        add(tree, "unranked", f"fwman.{me}.{my_sub} has no rank in SUBLAYERS[{me!r}]")

    def imported(node: ast.AST, name: str) -> None:
        kind = _effect_of_import(name)
        if kind is not None:
            add(node, kind, f"imports {name}")
        if name != "fwman" and not name.startswith("fwman."):
            return
        for pure, forbidden in PURE.items():
            if _under(module, pure) and any(_under(name, f) for f in forbidden):
                add(node, "impure", f"{pure} is pure (bytes in, a model out) and imports {name}: no Host there")
        other = _package(name)
        if other not in LAYERS:
            add(node, "unranked", f"imports {name}, whose package has no rank in LAYERS")
            return
        if me not in LAYERS:
            return
        if other != me:
            if LAYERS[other] > LAYERS[me]:
                add(node, f"imports fwman.{other}", f"{me} (layer {LAYERS[me]}) imports {name} (layer {LAYERS[other]})")
            elif LAYERS[other] == LAYERS[me] and (me, other) not in SIBLINGS:
                add(node, f"imports fwman.{other}", f"{me} imports its sibling {name}")
            return
        ranks = SUBLAYERS.get(me)
        theirs = _subpackage(name)
        if ranks is None or theirs == my_sub or my_sub not in ranks:
            return
        if theirs not in ranks:
            add(node, "unranked", f"imports {name}, which has no rank in SUBLAYERS[{me!r}]")
        elif ranks[theirs] > ranks[my_sub]:
            add(
                node,
                f"imports fwman.{me}.{theirs}",
                f"{me}.{my_sub} (rank {ranks[my_sub]}) imports {name} (rank {ranks[theirs]})",
            )
        elif ranks[theirs] == ranks[my_sub] and theirs and (f"{me}.{my_sub}", f"{me}.{theirs}") not in SIBLINGS:
            add(node, f"imports fwman.{me}.{theirs}", f"{me}.{my_sub} imports its sibling {name}")

    # what each local name stands for: `import os as o` -> o = os; `from datetime import datetime as dt` -> dt =
    # datetime.datetime; so an alias reads like the name it hides
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module) if node.level else (node.module or "")
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}"

    #: local names bound to a module by `import x` (their functions are not pathlib methods: dataclasses.replace)
    module_names = {
        (alias.asname or alias.name.split(".")[0]) for node in ast.walk(tree) if isinstance(node, ast.Import)
        for alias in node.names
    }  # fmt: skip

    def canonical(dotted: str) -> str:
        head, dot, rest = dotted.partition(".")
        return aliases.get(head, head) + dot + rest

    lazy = module in LAZY_IMPORTERS
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module) if node.level else (node.module or "")
            imported(node, base)
            # `from fwman import gpu`, `from fwman.driver import build`, `from time import monotonic`,
            # `from os import remove`, `from os import environ`
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if _private_across(module, is_package, base, alias.name):
                    add(node, "private import", f"from {base} import {alias.name}: a private name of another package")
                # `from fwman import __version__` imports a name, not a module
                as_module = base == "fwman" or (base == f"fwman.{me}" and me in SUBLAYERS)
                if not alias.name.startswith("__") and (
                    as_module or (_effect_of_import(full) and not _effect_of_import(base))
                ):
                    imported(node, full)
                effect = _effect_of_name(full)
                if effect is not None:
                    add(node, effect[0], f"from {base} import {alias.name}")
                if full == "time.strftime":
                    add(node, "clock", "from time import strftime (with no time tuple it reads the clock)")
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is not None:
                effect = _effect_of_name(canonical(dotted))
                if effect is not None:
                    add(node, effect[0], f"{dotted}" + (f" ({effect[1]})" if effect[1] != dotted else ""))
        elif (
            isinstance(node, ast.Constant)
            and lazy
            and isinstance(node.value, str)
            and _FWMAN_NAME.fullmatch(node.value)
        ):
            imported(node, node.value.split(":")[0])
        if isinstance(node, ast.Call):
            effect = _call_effect(node, canonical, module_names)
            if effect is not None:
                add(node, *effect)
            func = _dotted(node.func)
            if func is not None and _canonical_call(func, canonical) in DYNAMIC_IMPORTS:
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    imported(node, first.value)
                elif not lazy:
                    add(node, "dynamic import", f"{func}() of a computed name (this test cannot see what it imports)")
            if _removes_a_tree(node):
                add(node, "rm -rf", "a tree removed by running rm: call host.remove_tree(path) (it refuses /, ...)")
            if me == "cli" and isinstance(node.func, ast.Attribute) and node.func.attr in HOST_CHANGES:
                receiver = _dotted(node.func.value) or ""
                if receiver == "host" or receiver.endswith(".host"):
                    add(node, "host change", f"{receiver}.{node.func.attr}() in the CLI")
    if me == "cli":
        for node, name in _cli_imports(module, tree, is_package=is_package, lazy=lazy):
            if _under(name, "fwman") and not _cli_may_import(name):
                add(node, "below app", f"the CLI imports {name}: reach it through a use case in fwman/app/")
    return found


#: the flags that make ``rm`` remove a tree
RM_RECURSIVE = re.compile(r"-[a-zA-Z]*[rR][a-zA-Z]*|--recursive")


def _removes_a_tree(node: ast.Call) -> bool:
    """Return True for ``x.run(["rm", "-rf", ...])`` (any argv literal starting ``rm`` with a recursive flag)."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr in ("run", "run_interactive") and node.args):
        return False
    argv = node.args[0]
    if not isinstance(argv, (ast.List, ast.Tuple)) or not argv.elts:
        return False
    words = [e.value for e in argv.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    rm = bool(words) and words[0] in ("rm", "/bin/rm", "/usr/bin/rm")
    return rm and any(RM_RECURSIVE.fullmatch(w) for w in words)


def _canonical_call(func: str, canonical: Callable[[str], str]) -> str:
    name = canonical(func)
    return "builtins.__import__" if name == "__import__" else name


def _call_effect(node: ast.Call, canonical: Callable[[str], str], modules: set[str]) -> tuple[str, str] | None:
    """Return (effect kind, what was called) when call ``node`` touches the world, else None.

    Names that are an effect wherever they appear (``os.system``, ``time.time``) are caught as names, not here.
    """
    func = node.func
    if isinstance(func, ast.Name) and canonical(func.id) in ("open", "builtins.open", "io.open"):
        return "files", "open()"
    dotted = _dotted(func)
    full = canonical(dotted) if dotted is not None else None
    positional = len(node.args)
    if full in ARCHIVE_OPENERS:
        first = node.args[0] if node.args else None
        in_memory = isinstance(first, ast.Call) and (_dotted(first.func) or "").endswith("BytesIO")
        if in_memory or (first is None and any(k.arg == "fileobj" for k in node.keywords)):
            return None
        return "files", f"{dotted}() of a path (pass io.BytesIO(data) or fileobj=)"
    if full == "time.strftime" and positional < 2:
        return "clock", f"{dotted}() with no time tuple"
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id in modules:
        return None  # a module's function (`dataclasses.replace(x)`), not a Path method; os.* is caught by name
    attr = func.attr
    if attr in PATH_READS and positional == 0:
        return "files", f".{attr}() (pathlib)"
    if attr in PATH_WRITES and positional == 1:
        return "files", f".{attr}(data) (pathlib)"
    if attr in PATH_FS_NOARG and positional == 0:
        return "files", f".{attr}() (pathlib)"
    if attr in PATH_FS_ONEARG and positional == 1:
        return "files", f".{attr}(...) (pathlib)"
    if attr == "open" and full != "os.open":
        return "files", f"{dotted or '...'}.open()"
    return None


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _is_door(module: str, what: str) -> bool:
    for name, kinds in DOORS.items():
        if (module.startswith(name) if name.endswith(".") else module == name) and what in kinds:
            return True
    return False


def tree_violations() -> list[Violation]:
    """Return every violation in the fwman package that no door owns (ALLOWED not applied)."""
    found: list[Violation] = []
    for module, path in _modules():
        for v in check_source(module, path.read_text(), is_package=path.name == "__init__.py"):
            if not _is_door(v.module, v.what):
                found.append(v)
    return found


def test_layers_and_doors_hold() -> None:
    found = tree_violations()
    unexcused = [v for v in found if v.key not in ALLOWED]
    assert not unexcused, "code outside the doors, or a lower layer importing a higher one:\n" + "\n".join(
        map(str, unexcused)
    )
    stale = sorted(set(ALLOWED) - {v.key for v in found})
    assert not stale, f"ALLOWED entries that no longer match anything (delete them): {stale}"


# -- the checker can fail ------------------------------------------------------------------------------------
PLANTED = [
    ("fwman.gpu.smi", "from fwman.cli.context import AppContext\n", "imports fwman.cli"),
    ("fwman.host.live", "def f():\n    from fwman.gpu import inventory\n", "imports fwman.gpu"),  # lazy import
    (
        "fwman.host.base",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fwman.cli.app\n",
        "imports fwman.cli",
    ),
    ("fwman.firmware.rom.parse", "from fwman.driver import forks\n", "imports fwman.driver"),  # sibling
    ("fwman.core.units", "from . import errors\nfrom ..gpu import smi\n", "imports fwman.gpu"),  # relative
    ("fwman.core.findings", "from fwman.host.base import Host\n", "imports fwman.host"),  # core is the ground
    ("fwman.reports.audit.report", "from fwman import cli\n", "imports fwman.cli"),
    # the P2P concept sits below the reports that judge it, and above the readers it uses
    ("fwman.p2p.history", "from fwman.reports.doctor.checks import verification\n", "imports fwman.reports"),
    ("fwman.platform.containers", "from fwman.driver.build import lockstep\n", "imports fwman.driver"),
    ("fwman.gpu.smi", "def f(p):\n    return open(p).read()\n", "files"),
    ("fwman.gpu.smi", "from pathlib import Path\nPath('/x').read_text()\n", "files"),
    ("fwman.gpu.smi", "def f(p, d):\n    p.write_bytes(d)\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    with p.open('rb') as f:\n        pass\n", "files"),
    ("fwman.gpu.smi", "import os\nos.makedirs('/var/lib/fwman')\n", "files"),
    ("fwman.gpu.smi", "import os\nos.path.exists('/dev/nvidia0')\n", "files"),
    ("fwman.gpu.smi", "import shutil\n", "files"),
    ("fwman.gpu.smi", "def f():\n    import subprocess\n", "processes"),
    ("fwman.gpu.smi", "import os\nos.system('nvidia-smi')\n", "processes"),
    ("fwman.gpu.smi", "from os import execvp\n", "processes"),
    ("fwman.gpu.smi", "import pty\n", "processes"),
    ("fwman.gpu.smi", "from datetime import datetime\ndatetime.now()\n", "clock"),
    ("fwman.gpu.smi", "import datetime\ndatetime.datetime.utcnow()\n", "clock"),
    ("fwman.gpu.smi", "from datetime import date\ndate.today()\n", "clock"),
    ("fwman.gpu.smi", "import time\ntime.time()\n", "clock"),
    ("fwman.gpu.smi", "from time import monotonic\n", "clock"),
    ("fwman.gpu.smi", "def f():\n    import requests\n", "network"),
    ("fwman.gpu.smi", "from urllib.request import urlopen\n", "network"),
    ("fwman.gpu.smi", "import socket\n", "network"),
    ("fwman.gpu.smi", "import http.client\n", "network"),
    ("fwman.gpu.smi", "import ctypes\n", "native"),
    ("fwman.cli.metrics", "def f(app, p, d):\n    app.host.write_bytes(p, d)\n", "host change"),
    ("fwman.cli.hooks", "def f(host):\n    host.run(['systemctl', 'daemon-reload'])\n", "host change"),
    # the holes of round two (issue 24): one planted string each
    ("fwman.gpu.smi", "def f(p):\n    return p.exists()\n", "files"),  # pathlib's filesystem methods
    ("fwman.gpu.smi", "def f(p):\n    p.mkdir(parents=True, exist_ok=True)\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    p.unlink(missing_ok=True)\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    return list(p.iterdir())\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    return sorted(p.glob('*.toml'))\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    return p.stat().st_size\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    return p.is_file()\n", "files"),
    ("fwman.gpu.smi", "def f(p):\n    return p.resolve()\n", "files"),
    ("fwman.gpu.smi", "from os import remove\n", "files"),
    ("fwman.gpu.smi", "from os.path import isfile\n", "files"),
    ("fwman.gpu.smi", "import os as o\no.system('nvidia-smi')\n", "processes"),
    ("fwman.gpu.smi", "from os import path as p\np.exists('/dev/nvidia0')\n", "files"),
    ("fwman.gpu.smi", "import os\nos.path.abspath('rom.bin')\n", "files"),  # reads the working directory
    ("fwman.gpu.smi", "import glob\n", "files"),
    ("fwman.gpu.smi", "import zipfile\nzipfile.ZipFile('/tmp/x.zip')\n", "files"),
    ("fwman.gpu.smi", "import tarfile\ntarfile.open('/tmp/x.tar')\n", "files"),
    ("fwman.gpu.smi", "import importlib\nimportlib.import_module(name)\n", "dynamic import"),
    ("fwman.gpu.smi", "__import__(name)\n", "dynamic import"),
    ("fwman.gpu.smi", "import importlib\nimportlib.import_module('fwman.cli.app')\n", "imports fwman.cli"),
    ("fwman.gpu.smi", "import asyncio\n", "processes"),
    ("fwman.gpu.smi", "import multiprocessing\n", "processes"),
    ("fwman.gpu.smi", "from concurrent.futures import ProcessPoolExecutor\n", "processes"),
    ("fwman.gpu.smi", "from datetime import datetime as dt\ndt.now()\n", "clock"),
    ("fwman.gpu.smi", "import time\ntime.strftime('%Y')\n", "clock"),
    ("fwman.gpu.smi", "import os\nos.environ.get('HOME')\n", "environment"),
    ("fwman.gpu.smi", "import os\nos.getenv('HOME')\n", "environment"),
    ("fwman.gpu.smi", "from os import environ\n", "environment"),
    ("fwman.driver.build.pipeline", "import os\nos.cpu_count()\n", "environment"),
    ("fwman.newthing.x", "X = 1\n", "unranked"),  # a package missing from LAYERS
    ("fwman.gpu.smi", "import fwman.newthing\n", "unranked"),
    ("fwman.driver.newsub.x", "X = 1\n", "unranked"),  # a sub-package missing from SUBLAYERS
    ("fwman.firmware.rom.parse", "from fwman.firmware.catalog import schema\n", "imports fwman.firmware.catalog"),
    ("fwman.driver.kmod.modinfo", "from fwman.driver import build\n", "imports fwman.driver.build"),
    ("fwman.driver.boot.pin", "from ..dkms import status\n", "imports fwman.driver.dkms"),  # sub-sibling
    ("fwman.reports.audit.read", "from fwman.reports.doctor.facts import Facts\n", "imports fwman.reports.doctor"),
    ("fwman.host.live", "import requests\n", "network"),  # requests only in host/http.py
    ("fwman.firmware.rom.package", "from fwman.host.base import Host\n", "impure"),  # rom/ stays pure
    ("fwman.firmware.rom.parse", "def f():\n    from fwman.host import live\n", "impure"),
    ("fwman.app.modules.bundle", "from fwman.firmware.catalog.signing import _parse_sig\n", "private import"),
    ("fwman.driver.bundle.trust", "from fwman.core.signing import _x\n", "private import"),
    ("fwman.driver.hooks.removal", "def f(host, p):\n    host.run(['rm', '-rf', '--', p])\n", "rm -rf"),
    ("fwman.host.live", "def f(self, p):\n    self.run(['rm', '-r', p], timeout=9)\n", "rm -rf"),  # doors too
    # the CLI parses, calls one use case, renders: nothing below app/ but core's vocabulary and the Host's choice
    ("fwman.cli.scan", "from fwman.gpu.inventory import scan_cards\n", "below app"),
    ("fwman.cli.catalog", "def f():\n    from fwman.firmware.catalog.load import load_catalog\n", "below app"),
    ("fwman.cli.fetch", "from fwman.host.http import HttpOptions\n", "below app"),  # host/ beyond the choice
    ("fwman.cli.modules", "from fwman import driver\n", "below app"),
    ("fwman.cli.render", "from fwman.core import findings\n", "below app"),
]


@pytest.mark.parametrize(("module", "source", "what"), PLANTED)
def test_checker_catches_a_planted_violation(module: str, source: str, what: str) -> None:
    found = [v for v in check_source(module, source) if not _is_door(v.module, v.what)]
    print("\n".join(map(str, found)))  # `pytest -s` shows each failure line the checker gives (for the notes)
    assert [v.what for v in found] == [what], found


CLEAN = [
    ("fwman.cli.scan", "from fwman.app.scan import scan\nfrom fwman.core.errors import UsageError\n"),
    ("fwman.cli.metrics", "from fwman.core import names, paths\nfrom fwman import __version__\n"),
    ("fwman.cli.context", "def f(root):\n    from fwman.host.live import LiveHost\n    return LiveHost(root)\n"),
    ("fwman.core.config", "from fwman.core import paths\nfrom .errors import UsageError\n"),
    ("fwman.gpu.smi", "def f(host, p):\n    return host.read_text(p) + host.read_bytes(p, limit=4).decode()\n"),
    ("fwman.gpu.smi", "def f(host, p, d):\n    host.write_bytes(p, d)\n"),  # the Host's method: path first
    ("fwman.gpu.smi", "from urllib.parse import urlsplit\nimport os.path\nos.path.join('a', 'b')\n"),
    ("fwman.gpu.smi", "from fwman.core import clock\nclock.now_utc()\n"),
    ("fwman.firmware.ops.fetch", "from fwman.gpu.card import Card\nfrom fwman.host.http import http_get\n"),
    ("fwman.host.http", "import requests\n"),  # the door itself
    ("fwman.host.live", "import os\nos.makedirs('/x')\nopen('/x/y', 'wb')\nimport subprocess\n"),
    ("fwman.core.clock", "import time\nfrom datetime import datetime\ndatetime.now()\ntime.monotonic()\n"),
    ("fwman.p2p.cuda", "import ctypes\n"),
    ("fwman.cli.scan", "def f(app, p):\n    return app.host.read_text(p)\n"),  # the CLI may read
    ("fwman.app.metrics", "def f(host, p, d):\n    host.write_bytes(p, d)\n"),  # a use case may change
    ("fwman.gpu.smi", "def f(host, p):\n    return host.exists(p) and host.is_dir(p) and host.listdir(p)\n"),
    ("fwman.gpu.smi", "def f(host, a, b):\n    host.mkdir(a)\n    host.rename(a, b)\n    host.unlink(b)\n"),
    ("fwman.gpu.smi", "import dataclasses\ndef f(c):\n    return dataclasses.replace(c)\n"),  # not pathlib
    ("fwman.gpu.smi", "import io, zipfile\ndef f(d):\n    return zipfile.ZipFile(io.BytesIO(d))\n"),  # in memory
    ("fwman.gpu.smi", "import tarfile\ndef f(b):\n    return tarfile.TarFile(fileobj=b)\n"),
    ("fwman.gpu.smi", "import time\ndef f(t):\n    return time.strftime('%Y', t)\n"),  # a given time: pure
    ("fwman.gpu.smi", "from datetime import datetime as dt\ndt.fromisoformat('2026-01-01')\n"),
    ("fwman.cli.app", "import importlib\nT = {'scan': 'fwman.cli.scan:scan'}\nimportlib.import_module(T[n])\n"),
    ("fwman.driver.hooks.catchup", "from fwman.driver.build import pipeline\nfrom ..boot import pin\n"),  # down
    ("fwman.host.http", "import requests\nimport os\nos.environ.get('NO_PROXY')\n"),
    ("fwman.cli.context", "import os\nV = dict(os.environ)\n"),  # the CLI's Environment reads it once
    ("fwman.driver.hooks.removal", "def f(host, p):\n    host.run(['rm', '-f', '--', p])\n"),  # one file
    ("fwman.cli.manpage", "from fwman.cli.docgen import _walk\n"),  # a private name inside its own package
    ("fwman.driver.bundle.install", "from .format import _headers\n"),
]


@pytest.mark.parametrize(("module", "source"), CLEAN)
def test_checker_passes_what_the_rules_allow(module: str, source: str) -> None:
    assert [v for v in check_source(module, source) if not _is_door(v.module, v.what)] == []


def test_a_door_is_a_door_only_for_its_own_effects() -> None:
    # the clock door may not open files; the host may not read the clock
    assert [v.what for v in check_source("fwman.core.clock", "open('/etc/x')\n") if not _is_door(v.module, v.what)] == [
        "files"
    ]
    found = check_source("fwman.host.live", "import time\ntime.time()\n")
    assert [v.what for v in found if not _is_door(v.module, v.what)] == ["clock"]


def test_every_rank_names_a_package_that_exists() -> None:
    # a rank left behind by a move would let a new package of that name in unnoticed
    def exists(*parts: str) -> bool:
        return PACKAGE.joinpath(*parts).is_dir() or PACKAGE.joinpath(*parts[:-1], parts[-1] + ".py").is_file()

    stale = [p for p in LAYERS if p != "fwman" and not exists(p)]
    stale += [f"{p}.{s}" for p, ranks in SUBLAYERS.items() for s in ranks if s and not exists(p, s)]
    assert not stale, f"ranks for packages that do not exist (delete them): {stale}"


# -- host paths: one owner each (fwman/core/paths.py) --------------------------------------------------------
#: a host path spelled out with a variable part, where core/paths.py (or its owner) has the function
PATH_BUILDERS: dict[str, str] = {
    "/lib/modules/": "paths.modules_dir(kver)",
    "/etc/pve/lxc/": "platform.proxmox.lxc_config_path(ctid)",
}
#: names only core/paths.py spells out
PATH_NAMES: dict[str, str] = {"8be4df61-93ca-11d2-aa0d-00e098032b8c": "paths.SECUREBOOT_VAR / EFI_GLOBAL_GUID"}
PATH_OWNERS = {"fwman.core.paths"}


def check_paths(module: str, source: str) -> list[Violation]:
    """Return every host path ``source`` builds by hand that has an owner (docstrings do not count)."""
    if module in PATH_OWNERS:
        return []
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part, after in zip(node.values, node.values[1:], strict=False):
                if not (isinstance(part, ast.Constant) and isinstance(after, ast.FormattedValue)):
                    continue
                for prefix, owner in PATH_BUILDERS.items():
                    if str(part.value).endswith(prefix):
                        found.append(Violation(module, node.lineno, "host path", f"{prefix}{{...}} by hand: {owner}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for name, owner in PATH_NAMES.items():
                if name in node.value:
                    found.append(Violation(module, node.lineno, "host path", f"{name} spelled out: {owner}"))
    return found


def test_host_paths_have_one_owner() -> None:
    found = [v for module, path in _modules() for v in check_paths(module, path.read_text())]
    assert not found, "host paths built outside their owner:\n" + "\n".join(map(str, found))


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("fwman.driver.build.install", "def f(kver):\n    return f'/lib/modules/{kver}/modules.dep'\n"),
        ("fwman.app.p2p", "def f(ctid):\n    return f'/etc/pve/lxc/{ctid}.conf'\n"),
        ("fwman.driver.bundle", "VAR = '/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'\n"),
    ],
)
def test_path_checker_catches_a_path_built_by_hand(module: str, source: str) -> None:
    found = check_paths(module, source)
    print("\n".join(map(str, found)))
    assert [v.what for v in found] == ["host path"]


def test_path_checker_passes_the_owner_and_docstrings() -> None:
    assert check_paths("fwman.core.paths", "def modules_dir(kver):\n    return f'/lib/modules/{kver}'\n") == []
    assert check_paths("fwman.driver.kmod.secureboot", '"""SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"""\n') == []
    assert check_paths("fwman.app.x", "def f(kver):\n    return paths.modules_dir(kver) + '/build'\n") == []
