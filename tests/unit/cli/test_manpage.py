"""The man pages the Debian package ships are the commands' own --help, and groff (what man runs) renders them
cleanly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fwman.cli.app import COMMANDS
from fwman.cli.manpage import main, pages, roff_escape
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

#: what roff reads as a request or an escape at the start of a text line
REQUESTS = (".TH ", ".SH ", ".nf", ".fi", ".sp", ".BR ")


def test_one_page_per_command_with_its_help() -> None:
    found = pages()
    assert sorted(found) == sorted(["fwman.1", *(f"fwman-{name}.1" for name in COMMANDS)])
    hooks = found["fwman-hooks.1"]
    assert hooks.startswith('.TH FWMAN\\-HOOKS 1 "" "fwman ')
    for heading in (".SH DESCRIPTION", ".SH FWMAN HOOKS INSTALL", ".SH FWMAN HOOKS STATUS", ".SH SEE ALSO"):
        assert heading + "\n" in hooks
    # the words of `fwman hooks status --help`, as a user would type them
    assert "fwman hooks status \\-\\-json" in hooks
    assert "Usage: fwman hooks install [OPTIONS]" in hooks
    for text in found.values():
        assert all(line.startswith(REQUESTS) for line in text.splitlines() if line.startswith("."))
        assert "\n\n" not in text


@given(st.text())
def test_escape_never_starts_a_request(text: str) -> None:
    for line in roff_escape(text).splitlines():
        assert line == ".sp" or not line.startswith((".", "'"))
        assert "-" not in line.replace("\\-", "")


def test_main_writes_the_pages(tmp_path: Path) -> None:
    (tmp_path / "man1").mkdir()
    assert main([str(tmp_path / "man1")]) == 0
    assert (tmp_path / "man1/fwman-scan.1").read_text() == pages()["fwman-scan.1"]
    assert main([]) == 2


def test_groff_renders_every_page_without_warnings(tmp_path: Path) -> None:
    """What `man -l PAGE` runs, without man-db (whose package enables man-db.timer): groff-base's preconv (the
    page's encoding to groff's escapes) and groff with the man macros (-mandoc), every warning on (-ww; man's
    --warnings turns on only "mac"), 80 columns."""
    require_tools("groff", "preconv", package="groff-base")
    assert main([str(tmp_path)]) == 0
    # only what groff needs: a developer's environment must not change what it renders
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    written = sorted(tmp_path.glob("*.1"))
    assert [p.name for p in written] == sorted(pages()), "main() did not write one page per command"
    for page in written:
        pre = subprocess.run(["preconv", "-e", "UTF-8", str(page)], capture_output=True, env=env, check=True)
        proc = subprocess.run(
            ["groff", "-mandoc", "-Tutf8", "-rLL=80n", "-ww"], input=pre.stdout, capture_output=True, env=env
        )
        assert proc.returncode == 0 and proc.stderr == b"", (page.name, proc.stderr)
        assert "Usage: fwman" in proc.stdout.decode()
    # the check can fail: a line the man macros do not know is a warning
    bad = tmp_path / "bad.1"
    bad.write_text(written[0].read_text() + ".XX not a request\n")
    proc = subprocess.run(["groff", "-mandoc", "-Tutf8", "-ww", str(bad)], capture_output=True, env=env)
    assert b"XX" in proc.stderr


def test_help_and_page_agree() -> None:
    """The page holds the same words as `fwman scan --help` (only the wrapping differs)."""
    helped = " ".join(FwmanEnv()("scan", "--help").stdout.split())
    page = pages()["fwman-scan.1"].replace("\\-", "-").replace("\\e", "\\")
    body = " ".join(line for line in page.splitlines() if not line.startswith("."))
    assert helped.split("Options:")[0] in " ".join(body.split())
