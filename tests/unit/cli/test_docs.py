"""The documentation stays true: the CLI reference is generated from --help, and every command has a guide."""

from __future__ import annotations

import re

from fwman.cli.app import COMMANDS
from fwman.cli.docgen import render
from tests.support.env import REPO


def test_cli_reference_is_current() -> None:
    committed = (REPO / "docs/cli.md").read_text()
    assert committed == render(), "docs/cli.md is stale: run `python -m fwman.cli.docgen > docs/cli.md`"


def test_every_command_is_documented_in_docs() -> None:
    docs = "".join(p.read_text() for p in (REPO / "docs").glob("*.md") if p.name != "cli.md")
    missing = [name for name in COMMANDS if not re.search(rf"`fwman {name}\b", docs)]
    assert missing == [], f"commands without a guide in docs/: {missing}"


def test_readme_links_point_at_files() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(((?:docs|fixtures|bench)/[^)#]+)\)", readme)
    assert targets, "README links to docs"
    assert [t for t in targets if not (REPO / t).exists()] == []


def test_readme_starts_with_the_two_commands() -> None:
    lines = [line.strip() for line in (REPO / "README.md").read_text().splitlines() if line.strip()]
    assert lines[1].startswith("make demo") and lines[2].startswith("make test")
