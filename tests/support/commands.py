"""Every command of the ``fwman`` CLI, walked once (the tests that check every command share this walk)."""

from __future__ import annotations

import click

from fwman.cli.app import COMMANDS, cli

#: every command that changes a host, with the arguments it needs: each refuses a --snapshot replay the same way
#: (tests/adversarial/test_changes_and_replays.py); the replay walk (test_replays_never_guess.py) skips them
CHANGES = [
    ("hooks", "install"),
    ("hooks", "remove"),
    ("dkms", "block"),
    ("dkms", "unblock"),
    ("modules", "keygen"),
    ("modules", "catchup"),
    ("modules", "unpin"),
    ("modules", "build", "--kernel", "6.1.0-50-amd64", "--source", "/src"),
    ("modules", "hook", "--kernel", "6.1.0-50-amd64"),
    ("catalog", "update", "--url", "https://example.org/c/"),
    ("fetch", "10de-2204-3842-3987/94.02.42.80.27"),
    ("backup",),
    ("flash", "--card", "41:00.0", "--image", "x.rom"),
    ("flash", "resume"),
    ("restore", "--card", "41:00.0", "--backup", "/x"),
    ("upgrade", "--apply"),
    ("metrics", "install"),
    ("metrics", "remove"),
    ("modules", "import", "x.fwbundle"),
    ("apply",),
    ("driver", "move", "--to", "570.86.16"),
]


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
