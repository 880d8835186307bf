"""Issue 37, row 7: what fwman writes for another program holds only what that program's format can.

A metrics label value (a GPU name, a kernel release) with a carriage return was written raw: the Prometheus text
format has no escape for it, ``promtool check metrics`` rejects the file and node_exporter's textfile collector
drops all of it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fwman.core import modprobeconf, unitfile
from fwman.core.errors import ParseError
from fwman.core.jsontext import parse_json
from fwman.core.tomltext import parse_toml, toml_value
from fwman.reports.metrics import Family, Sample, render
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST
from tests.support.tools import require_tools, tool_path

#: one sample line of the text exposition format (prometheus.io/docs/instrumenting/exposition_formats): a label
#: value holds anything but a raw backslash, double quote, newline or carriage return; escapes are \\ \" \n
_VALUE = r'(?:[^"\\\n\r]|\\[\\"n])*'
_SAMPLE = re.compile(
    rf"[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{{[a-zA-Z_]\w*=\"{_VALUE}\"(?:,[a-zA-Z_]\w*=\"{_VALUE}\")*\}})? \S+"
)
FAMILY = Family("fwman_test_info", "A test.")


def _well_formed(text: str) -> None:
    assert "\r" not in text
    for line in text.split("\n")[:-1]:
        assert line.startswith("# ") or _SAMPLE.fullmatch(line), repr(line)


@given(st.text(alphabet=st.sampled_from('ab \r\n\\"\x1b\x85\t')), st.text())
def test_any_label_value_gives_a_well_formed_line(gpu: str, kernel: str) -> None:
    tried()
    _well_formed(render([Sample(FAMILY, 1, {"gpu": gpu, "kernel": kernel})]))


@pytest.mark.parametrize("value", ["GeForce RTX 3090\r", "6.1.0-\r-amd64", "a\r\nb", "\x1b[2J", "\x85", "\\r"])
def test_a_carriage_return_in_a_label_value_is_written_out(value: str) -> None:
    tried()
    text = render([Sample(FAMILY, 1, {"gpu": value})])
    _well_formed(text)  # it was: a raw \r inside the quotes


def _metrics(attack: CountingEnv, tmp_path: Path) -> str:
    """Return the metrics fwman writes for a host with a kernel directory named with a carriage return."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "lib/modules/6.1.0-99\r-amd64/kernel").mkdir(parents=True)
    r = attack("--root", str(root), "metrics", "write", "-o", "/m.prom")
    assert r.code == 0, r.stderr
    return (root / "m.prom").read_text(encoding="utf-8")


def test_metrics_write_over_a_kernel_named_with_a_carriage_return(attack: CountingEnv, tmp_path: Path) -> None:
    text = _metrics(attack, tmp_path)
    assert 'kernel="6.1.0-99\\\\r-amd64"' in text  # written out, readable, on its line
    _well_formed(text)


def test_promtool_accepts_it(attack: CountingEnv, tmp_path: Path) -> None:
    require_tools("promtool", package="prometheus (only its promtool: make system-deps)")
    text = _metrics(attack, tmp_path)
    checked = subprocess.run(
        [tool_path("promtool") or "promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


# -- the other formats fwman writes for another program: one serializer each, refusing what it cannot hold --------
ODD = st.text(alphabet=st.sampled_from("ab =-_/%$\"'\\\n\r\t\x00\x85\u2028#;"), max_size=12)


@given(ODD, ODD)
def test_a_unit_value_or_command_word_is_one_line_or_refused(value: str, word: str) -> None:
    tried()
    try:
        text = unitfile.render([("Service", [("Environment", value), ("ExecStart", unitfile.exec_line([word]))])])
    except ParseError:
        return
    assert text.decode().splitlines() == ["[Service]", f"Environment={value}", f"ExecStart={word}"]
    assert not set(word) & set(" %$\"'\\;#")  # nothing systemd would expand, split or unquote


@given(ODD, ODD)
def test_a_module_option_or_comment_is_one_line_or_refused(option: str, comment: str) -> None:
    tried()
    try:
        text = modprobeconf.render("nvidia", [option], [comment]).decode()
    except ParseError:
        return
    assert text.splitlines() == [f"# {comment}", f"options nvidia {option}"]
    assert len(option.split()) == 1


@given(ODD)
def test_any_text_is_one_toml_string(value: str) -> None:
    tried()
    assert parse_toml(f"k = {toml_value(value)}\n", "t") == {"k": value}


@given(st.recursive(st.text() | st.integers(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_any_json_value_is_written_on_one_line_and_reads_back(value: object) -> None:
    tried()
    text = json.dumps(value)  # the serializer of every --json document and record: it escapes every control
    assert "\n" not in text and "\r" not in text and parse_json(text, "t") == value
