"""Generate docs/cli.md (the CLI reference) from the commands' own --help: ``python -m fwman.cli.docgen``.

A test regenerates it and compares, so the reference never drifts from the code.
"""

from __future__ import annotations

import sys

import click

from fwman.cli.app import COMMANDS, RENAMED_COMMANDS, cli
from fwman.cli.vocabulary import OPTIONS, RenamedOption

HEADER = """# fwman command reference

Generated from `--help` by `python -m fwman.cli.docgen > docs/cli.md` (a test checks it is current). The task
guides in this folder explain the stories; this page lists every command and option.

Global options (before or after the command name): `--root DIR`, `--snapshot DIR`, `-v`.
"""


def _walk(chain: list[tuple[str, click.Command]]) -> list[list[tuple[str, click.Command]]]:
    """Return every command below the last one in ``chain`` (itself first), each as its chain from the root."""
    found = [chain]
    name, command = chain[-1]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name)
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                found += _walk([*chain, (sub_name, sub)])
    return found


def help_text(chain: list[tuple[str, click.Command]], width: int) -> str:
    """Return ``--help`` of the last command of ``chain`` as a user sees it, wrapped to ``width``."""
    ctx: click.Context | None = None
    for name, command in chain:
        # the root context carries the group's settings (-h as well as --help), as a real invocation does;
        # click caches the help option per command, so a context without them would depend on test order
        settings = dict(cli.context_settings) if ctx is None else {}
        ctx = click.Context(
            command, info_name=name, parent=ctx, terminal_width=width, max_content_width=width, **settings
        )
    assert ctx is not None
    return ctx.command.get_help(ctx)


def vocabulary(chains: list[list[tuple[str, click.Command]]]) -> str:
    """Return the option vocabulary as Markdown: each option name with its one meaning and the commands that take
    it (global options: every command), then the old spellings that still work for a release."""
    takers: dict[str, list[str]] = {name: [] for name in OPTIONS}
    renamed: list[tuple[str, str, str]] = []
    runnable: set[str] = set()
    for chain in chains:
        path = " ".join(name for name, _ in chain[1:]) or "fwman"
        command = chain[-1][1]
        if len(chain) > 1 and (not isinstance(command, click.Group) or command.invoke_without_command):
            runnable.add(path)
        for param in command.params:
            if isinstance(param, RenamedOption):
                renamed.append((path, param.opts[0], param.renamed_to))
            elif isinstance(param, click.Option) and not param.hidden:
                takers.setdefault(max(param.opts, key=len), []).append(path)
    out = ["\n## Options: one name per meaning\n\n| option | meaning | commands |\n|---|---|---|\n"]
    for name, meaning in sorted(OPTIONS.items()):
        shown = "every command" if runnable <= set(takers[name]) else ", ".join(takers[name])
        out.append(f"| `{name}` | {meaning} | {shown} |\n")
    out.append("\nOld spellings, hidden from help, that still work for a release and print one deprecation line:\n\n")
    out.append("| command | old | use |\n|---|---|---|\n")
    for old, new in RENAMED_COMMANDS.items():
        out.append(f"| `fwman {' '.join(old)}` | (the command) | `fwman {' '.join(new)}` |\n")
    out += [f"| `{path}` | `{old_name}` | `{new_name}` |\n" for path, old_name, new_name in sorted(renamed)]
    return "".join(out)


def render() -> str:
    """Return the whole reference as Markdown."""
    out = [HEADER]
    chains = _walk([("fwman", cli)])
    out.append(vocabulary(chains))
    for chain in chains:
        names = [name for name, _ in chain]
        out.append(f"\n## `{' '.join(names)}`\n\n")
        if len(names) == 2 and names[1] in COMMANDS:
            out.append(f"{COMMANDS[names[1]][1]}\n\n")
        out.append("```\n" + help_text(chain, 100).rstrip() + "\n```\n")
    return "".join(out)


def main() -> int:
    """Print the reference to stdout."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
