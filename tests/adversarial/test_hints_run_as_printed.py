"""Every fwman command a hint, fix or next step names runs as printed: collected from what the read commands
print on every bundled recording (text, stdout and stderr), each command is parsed by fwman's own command line
(`--help` after it: the command, its options and their values must be accepted), and none carries a placeholder
where fwman knows the value (``KVER``, ``F``/``B``, ``V``, ``<port>``, ``BOARD/VERSION``).

A changing command named in a hint cannot run on a replay, and a read command with its real arguments may need
the machine: parsing is the bar every hint must pass; tests/unit/firmware/catalog/test_catalog_local.py and
tests/unit/app/test_plan.py run some of them for real.
"""

from __future__ import annotations

import re
import shlex

import click
import pytest

from fwman.cli.app import cli, renamed
from fwman.cli.vocabulary import renamed_in
from tests.support.env import HOSTS, FwmanEnv

#: the read commands whose hints are collected (the owner's first look at a box, and the journeys' views)
READS = [
    ("scan",), ("audit", "--offline"), ("doctor",), ("plan",), ("apply", "--check"), ("modules", "status"),
    ("modules", "check-boot"), ("dkms", "status"), ("hooks", "status"), ("userspace", "status"),
    ("driver", "settings"), ("driver", "power"), ("driver", "branches", "--offline"), ("upgrade", "--dry-run"),
    ("flash", "status"),
]  # fmt: skip
COMMAND = re.compile(r"`(?:sudo )?(fwman [^`]+)`")
#: a value an owner must not have to fill in: fwman knows it where it prints the hint
PLACEHOLDER = re.compile(r"^(KVER|F|B|V|N|FILE|DIR|BOARD/VERSION|<[^>]+>|[A-Z]{2,}(/[A-Z]+)?)$")


def _hints() -> dict[str, set[str]]:
    """Return each fwman command printed in backticks -> where it was printed (host and command)."""
    found: dict[str, set[str]] = {}
    env = FwmanEnv(variables={"COLUMNS": "400"})
    for host in sorted(HOSTS.iterdir()):
        for argv in READS:
            r = env("--snapshot", str(host), *argv)
            for command in COMMAND.findall(r.stdout + r.stderr):
                found.setdefault(command, set()).add(f"{host.name}: fwman {' '.join(argv)}")
    return found


HINTS = _hints()


#: the journey pages: every command they show an owner typing (the story suite runs the blocks marked
#: ``<!-- journey -->``: tests/story/test_journey.py; the move's commands: tests/story/test_driver_move.py)
JOURNEYS = ["docs/journey-p2p.md", "docs/journey-kernel-update.md", "docs/move.md"]
REPO = HOSTS.parent.parent


def _page_commands() -> dict[str, set[str]]:
    """Return each fwman command line of the journey pages' code blocks -> the page."""
    found: dict[str, set[str]] = {}
    for page in JOURNEYS:
        blocks = (REPO / page).read_text(encoding="utf-8").split("```")[1::2]
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():  # a command continued on the next line
                text = line.removeprefix("$ ").split("#")[0].strip().removeprefix("sudo ")
                if text.startswith("fwman "):
                    found.setdefault(text, set()).add(page)
    return found


PAGES = _page_commands()


@pytest.mark.parametrize("command", sorted(PAGES))
def test_each_journey_page_command_runs_as_shown(command: str) -> None:
    argv = shlex.split(command)[1:]
    assert old_spellings(argv) == [], f"`{command}` ({', '.join(PAGES[command])}) uses an old spelling"
    r = FwmanEnv()(*argv, "--help")
    assert r.code == 0, f"`{command}` ({', '.join(PAGES[command])}) does not parse: {r.stderr.strip()}"


def test_the_walk_finds_the_journeys_hints() -> None:
    assert {"fwman plan", "fwman apply", "fwman driver move --rollback"} <= set(PAGES), sorted(PAGES)
    assert {"fwman apply --check", "fwman upgrade --apply", "fwman p2p"} <= set(HINTS), sorted(HINTS)


@pytest.mark.parametrize("command", sorted(HINTS))
def test_each_printed_command_runs_as_printed(command: str) -> None:
    argv = shlex.split(command)[1:]
    where = ", ".join(sorted(HINTS[command]))
    placeholders = [word for word in argv if PLACEHOLDER.match(word)]
    assert placeholders == [], f"`{command}` (printed by {where}) has placeholders fwman could fill: {placeholders}"
    assert old_spellings(argv) == [], f"`{command}` (printed by {where}) uses an old spelling"
    r = FwmanEnv()(*argv, "--help")
    assert r.code == 0, f"`{command}` (printed by {where}) does not parse: {r.stderr.strip()}"


def old_spellings(argv: list[str]) -> list[str]:
    """Return the renamed command or option spellings in ``argv`` (they run, with a deprecation line: a hint must
    print the new one)."""
    old = renamed(argv)
    if old is not None:
        return [" ".join(old[0])]
    command: click.Command = cli
    for word in argv:
        if word.startswith("-") or not isinstance(command, click.Group):
            break
        sub = command.get_command(click.Context(command), word)
        if sub is None:
            break
        command = sub
    spellings = renamed_in(command)
    return [word.split("=")[0] for word in argv if word.split("=")[0] in spellings]


def test_the_check_catches_a_placeholder_an_unknown_option_and_an_old_spelling() -> None:
    assert PLACEHOLDER.match("KVER") and PLACEHOLDER.match("<port>") and not PLACEHOLDER.match("570.86.16")
    assert FwmanEnv()("modules", "build", "--no-such-option", "--help").code == 2
    assert old_spellings(["driver", "branches", "--version", "570.86.16"]) == ["--version"]
    assert old_spellings(["history"]) == ["history"] and old_spellings(["flash", "history"]) == []
