"""Every command of the ``fwman`` CLI, walked once (the tests that check every command share this walk)."""

from __future__ import annotations

import click

from fwman.cli.app import COMMANDS, cli


def all_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Return (argv, command) of every command and subcommand, groups included, each group after its
    subcommands, in the order ``fwman --help`` lists them."""
    found: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(command: click.Command, argv: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, (*argv, name))
        found.append((argv, command))

    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        walk(command, (name,))
    return found


def leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Return (argv, command) of every command that is not a group."""
    return [(argv, c) for argv, c in all_commands() if not isinstance(c, click.Group)]
