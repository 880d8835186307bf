"""`--json` means JSON: on every command that takes it, wherever it stands, on every path (or nothing on stdout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.json_docs import json_commands

#: every read command: on the bundled rig's snapshot each one prints its JSON document
READS_ON_THE_RIG = {
    ("scan",), ("catalog", "keys", "show"), ("catalog", "lint"), ("catalog", "list"), ("backup", "list"),
    ("backup", "verify"), ("flash", "status"), ("flash", "history"), ("audit",), ("driver", "branches"), ("doctor",),
    ("modules", "check-boot"), ("modules", "status"), ("hooks", "status"), ("dkms", "status"),
    ("userspace", "status"),
}  # fmt: skip


def test_every_json_path_prints_json_or_nothing(tmp_path: Path) -> None:
    run = FwmanEnv(variables={"PATH": "/nonexistent"})  # no tools: the commands take their early paths
    commands = json_commands()
    assert ("flash", "resume") in commands and ("backup", "list") in commands
    documents: dict[str, list[tuple[str, ...]]] = {}
    for where in (["--snapshot", str(EXAMPLE_HOST)], ["--root", str(tmp_path)]):
        for argv in commands:
            r = run(*argv, "--json", *where)
            # an error prints nothing on stdout; anything printed there is the document, and a success prints one
            if r.code == 0:
                assert r.stdout.strip(), f"{argv} {where[0]}: exit 0 and no JSON document"
            if r.stdout.strip():
                doc = json.loads(r.stdout)
                assert doc["schema"].startswith("fwman."), argv
                documents.setdefault(where[0], []).append(argv)
    # the read commands replay on the bundled rig and print their document there (a loop that printed nothing,
    # every command failing early, would pass the checks above)
    missing = READS_ON_THE_RIG - set(documents.get("--snapshot", []))
    assert not missing, f"read commands that printed no JSON document on the bundled rig: {sorted(missing)}"


def test_flash_resume_json_with_nothing_to_resume(tmp_path: Path) -> None:
    r = FwmanEnv()("flash", "resume", "--json", "--root", str(tmp_path))
    assert r.code == 0
    assert r.json() == {
        "schema": "fwman.flash-resume/1",
        "resumed": None,
        "message": "nothing to resume: every journaled operation finished",
    }


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (("backup", "--json", "list"), ("backup", "list", "--json")),
        (("backup", "--json", "verify"), ("backup", "verify", "--json")),
        (("flash", "--json", "status", "-n", "1"), ("flash", "status", "-n", "1", "--json")),
        (("flash", "--json", "resume"), ("flash", "resume", "--json")),
    ],
)
def test_json_before_the_subcommand_is_the_subcommands(
    tmp_path: Path, before: tuple[str, ...], after: tuple[str, ...]
) -> None:
    run = FwmanEnv()
    first, second = run(*before, "--root", str(tmp_path)), run(*after, "--root", str(tmp_path))
    assert first.code == second.code == 0, first.stderr
    assert first.json() == second.json()


@pytest.mark.parametrize(
    "argv",
    [
        ("backup", "--card", "41:00.0", "list"),
        ("backup", "--all", "verify"),
        ("backup", "--timeout", "5", "list"),
        ("flash", "--card", "41:00.0", "status"),
        ("flash", "--timeout", "5", "resume"),
        ("flash", "--allow-downgrade", "resume"),
    ],
)
def test_another_group_option_before_the_subcommand_is_refused(tmp_path: Path, argv: tuple[str, ...]) -> None:
    r = FwmanEnv()(*argv, "--root", str(tmp_path))
    assert r.code == 2, r.stderr
    option = next(a for a in argv if a.startswith("--"))
    assert r.stderr.startswith(f"fwman: error: {option} is an option of `fwman {argv[0]}` itself")
    assert r.stdout == ""


def test_root_before_the_subcommand_still_counts(tmp_path: Path) -> None:
    r = FwmanEnv()("backup", "--root", str(tmp_path), "list", "--json")
    assert r.code == 0 and r.json()["backups"] == []
