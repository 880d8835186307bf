"""Tests share helpers only through ``tests/support``: no test module imports another test module.

A helper defined in one test module and imported by another ties the two together (moving or renaming a test
breaks an unrelated one, and running one module runs the other's import-time code); issue 24 asks for every shared
helper in ``tests/support/``, in a module named for what it provides. Checked with the standard library's ``ast``
over every Python file under ``tests/``: an import of anything in the ``tests`` package other than
``tests.support`` fails, whether absolute, relative, inside a function, or by name through ``importlib``.
conftest.py files hold fixtures, which pytest hands to tests by argument; importing a conftest is an import of a
test module too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: the one part of the ``tests`` package other test files may import
SUPPORT = "tests.support"


def _module_name(path: Path) -> tuple[str, bool]:
    """Return the dotted name of ``path`` (a file under tests/) and whether it is a package's ``__init__``."""
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Return the absolute name ``from <level dots><name>`` means inside ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, name] if name else base)


def _allowed(target: str) -> bool:
    """Return True when importing ``target`` is allowed in a test file (outside ``tests``, or in tests.support)."""
    if target != "tests" and not target.startswith("tests."):
        return True
    return target == SUPPORT or target.startswith(SUPPORT + ".")


def cross_test_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """Return ``"line N: imports NAME"`` for every import of a test module in ``source`` (the file ``module``).

    Raises SyntaxError when ``source`` is not Python.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            # ``from tests import unit`` names a sub-package of tests; below that, the module imported from counts
            targets = [f"{base}.{alias.name}" for alias in node.names] if base == "tests" else [base]
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        found += [f"line {node.lineno}: imports {t}" for t in targets if not _allowed(t)]
    return found


def _test_files() -> Iterator[tuple[str, Path]]:
    for path in sorted(TESTS.rglob("*.py")):
        if "standin_torch" in path.parts:  # a stand-in PyTorch: its own package root (``torch``), not ``tests``
            continue
        yield str(path.relative_to(TESTS.parent)), path


def test_no_test_module_imports_another() -> None:
    violations = []
    for rel, path in _test_files():
        module, is_package = _module_name(path)
        violations += [f"{rel} {v}" for v in cross_test_imports(module, path.read_text(), is_package=is_package)]
    assert violations == [], "move shared helpers into tests/support/:\n" + "\n".join(violations)


def test_the_walk_sees_the_test_modules() -> None:
    # a walk that found nothing would pass the test above whatever the tests import
    files = [rel for rel, _ in _test_files()]
    assert "tests/unit/p2p/test_p2p_record.py" in files and "tests/adversarial/conftest.py" in files
    assert len(files) > 100


#: (file, source, what the checker must report); the first three are the imports this check replaced
PLANTED = [
    ("tests.unit.driver.test_driver_power", "from tests.unit.p2p.test_p2p_record import FP, _record\n",
     "line 1: imports tests.unit.p2p.test_p2p_record"),
    ("tests.unit.p2p.test_p2p_isolated", "from tests.unit.p2p.test_p2p import MemoryGpus\n",
     "line 1: imports tests.unit.p2p.test_p2p"),
    ("tests.adversarial.test_names", "def f():\n    from tests.adversarial.conftest import CountingEnv\n",
     "line 2: imports tests.adversarial.conftest"),
    ("tests.unit.p2p.test_x", "import tests.unit.p2p.test_p2p\n", "line 1: imports tests.unit.p2p.test_p2p"),
    ("tests.unit.p2p.test_x", "from .test_p2p import MemoryGpus\n", "line 1: imports tests.unit.p2p.test_p2p"),
    ("tests.unit.p2p.test_x", "from ..driver import test_driver_power\n",
     "line 1: imports tests.unit.driver"),
    ("tests.unit.p2p.test_x", "from tests.unit.p2p import test_p2p\n", "line 1: imports tests.unit.p2p"),
    ("tests.unit.p2p.test_x", "from tests import unit\n", "line 1: imports tests.unit"),
    ("tests.unit.p2p.test_x", "from tests import conftest\n", "line 1: imports tests.conftest"),
    ("tests.unit.p2p.test_x", "import importlib\nimportlib.import_module('tests.unit.p2p.test_p2p')\n",
     "line 2: imports tests.unit.p2p.test_p2p"),
    ("tests.unit.p2p.test_x", "__import__('tests.story.conftest')\n", "line 1: imports tests.story.conftest"),
    ("tests.support.gpus", "from tests.unit.p2p.test_p2p import ticking\n",
     "line 1: imports tests.unit.p2p.test_p2p"),
]  # fmt: skip


@pytest.mark.parametrize(("module", "source", "what"), PLANTED)
def test_checker_catches_a_planted_cross_test_import(module: str, source: str, what: str) -> None:
    assert what in cross_test_imports(module, source)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("tests.unit.p2p.test_x", "from tests.support.p2p_records import FP, copy_record\n"),
        ("tests.unit.p2p.test_x", "from tests.support import env\nimport tests.support.gpus\n"),
        ("tests.unit.p2p.test_x", "from fixtures.hostgen.materialize import materialize\nimport pytest\n"),
        ("tests.support.counting", "from .env import FwmanEnv\n"),
        ("tests.adversarial.conftest", "from tests.support.counting import CountingEnv\n"),
    ],
)
def test_checker_passes_imports_from_tests_support(module: str, source: str) -> None:
    assert cross_test_imports(module, source) == []
