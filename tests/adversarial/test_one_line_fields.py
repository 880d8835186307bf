"""Issue 37, row 6: text from outside stays on its line. A container's environment value with a newline started
a line of its choosing in root's ``fwman audit`` (a forged "match" row, an "all consistent" summary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwman.app.text import Span, document, line, say, table
from fwman.cli.render import render
from tests.support.appcontext import memory_app
from tests.support.counting import CountingEnv, tried
from tests.support.engines import docker_container, docker_snapshot, nvidia_cdi_spec

FORGED = "docker container evil   570.86.16  -  match"


def _containers(env: list[str]) -> str:
    """Return ``docker inspect``'s answer for the four containers of docker_snapshot, ``hook``'s env replaced."""
    return json.dumps(
        [
            docker_container("hook", "1" * 12, {"Runtime": "nvidia"}, env),
            docker_container(
                "cdi", "2" * 12, {"DeviceRequests": [{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=all"]}]}
            ),
            docker_container("own", "3" * 12, {"DeviceRequests": [{"Count": -1, "Capabilities": [["gpu"]]}]}),
            docker_container("db", "4" * 12, {"Runtime": "runc"}),
        ]
    )


@pytest.mark.parametrize("sep", ["\n", "\r\n", "\r", "\x0b", "\x85", "\u2028"])
def test_a_container_env_value_cannot_add_a_line_to_the_audit(attack: CountingEnv, tmp_path: Path, sep: str) -> None:
    env = [f"NCCL_P2P_LEVEL=SYS{sep}{FORGED}{sep}all components consistent"]
    snap = docker_snapshot(tmp_path, spec=nvidia_cdi_spec("570.86.16"), inspect=_containers(env))
    r = attack("--snapshot", str(snap), "audit", "--offline")
    assert "docker container hook" in r.stdout, r.stderr
    for shown in r.stdout.splitlines():  # what a terminal shows as lines: str.splitlines also splits at \x85, U+2028
        assert not shown.lstrip().startswith(("docker container evil", "all components consistent")), r.stdout
    assert "NCCL_P2P_LEVEL=SYS" in r.stdout
    doc = attack("--snapshot", str(snap), "audit", "--offline", "--json").json()
    hook = next(row for row in doc["rows"] if row["component"] == "docker container hook")
    assert f"SYS{sep}{FORGED}" in hook["detail"]  # --json keeps the exact value (JSON escapes it)


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "a\x1b[1Ab", "a\u2028b", "a\x85b", "tab\tstays"])
def test_every_line_and_cell_is_one_line_and_a_document_keeps_its_lines(text: str) -> None:
    tried()
    app, out = memory_app()
    render(app, [say(text), line("x: ", Span(text, "bad")), table(["H"], [[text]]), document("l1\nl2\n")])
    lines = out.getvalue().split("\n")
    assert lines[:4] == [lines[0], lines[1], "H", lines[3]] and len(lines) == 7 and lines[4:] == ["l1", "l2", ""]
    assert all(len(shown.splitlines()) == 1 for shown in lines[:4])
