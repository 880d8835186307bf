"""`--root`, `--snapshot` and `-v` are declared once: the group and every command show the same option with the
same help, and each works before and after the command name."""

from __future__ import annotations

from pathlib import Path

import click

from fwman.cli.app import cli
from tests.support.commands import leaf_commands
from tests.support.env import EXAMPLE_HOST, FwmanEnv

GLOBAL = ("--root", "--snapshot", "--verbose")


def _leaves() -> list[tuple[tuple[str, ...], click.Command]]:
    return leaf_commands()


def _helps(command: click.Command) -> dict[str, str | None]:
    return {opt: p.help for p in command.params if isinstance(p, click.Option) for opt in p.opts if opt in GLOBAL}


def test_every_command_declares_the_global_options_as_the_group_does() -> None:
    group = _helps(cli)
    assert set(group) == set(GLOBAL) and all(group.values())
    leaves = _leaves()
    assert len(leaves) > 40
    differ = {" ".join(argv): h for argv, command in leaves if (h := _helps(command)) != group}
    assert not differ, f"commands whose --root/--snapshot/-v differ from the group's ({group}): {differ}"


def test_before_and_after_the_command_name_are_the_same(tmp_path: Path) -> None:
    run = FwmanEnv()
    before = run("--snapshot", str(EXAMPLE_HOST), "scan", "--json")
    after = run("scan", "--json", "--snapshot", str(EXAMPLE_HOST))
    assert before.code == after.code == 0 and before.json() == after.json()
    missing = tmp_path / "nope"
    assert run("--root", str(missing), "hooks", "status").code == run("hooks", "status", "--root", str(missing)).code


#: the flash options: declared once (fwman/cli/flash.py flash_options), on every command that flashes
FLASH = ("--reuse-backups-from", "--i-understand-no-backup-bios", "--allow-downgrade", "--timeout")


def test_the_flash_options_read_the_same_on_every_command_that_flashes() -> None:
    def command(argv: tuple[str, ...]) -> click.Command:
        found: click.Command = cli
        for name in argv:
            assert isinstance(found, click.Group)
            sub = found.get_command(click.Context(found), name)
            assert sub is not None
            found = sub
        return found

    flashing = [("flash",), ("flash", "resume"), ("restore",), ("upgrade",)]
    helps = {argv: {o: p.help for p in command(argv).params if isinstance(p, click.Option) for o in p.opts
                    if o in FLASH} for argv in flashing}  # fmt: skip
    first = helps[("flash",)]
    assert set(first) == set(FLASH) and all(first.values())
    for argv, found in helps.items():
        # upgrade never downgrades (a plan moves to the recommended image): the one option it lacks
        expected = {o: h for o, h in first.items() if argv != ("upgrade",) or o != "--allow-downgrade"}
        assert found == expected, f"{' '.join(argv)}: {found}"
