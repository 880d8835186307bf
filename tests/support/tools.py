"""Tests whose real tools or Debian packages are missing: skipped on a workstation, failed under CI.

`make test` as root installs every package the tests need (the Makefile's ``system-deps``). Under CI
(``CI=true``, as CI services set it) a missing tool therefore means the install step failed, and a skip would hide
that: :func:`missing` fails the test instead. Outside CI it skips, saying what to install.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])

#: tools the Makefile unpacks without installing their package (promtool without the Prometheus server)
TOOLS_CACHE = Path(__file__).resolve().parents[2] / ".cache/system-deps/bin"


def is_root() -> bool:
    """Return True when the tests run as root."""
    return os.geteuid() == 0


def in_ci() -> bool:
    """Return True when the tests run under CI (``CI`` set to true, 1 or yes, any case)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(reason: str) -> NoReturn:
    """Skip the calling test for ``reason`` (a tool or package that is not installed); under CI, fail it.

    Raises pytest's Skipped, or Failed under CI (the install step should have provided it).
    """
    if in_ci():
        pytest.fail(f"{reason}; under CI this is a failure of the install step (`make system-deps` as root)")
    pytest.skip(f"{reason} (installed by `make test` when run as root)")


def tool_path(tool: str) -> str | None:
    """Return where ``tool`` is: on PATH, in /usr/sbin (root's tools), or in :data:`TOOLS_CACHE`; None if nowhere."""
    for found in (shutil.which(tool), f"/usr/sbin/{tool}", str(TOOLS_CACHE / tool)):
        if found and os.access(found, os.X_OK):
            return found
    return None


def have_tool(tool: str) -> bool:
    """Return True when :func:`tool_path` finds ``tool``."""
    return tool_path(tool) is not None


def require_tools(*tools: str, package: str | None = None) -> None:
    """Skip (under CI: fail) the calling test unless every tool is installed; ``package`` names the Debian one."""
    absent = [t for t in tools if not have_tool(t)]
    if absent:
        source = f" (Debian package {package})" if package else ""
        missing(f"needs {', '.join(absent)}{source}")


def needs_tool(tool: str, package: str) -> Callable[[F], F]:
    """Return a decorator that runs :func:`require_tools` for ``tool`` before the test (keeps its fixtures)."""

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            require_tools(tool, package=package)
            return test(*args, **kwargs)

        return run  # type: ignore[return-value]

    return decorate


def tools_path(directory: Path, commands: tuple[str, ...], without: tuple[str, ...] = ()) -> str:
    """Return a PATH of one directory holding links to this machine's ``commands`` less ``without``: a host whose
    toolchain lacks exactly those (``tools_path(d, BUILD, without=("g++",))``). Skips (under CI fails) the test
    when one of the commands is not installed here."""
    directory.mkdir(parents=True, exist_ok=True)
    for command in commands:
        if command in without:
            continue
        found = shutil.which(command)
        if found is None:
            missing(f"needs {command}")
        link = directory / command
        if not link.is_symlink():
            link.symlink_to(found)
    return str(directory)
