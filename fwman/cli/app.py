"""The ``fwman`` entry point: the lazy command group and the one place that maps exceptions to exit codes."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from fwman import __version__
from fwman.cli.context import AppContext, Environment, group_options
from fwman.core.errors import ExitCode, FwmanError
from fwman.core.termtext import one_line

#: name -> (module:attribute, one-line help). Modules are imported only when their command runs, so
#: `fwman --version` and `fwman --help` stay fast (no pydantic, requests, cryptography, pyelftools).
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("fwman.cli.plan:plan", "The whole way to peer-to-peer here: what `apply` does, then what you do."),
    "apply": ("fwman.cli.plan:apply", "Bring the box to its P2P target (`--check` after the reboot verifies)."),
    "scan": ("fwman.cli.scan:scan", "List every NVIDIA GPU: IDs, firmware, BAR1, links, driver."),
    "capture": ("fwman.cli.capture:capture", "Record this host (read-only) into a snapshot directory."),
    "catalog": ("fwman.cli.catalog:catalog", "The curated VBIOS catalog: list, show, update (signed), lint, sign."),
    "fetch": ("fwman.cli.fetch:fetch", "Download or import a catalog image into the verified cache (MD5 + SHA-256)."),
    "upgrade": ("fwman.cli.upgrade:upgrade", "Plan the firmware upgrade of every card (--dry-run): images and steps."),
    "backup": ("fwman.cli.backup:backup", "Back up every card's firmware with nvflash (verified, never overwritten)."),
    "flash": ("fwman.cli.flash:flash", "Flash one card with every rail; its status, resume, history and report."),
    "restore": ("fwman.cli.flash:restore", "Put a card's own backup back (same gates as flash)."),
    "audit": ("fwman.cli.audit:audit", "Which driver version kernel, user space and containers are on; do they match."),
    "driver": ("fwman.cli.driver:driver", "P2P forks of the NVIDIA open module: `driver branches` and more."),
    "rom": ("fwman.cli.rom:rom", "Inspect a VBIOS file, or verify it against a card before flashing."),
    "doctor": ("fwman.cli.doctor:doctor", "What still blocks GPU peer-to-peer here, in chain order; one verdict."),
    "p2p": ("fwman.cli.p2p:p2p", "Peer-to-peer copy test between every pair of GPUs: bandwidth and every byte."),
    "modules": ("fwman.cli.modules:modules", "Patched NVIDIA modules per kernel: build, status, catchup, check-boot."),
    "hooks": ("fwman.cli.hooks:hooks", "Kernel hook and boot-time catch-up service: install, remove, status."),
    "dkms": ("fwman.cli.dkms:dkms", "Keep DKMS from replacing the patched modules: status, block, unblock."),
    "metrics": ("fwman.cli.metrics:metrics", "Prometheus metrics for node_exporter's textfile collector: write."),
    "userspace": ("fwman.cli.userspace:userspace", "Hold the NVIDIA user-space packages at the module's version."),
}

#: Renamed commands, old words -> new words. The old name still runs for a release, hidden from help and docs,
#: printing one deprecation line on stderr that names the new one (the hooks and scripts of a host keep working
#: across an upgrade while their owner learns the new name).
RENAMED_COMMANDS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("p2p", "test"): ("p2p",),  # p2p was a group of one command
    ("history",): ("flash", "history"),  # one job with flash status: what fwman's flashes did
    ("report",): ("flash", "report"),  # the owner report of a card's last flash and its check
}


def renamed(args: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Return (old words, new words) when ``args`` (the words after ``fwman`` and its options) start with a renamed
    command's old name, else None."""
    for old, new in RENAMED_COMMANDS.items():
        if tuple(args[: len(old)]) == old:
            return old, new
    return None


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, from a name -> ("module:attr", help) table."""

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = COMMANDS if lazy_commands is None else lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return the command names, sorted."""
        return sorted(self.lazy_commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return the named command, or None."""
        entry = self.lazy_commands.get(cmd_name)
        if entry is None:
            return None
        module_name, attr = entry[0].split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Resolve as click does, with click's "Did you mean" for a misspelt name (click looks for close names
        only among imported commands; these are imported on first use)."""
        if self.lazy_commands is COMMANDS and not ctx.resilient_parsing and (old_new := renamed(args)) is not None:
            old, new = old_new
            line = (f"fwman: warning: `fwman {' '.join(old)}` is deprecated, and goes in a later release: "
                    f"use `fwman {' '.join(new)}`")  # fmt: skip
            from fwman.cli.vocabulary import warn  # only when an old name is used: not on every start

            warn(line)
            args = [*new, *args[len(old) :]]
        name = args[0] if args else None
        if name and not name.startswith("-") and name not in self.lazy_commands and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, list(self.lazy_commands), n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands with their one-line help: a subgroup's (``driver``) without importing them; fwman's own
        help lists every runnable command, ``modules build`` as well as ``scan`` (its help is the one place
        that imports them all)."""
        if self.lazy_commands is not COMMANDS:
            rows = [(name, self.lazy_commands[name][1]) for name in self.list_commands(ctx)]
        else:
            rows = []
            for name in self.list_commands(ctx):
                command = self.get_command(ctx, name)
                assert command is not None
                rows += _runnable(ctx, (name,), command)
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _runnable(ctx: click.Context, path: tuple[str, ...], command: click.Command) -> list[tuple[str, str]]:
    """Return (``group sub``, help) of every runnable command under ``command``, itself first when a group runs
    on its own (``flash``, ``backup``)."""
    # a top-level command's summary is the hand-written one of COMMANDS; a subcommand's, its help's first sentence
    own = COMMANDS[path[0]][1] if len(path) == 1 else command.get_short_help_str(limit=400)
    if not isinstance(command, click.Group):
        return [(" ".join(path), own)]
    rows = [(" ".join(path), own)] if command.invoke_without_command else []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            rows += _runnable(ctx, (*path, name), sub)
    return rows


EPILOG = """\b
Exit codes: 0 ok, 1 unexpected error, 2 usage, 3 a safety gate blocked the action,
4 verification failed, 5 a required tool or file is missing, 6 partial success, 130 interrupted.
Docs: docs/ in the source tree (one page per task; docs/cli.md lists every command).
"""


@click.group(cls=LazyGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="fwman")
@group_options
@click.pass_context
def cli(ctx: click.Context, root: str | None, snapshot: str | None, verbose: int) -> None:
    """Manage VBIOS firmware and the P2P-patched NVIDIA driver on multi-GPU GeForce hosts, safely.

    \b
    Start with:  fwman scan          what GPUs, firmware and BAR sizes you have
                 fwman audit         which driver branch host and containers are on
                 fwman doctor        what still blocks GPU peer-to-peer
    Every command takes --snapshot DIR to work on a recorded host instead of this one.
    """
    app = ctx.ensure_object(AppContext)
    if root:
        app.root = root
    if snapshot:
        app.snapshot = snapshot
    app.verbose += verbose


def run(argv: Sequence[str], env: Environment | None = None) -> int:
    """Run fwman with ``argv`` in ``env`` and return the exit status. Never raises (but SystemExit for help)."""
    env = env or Environment.from_os()
    app = AppContext(env=env, argv=tuple(argv))
    try:
        # standalone_mode=False: click returns the Exit code of --help/--version instead of exiting, and
        # lets every other exception through to the mapping below.
        # click prints help, version and usage errors to sys.stdout/sys.stderr: point those at env's streams.
        with _using_clock(env), contextlib.redirect_stdout(env.stdout), contextlib.redirect_stderr(env.stderr):
            rv = cli.main(args=list(argv), prog_name="fwman", obj=app, standalone_mode=False)
        if isinstance(rv, int) and not isinstance(rv, bool):
            return rv
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.UsageError as e:  # in fwman's one error style: the message, then what to try
        message, hint = usage_text(e.format_message(), e.ctx.command_path if e.ctx else "fwman")
        _error(env, message, hint)
        return ExitCode.USAGE
    except click.ClickException as e:
        with contextlib.suppress(OSError, ValueError):  # a closed stderr loses the text, not the code
            e.show(file=env.stderr)
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):
        _error(env, "interrupted")
        return ExitCode.INTERRUPTED
    except FwmanError as e:
        _error(env, e.message, e.hint)
        if app.verbose >= 2:  # an expected error: its message says it all; -vv for where it was raised
            _print_traceback(env)
        return int(e.exit_code)
    except BrokenPipeError:  # click's own output (help) to a reader that went away: what it read was complete
        from fwman.host.local import silence

        silence(env.stdout)
        return ExitCode.OK
    except Exception as e:  # a bug: say so, one line, traceback with -v
        _error(env, f"unexpected {type(e).__name__}: {e}", "run again with -v for the traceback, and report it")
        if app.verbose:
            _print_traceback(env)
        return ExitCode.ERROR
    return ExitCode.OK


def usage_text(message: str, command_path: str) -> tuple[str, str]:
    """Return (message, hint) for click's usage error ``message`` raised by ``command_path``: click's "Did you
    mean X?" becomes the hint, with where the command's options are listed."""
    main, sep, guess = message.partition(" Did you mean ")
    main = main.rstrip(".")
    main = main[:1].lower() + main[1:]
    see = f"`{command_path} --help` says how to use it"
    return main, (f"did you mean {guess.rstrip('?')}? ({see})" if sep else see)


def _print_traceback(env: Environment) -> None:
    """Write the traceback of the exception being handled to ``env.stderr`` (traceback, and the tokenize and
    linecache it loads, are imported only for this: every command's start would pay for them)."""
    import traceback

    traceback.print_exc(file=env.stderr)


def _using_clock(env: Environment) -> contextlib.AbstractContextManager[object]:
    """Return a context that installs ``env.clock`` (the clock door is imported only when there is one)."""
    if env.clock is None:
        return contextlib.nullcontext()
    from fwman.core import clock

    return clock.using(env.clock)


def _error(env: Environment, message: str, hint: str | None = None) -> None:
    """Write the error line (and its hint), each one line (wrapped at words to the width), control characters
    made visible; a closed stderr loses the text, never the exit code."""
    from fwman.cli.layout import wrap_pieces

    # one line each: a message that quotes a tool or a file cannot add lines that read as fwman's own
    lines = [f"fwman: error: {one_line(message)}", *([f"  hint: {one_line(hint)}"] if hint else [])]
    text = "".join(
        "".join(t for t, _ in wrapped) + "\n" for ln in lines for wrapped in wrap_pieces([(ln, "")], env.width)
    )
    with contextlib.suppress(OSError, ValueError):  # closed (ValueError) or broken: the code still counts
        env.stderr.write(text)
        env.stderr.flush()


def main() -> None:
    """Console-script entry point: run and exit with the mapped status.

    The process ends with ``os._exit`` once the streams are flushed, skipping the interpreter's teardown (freeing
    every module and object: about 20 ms after ``fwman audit``, bench/containers.py), which changes nothing fwman
    leaves behind: its files are written, closed and renamed and its children waited for before ``run`` returns,
    and it registers no exit handlers. A stream that cannot be flushed (closed, a reader gone) loses its text,
    never the exit code.
    """
    code = run(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)
