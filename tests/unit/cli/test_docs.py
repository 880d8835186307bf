"""The documentation stays true: the CLI reference is generated from --help, and every command has a guide."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


def test_the_demo_reads_as_a_result_and_exits_0() -> None:
    """`make demo`'s script on the bundled host: every step shown, no fwman error line, a summary of what the host
    needs (`fwman plan`: fwman's part, then the owner's steps with their fixes), exit 0 (audit and doctor finding
    problems is the demo working)."""
    fwman = Path(sys.executable).with_name("fwman")
    r = subprocess.run(["bash", str(REPO / "fixtures/demo.sh"), str(fwman)], cwd=REPO, capture_output=True,
                       text=True, timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for step in ("scan", "upgrade --dry-run", "audit", "doctor"):
        assert f"$ fwman --snapshot fixtures/hosts/rig-4x3090 {step}\n" in r.stdout
    assert "fwman: error" not in r.stdout + r.stderr
    # words, not lines: the plan's lines wrap at $COLUMNS where the test runner sets it
    summary = " ".join(r.stdout[r.stdout.index("What the example host needs") :].split())
    assert "fwman does (`fwman apply`):" in summary and " 1 hooks: " in summary
    assert "2 cards need firmware with Resizable BAR: 0000:41:00.0, 0000:61:00.0" in summary
    assert "how: upgrade to 94.02.42.80.27" in summary
    assert "`fwman upgrade --dry-run`, then `fwman upgrade --apply` (it backs up every card first)" in summary
    assert summary.rstrip().endswith("`fwman plan`, then `sudo fwman apply`. Demo done.")
    assert "\x1b[" not in r.stdout  # not a terminal: no escape codes


def test_fwman_help_lists_every_runnable_command() -> None:
    """An owner finds every command from `fwman --help`: each leaf (`modules build`), and each group that runs on
    its own (`flash`, `backup`), at the start of a line of the Commands section with its summary."""
    from tests.support.commands import all_commands, leaf_commands
    from tests.support.env import FwmanEnv

    shown = FwmanEnv(variables={"COLUMNS": "200"})("--help").stdout
    section = shown[shown.index("Commands:") :].split("\n\n")[0]
    rows = {line.strip().split("  ")[0] for line in section.splitlines()[1:] if line.startswith("  ") and
            not line.startswith("    ")}  # fmt: skip
    leaves = {" ".join(argv) for argv, c in leaf_commands() if not c.hidden}  # `modules hook`: for the hooks
    assert leaves <= rows, leaves - rows
    assert {"flash", "backup"} <= rows and "modules" not in rows  # a group that only dispatches is not a row
    assert len(rows) == len(leaves) + len(
        {" ".join(a) for a, c in all_commands() if getattr(c, "invoke_without_command", False)}
    )
