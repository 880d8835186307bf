"""A command surface an owner can learn: renamed commands and options keep their old names for a release (hidden,
one deprecation line), every option name has one meaning (the table in docs/cli.md), and a misspelt option is
answered in fwman's error style with click's suggestion."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from fwman.cli.app import RENAMED_COMMANDS, cli
from fwman.cli.vocabulary import OPTIONS, RenamedOption, renamed_in
from tests.support.catalog import REBAR, rom, seed_catalog
from tests.support.commands import all_commands
from tests.support.env import REPO, FwmanEnv


def _walked() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command, fwman itself (its global options) first."""
    return [((), cli), *all_commands()]


def _long(option: click.Option) -> str:
    return max(option.opts + option.secondary_opts, key=len)


@pytest.mark.parametrize(("old", "new"), list(RENAMED_COMMANDS.items()), ids=lambda w: " ".join(w))
def test_a_renamed_command_still_runs_hidden_with_one_deprecation_line(
    old: tuple[str, ...], new: tuple[str, ...]
) -> None:
    run = FwmanEnv()
    then, now = run(*old, "--help"), run(*new, "--help")
    assert (then.code, then.stdout) == (now.code, now.stdout) == (0, now.stdout)
    was, is_now = " ".join(old), " ".join(new)
    want = f"fwman: warning: `fwman {was}` is deprecated, and goes in a later release: use `fwman {is_now}`"
    assert then.stderr.splitlines() == [want] and now.stderr == ""
    listed = [line.strip().split("  ")[0] for line in run("--help").stdout.splitlines() if line.startswith("  ")]
    assert " ".join(old) not in listed and " ".join(new) in listed
    assert f"## `fwman {' '.join(old)}`" not in (REPO / "docs/cli.md").read_text()


def test_the_old_history_command_does_what_flash_history_does(tmp_path: Path) -> None:
    (tmp_path / "var/lib/fwman").mkdir(parents=True)
    (tmp_path / "var/lib/fwman/history.jsonl").write_text("not json\n")
    run = FwmanEnv()
    then = run("--root", str(tmp_path), "history", "--card", "41:00.0")
    now = run("--root", str(tmp_path), "flash", "history", "--card", "41:00.0")
    assert then.code == now.code == 4  # the damaged line is reported, never skipped
    assert then.stdout == now.stdout
    assert then.stderr.splitlines()[1:] == now.stderr.splitlines()
    assert "use `fwman flash history`" in then.stderr.splitlines()[0]


def test_every_option_is_in_the_vocabulary_with_one_meaning() -> None:
    """Walk every command's options: each visible one is a row of the table (by its long name); each hidden one is
    the old spelling of an option the same command takes; every row is taken by some command; no meaning is
    spelled two ways."""
    unknown, no_long, bad_alias, used = [], [], [], set()
    for argv, command in _walked():
        visible = {_long(p) for p in command.params if isinstance(p, click.Option) and not p.hidden}
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            name = _long(param)
            where = f"fwman {' '.join(argv)} {name}"
            if param.hidden:
                if not isinstance(param, RenamedOption) or param.renamed_to not in visible:
                    bad_alias.append(where)
            elif not name.startswith("--"):
                no_long.append(where)
            elif name not in OPTIONS:
                unknown.append(where)
            else:
                used.add(name)
    assert unknown == [], "options missing from fwman.cli.vocabulary.OPTIONS (and docs/cli.md's table)"
    assert no_long == [], "every option has a --long spelling (the table's key)"
    assert bad_alias == [], "a hidden option is the old spelling of one the command takes (renamed_option)"
    assert sorted(set(OPTIONS) - used) == [], "table rows no command takes"
    meanings = list(OPTIONS.values())
    assert sorted({m for m in meanings if meanings.count(m) > 1}) == [], "one meaning spelled two ways"


def test_the_vocabulary_table_in_docs_lists_every_option_and_every_old_spelling() -> None:
    text = (REPO / "docs/cli.md").read_text()
    table = text[text.index("## Options: one name per meaning") : text.index("## `fwman`")]
    for name, meaning in OPTIONS.items():
        assert f"| `{name}` | {meaning} |" in table
    for argv, old, new in _renamed_options():
        assert f"| `{' '.join(argv)}` | `{old}` | `{new}` |" in table


def _renamed_options() -> list[tuple[tuple[str, ...], str, str]]:
    """(argv, old, new) of every renamed option of a command listed in help (hidden commands are the hooks')."""
    return [(argv, old, new) for argv, c in all_commands() if not c.hidden for old, new in renamed_in(c).items()]


@pytest.mark.parametrize(("argv", "old", "new"), _renamed_options(), ids=lambda v: str(v))
def test_an_old_option_spelling_is_hidden_from_help(argv: tuple[str, ...], old: str, new: str) -> None:
    shown = FwmanEnv()(*argv, "--help").stdout
    options = shown[shown.index("\nOptions:") :]
    spellings = {word.rstrip(",") for line in options.splitlines() for word in line.split()[:3]}
    assert new in spellings and old not in spellings


def test_an_old_option_spelling_still_works_with_one_line_naming_the_new_one(tmp_path: Path) -> None:
    """`fetch --from FILE` imports exactly as `fetch --image FILE` (the same file cached, the same report), the old
    spelling printing one line that runs as printed."""
    image = rom()
    src = tmp_path / "EVGA_3987.rom"
    src.write_bytes(image)
    run, out = FwmanEnv(), {}
    for spelling in ("--from", "--image"):
        root = tmp_path / spelling.strip("-")
        seed_catalog(root, image)
        out[spelling] = run("fetch", f"3842:3987/{REBAR}", spelling, str(src), "--root", str(root))
        cached = root / "var/cache/fwman/images/10de-2204-3842-3987" / f"{REBAR}.rom"
        assert out[spelling].code == 0 and cached.read_bytes() == image
    assert out["--from"].stdout == out["--image"].stdout and out["--image"].stderr == ""
    assert out["--from"].stderr.splitlines() == [
        f"fwman: warning: --from is deprecated here, and goes in a later release: use --image {src}"
    ]
    both = run("fetch", f"3842:3987/{REBAR}", "--from", str(src), "--image", str(src), "--root", str(tmp_path))
    assert both.code == 2 and "give --image only" in both.stderr


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [(("scan",), "--jsn", "--json"), (("flash",), "--crad", "--card"), (("fetch", "a/b"), "--imag", "--image")],
)
def test_a_misspelt_option_gets_a_suggestion_in_fwmans_error_style(
    argv: tuple[str, ...], typo: str, meant: str
) -> None:
    r = FwmanEnv()(*argv, typo, "x")
    assert r.code == 2 and r.stdout == ""
    command = " ".join(argv[:1])
    assert r.stderr.splitlines() == [
        f"fwman: error: no such option '{typo}'",
        f"  hint: did you mean '{meant}'? (`fwman {command} --help` says how to use it)",
    ]
