"""`--timeout` is one option type: a finite number of seconds in range, else exit 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from fwman.cli.app import COMMANDS, cli
from fwman.cli.context import Seconds
from fwman.core import paths

BAD = ["nan", "inf", "-inf", "1e400", "-1", "0", "abc", "1e9"]


def _commands_with_timeout() -> list[tuple[str, ...]]:
    """Return the argv prefix of every command (and subcommand) that takes --timeout."""
    found: list[tuple[str, ...]] = []

    def walk(command: click.Command, argv: tuple[str, ...]) -> None:
        for param in command.params:
            if "--timeout" in getattr(param, "opts", []):
                assert isinstance(param.type, Seconds), f"{' '.join(argv)} --timeout is {param.type!r}"
                found.append(argv)
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, (*argv, name))

    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        walk(command, (name,))
    return found


def test_every_timeout_option_is_the_seconds_type() -> None:
    found = _commands_with_timeout()
    assert {argv[0] for argv in found} >= {"backup", "flash", "restore", "upgrade", "fetch", "catalog"}


@pytest.mark.parametrize("value", BAD)
def test_a_timeout_out_of_range_is_a_usage_error_and_nothing_runs(tmp_path: Path, value: str) -> None:
    from fixtures.nvflash.rig import build_rig

    rig = build_rig(tmp_path)
    for argv in (
        ("backup", "--card", "41:00.0"),
        ("flash", "--card", "41:00.0", "--image", str(rig.new_image_path)),
        ("upgrade", "--apply"),
        ("catalog", "update", "--url", "http://127.0.0.1:9/none"),
        ("fetch", "3842:3987/94.02.42.80.27"),
    ):
        r = rig(*argv, "--timeout", value)
        assert r.code == 2, (argv, value, r.stderr)  # type: ignore[attr-defined]
        assert "invalid value for '--timeout'" in r.stderr  # type: ignore[attr-defined]
        assert "unexpected" not in r.stderr  # type: ignore[attr-defined]
    journal = rig.root / paths.FLASH_JOURNAL_DIR.lstrip("/")
    assert not journal.exists() or list(journal.iterdir()) == []  # no operation left "killed at step gates"
    assert not (rig.root / paths.BACKUPS_DIR.lstrip("/")).exists()


def test_the_range_is_inclusive_and_named_in_the_help() -> None:
    from tests.support.env import FwmanEnv

    assert "(0.1 to 86400)" in FwmanEnv()("backup", "--help").stdout
    seconds = Seconds()
    assert seconds.convert("0.1", None, None) == 0.1 and seconds.convert("86400", None, None) == 86400.0
    with pytest.raises(click.BadParameter, match=r"give seconds from 0\.1 to 86400"):
        seconds.convert("86400.5", None, None)
