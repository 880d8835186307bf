"""The CLI's environment and per-invocation context.

:class:`Environment` is what the process sees from outside (streams, terminal, variables, the Host factory);
tests build one instead of monkeypatching. :class:`AppContext` is what one invocation chose (root, snapshot,
verbosity) and hands the Host to commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from fwman.core.errors import BlockedError, UsageError
from fwman.core.termtext import visible

if TYPE_CHECKING:
    from fwman.app.p2p import DeviceLayer
    from fwman.core.clock import Clock
    from fwman.host.base import Host

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Environment:
    """The outside world of one fwman process."""

    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    stdout_isatty: bool = False
    stderr_isatty: bool = False
    #: standard input: read only for a question asked on a terminal (``upgrade --apply``'s confirmation)
    stdin: IO[str] | None = None
    stdin_isatty: bool = False
    variables: Mapping[str, str] = field(default_factory=dict)
    #: builds the live host; tests pass one that adds fixture tools to PATH
    live_host_factory: Callable[[str], Host] | None = None
    #: effective user id (flash and module installs need root)
    euid: int = 0
    #: the clock this invocation reads (None: the machine's); tests pass a FixedClock
    clock: Clock | None = None
    #: opens the GPUs for `p2p` from a libcuda path (None: the default library); None: the real CUDA driver
    #: (fwman.p2p.cuda.open_driver); tests pass an in-memory device layer
    cuda_driver: Callable[[str | None], DeviceLayer] | None = None

    @classmethod
    def from_os(cls) -> Environment:
        """Return the Environment of the running process."""
        # started with a descriptor closed (`fwman scan >&-`), Python gives None: write to nowhere, keep the code
        from fwman.host.local import devnull_text

        stdout = sys.stdout if sys.stdout is not None else devnull_text()
        stderr = sys.stderr if sys.stderr is not None else devnull_text()
        return cls(
            stdout=stdout,
            stderr=stderr,
            stdout_isatty=stdout.isatty(),
            stderr_isatty=stderr.isatty(),
            stdin=sys.stdin,
            stdin_isatty=sys.stdin is not None and sys.stdin.isatty(),
            variables=dict(os.environ),
            euid=os.geteuid(),
        )

    @property
    def color(self) -> bool:
        """Return True when colour may be used on stdout (a terminal, and NO_COLOR unset)."""
        return self.stdout_isatty and "NO_COLOR" not in self.variables

    @property
    def width(self) -> int | None:
        """Return the width text is fitted to: ``COLUMNS`` when set (40 at least), else the terminal's when
        stdout is one, else None (a pipe or file: no wrapping, one line per row for grep and scripts)."""
        value = self.variables.get("COLUMNS", "")
        if value.isdigit():
            return max(int(value), 40)
        if self.stdout_isatty:
            try:
                return max(os.get_terminal_size(self.stdout.fileno()).columns, 40)
            except (OSError, ValueError, AttributeError):  # not a real descriptor (a test's stream): no limit
                return None
        return None


@dataclass
class AppContext:
    """Choices of one invocation, stored as click's ``ctx.obj``."""

    env: Environment
    root: str | None = None
    snapshot: str | None = None
    verbose: int = 0
    #: --json given to a group before its subcommand (``fwman backup --json list``): the subcommand's --json
    json_from_group: bool = False
    #: the arguments fwman was run with (recorded in the flash lock: who holds it)
    argv: tuple[str, ...] = ()
    _host: Host | None = None
    #: ids of the streams found closed or broken (written to no more)
    _closed: set[int] = field(default_factory=set)
    # os.urandom is what secrets.token_hex reads; the secrets module (hmac, hashlib, random) costs every command's
    # start more than it is worth here
    _style_escape: str = field(default_factory=lambda: "\ue000" + os.urandom(8).hex() + "\ue001")

    @property
    def host(self) -> Host:
        """Return the Host this invocation works on (created on first use).

        Raises UsageError when both ``--root`` and ``--snapshot`` are given, or the root is not a directory.
        """
        if self._host is None:
            if self.root and self.snapshot:
                raise UsageError("--root and --snapshot cannot be combined")
            if self.snapshot:
                from fwman.host.snapshot import SnapshotHost

                self._host = SnapshotHost(self.snapshot)
            else:
                from fwman.host.local import existing_root

                given = self.root or self.env.variables.get("FWMAN_ROOT")
                # a typo must fail here, before any command makes a fresh etc/ and usr/ tree under it
                root = existing_root(given, "--root" if self.root else "FWMAN_ROOT") if given else "/"
                if self.env.live_host_factory is not None:
                    self._host = self.env.live_host_factory(root)
                else:
                    from fwman.host.live import LiveHost

                    # FWMAN_MACHINE_TOOLS: directories whose tools stand for the root's own machine (the stand-in
                    # nvflash rig: `python -m fixtures.nvflash.rig DIR`); under a root, nothing else that acts on
                    # a machine runs (fwman.host.machine)
                    tools = [d for d in self.env.variables.get("FWMAN_MACHINE_TOOLS", "").split(":") if d]
                    self._host = LiveHost(root, machine_tools=tools)
        return self._host

    @property
    def command_line(self) -> str:
        """Return this invocation as one line, ``fwman flash --card 41:00.0 ...`` (quoted where needed)."""
        import shlex

        return shlex.join(["fwman", *self.argv])

    @property
    def is_replay(self) -> bool:
        """Return True when working on a recorded snapshot."""
        return bool(self.snapshot)

    def require_change(self, what: str, *, needs_root: bool = True) -> None:
        """The one place that decides whether a command that changes a machine may run here.

        Call before anything is written. Raises UsageError (exit 2) on a ``--snapshot`` replay (a snapshot is a
        record of another machine, never changed), and with ``needs_root`` BlockedError (exit 3) when not root,
        unless ``--root`` names a directory this user can write (a test tree).
        """
        if self.is_replay:
            raise UsageError(
                f"{what} changes a machine: it cannot run on a --snapshot replay",
                hint="run it on the live host (or under --root DIR on a copy of a host tree)",
            )
        if not needs_root or self.env.euid == 0:
            return
        from fwman.host.local import writable_by

        root = self.root or self.env.variables.get("FWMAN_ROOT")
        if root and writable_by(root, self.env.euid):
            return
        where = f"under --root {root}" if root else "to /etc, /lib/modules and /var/lib/fwman"
        raise BlockedError(f"{what} needs root: it writes {where}", hint="run it with sudo")

    # -- output ------------------------------------------------------------------------------------------
    def echo(self, text: str = "", *, err: bool = False, nl: bool = True) -> None:
        """Print a line for people (stdout, or stderr with ``err``): the one output door.

        Control characters in ``text`` are made visible (fwman.core.termtext): much of what fwman prints came
        from outside. Only the styles :meth:`style` made in this invocation reach the terminal as escapes.
        """
        stream = self.env.stderr if err else self.env.stdout
        shown = visible(text)
        if self._style_escape in shown:
            shown = shown.replace(self._style_escape, "\x1b")
        self._write(stream, shown + ("\n" if nl else ""))

    def _write(self, stream: IO[str], text: str) -> None:
        """Write ``text`` to ``stream``. A closed or broken stream (``| head -1``, ``>&-``) is silenced and
        the command goes on: it ends with its own exit code, and a flash or build is never cut by a reader
        going away."""
        if id(stream) in self._closed:
            return
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # EPIPE, EBADF; ValueError: I/O on a closed file object
            self._closed.add(id(stream))
            from fwman.host.local import silence

            silence(stream)

    def style(self, text: str, **styles: Any) -> str:
        """Return ``text`` styled when colour is allowed, plain otherwise.

        The escape character of fwman's own styles is a token unique to this invocation until :meth:`echo`
        writes it: text from outside cannot forge it, so its escapes are shown, never obeyed.
        """
        if not self.env.color:
            return text
        return click.style(text, **styles).replace("\x1b", self._style_escape)

    def emit_json(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Print a versioned JSON document: ``{"schema": "fwman.<kind>/<version>", ...payload}``, the version
        that of ``fwman.cli.schemas.SCHEMAS`` (docs/json.md). Raises KeyError for a kind not listed there."""
        import json

        from fwman.cli.schemas import schema_name

        doc = {"schema": schema_name(kind), **payload}
        self._write(self.env.stdout, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Print an aligned text table."""
        import re

        own_style = re.compile(re.escape(self._style_escape) + r"\[[0-9;]*m")

        # widths as shown: control characters written out, fwman's own styles taking no room
        def width(cell: str) -> int:
            return len(visible(own_style.sub("", cell)))

        from fwman.cli.layout import fit_table

        fitted = fit_table(headers, rows, self.env.width, width)
        if fitted.records:  # one cell a line: a row's first cell (bold), then its "  HEADER: value" lines
            for (cell,) in fitted.lines:
                self.echo(cell if cell.startswith(" ") else self.style(cell, bold=True))
            return
        widths = [max(width(cells[i]) for cells in fitted.lines) for i in range(len(headers))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c + " " * (widths[i] - width(c)) for i, c in enumerate(cells)).rstrip()

        for k, cells in enumerate(fitted.lines):
            self.echo(self.style(line(cells), bold=True) if k < fitted.header else line(cells))


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        app = ctx.find_object(AppContext)
        if app is not None and value not in (None, 0, False):
            if name == "verbose":
                app.verbose += int(value)
            else:
                setattr(app, name, value)
        return value

    return callback


#: the options every command takes, before its name (on the group) or after it (on each leaf): declared once,
#: here, so the help is the same wherever `--help` shows them
GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--root",), {"type": click.Path(file_okay=False), "help": "Treat DIR as / (every host path is read and "
                   "written under it; a command that would act on this machine itself, its GPUs, kernel, services "
                   "or boot, is refused: exit 3)."}),
    (("--snapshot",), {"type": click.Path(file_okay=False, exists=True), "help": "Replay a host recorded by "
                       "`fwman capture`; nothing is read from or written to this machine."}),
    (("-v", "--verbose"), {"count": True, "help": "More detail; traceback of an unexpected error (-v), of any "
                           "error (-vv)."}),
)  # fmt: skip


def group_options(f: F) -> F:
    """Add the global options to the ``fwman`` group itself (their values go to its callback)."""
    for decls, kwargs in reversed(GLOBAL_OPTIONS):  # click lists them in the order written
        f = click.option(*decls, **kwargs)(f)
    return f


def common_options(f: F) -> F:
    """Add ``--root``, ``--snapshot`` and ``-v`` to a leaf command, so they work after the command name too."""
    for decls, kwargs in GLOBAL_OPTIONS:
        name = decls[-1].lstrip("-")
        f = click.option(*decls, expose_value=False, callback=_store(name), **kwargs)(f)
    return f


class Seconds(click.ParamType[float, Any]):
    """A duration in seconds for ``--timeout``: a finite number from ``MIN`` to ``MAX``, else a usage error.

    click's float (and ``FloatRange``) let ``nan``, ``inf`` and ``1e400`` through, which later broke deep in a
    run (an unexpected ValueError, a flash journal left "killed"); zero or a negative timed out at once.
    """

    name = "seconds"
    MIN = 0.1
    MAX = 86400.0  # a day: longer than any nvflash run or download attempt; a bound keeps the deadline an int

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """Return ``value`` as seconds. Fails (exit 2, naming the option) when it is not in range."""
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not self.MIN <= seconds <= self.MAX:
            self.fail(f"{value!r}: give seconds from {self.MIN:g} to {self.MAX:g}", param, ctx)
        return seconds


def timeout_option(default: float, help: str) -> Callable[[F], F]:
    """Return the decorator adding ``--timeout SECONDS`` (the one type every command's timeout uses).

    ``help`` is one sentence; the accepted range is added to it.
    """
    shown = f"{help.rstrip('.')} ({Seconds.MIN:g} to {Seconds.MAX:g})."
    return click.option("--timeout", type=Seconds(), default=default, show_default=True, help=shown)


def _json_value(ctx: click.Context, param: click.Parameter, value: Any) -> bool:
    """Return ``--json`` of this command, on when the group before it was given ``--json``."""
    app = ctx.find_object(AppContext)
    return bool(value) or (app is not None and app.json_from_group)


def json_option(f: F) -> F:
    """Add ``--json`` (stable, versioned machine output)."""
    return click.option(
        "--json", "as_json", is_flag=True, callback=_json_value, help="Print machine-readable JSON (versioned keys)."
    )(f)


def _takes_json(ctx: click.Context, name: str) -> bool:
    """Return True when subcommand ``name`` of the group being parsed has a ``--json`` of its own."""
    assert isinstance(ctx.command, click.Group)
    sub = ctx.command.get_command(ctx, name)
    return sub is not None and any(p.name == "as_json" for p in sub.params)


def runs_subcommand(ctx: click.Context, app: AppContext) -> bool:
    """For a group that is also a command (``fwman backup``): return True when a subcommand runs instead.

    Then ``--json`` given to the group is handed to the subcommand, and any other option of the group given on
    the command line raises UsageError (exit 2): ``fwman backup --card 41:00.0 list`` would otherwise list
    every card, the option silently dropped.
    """
    if ctx.invoked_subcommand is None:
        return False
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or not param.expose_value or param.name is None:
            continue  # --root, --snapshot, -v: stored for every command wherever they stand
        source = ctx.get_parameter_source(param.name)
        if source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            continue
        if param.name == "as_json" and _takes_json(ctx, ctx.invoked_subcommand):
            app.json_from_group = True
            continue
        name = max(param.opts, key=len)
        raise UsageError(
            f"{name} is an option of `{ctx.command_path}` itself: it does nothing before `{ctx.invoked_subcommand}`",
            hint=f"put the subcommand's own options after it (`{ctx.command_path} {ctx.invoked_subcommand} --help`)",
        )
    return True


#: what ``--fork`` takes, the same in every command that has it (``modules build``, ``driver branches``, ``audit``):
#: all of them read it with the one resolver, ``fwman.driver.forks.config.resolve_fork``
FORK_FORMS = "a known name (aikitoria, a [forks] name), NAME=URL, owner/name on GitHub, or a git URL or path"

pass_app = click.make_pass_decorator(AppContext)


def leaf_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add what every leaf command takes: ``--json``, the global options after its name, and the AppContext."""
    return json_option(common_options(pass_app(f)))
