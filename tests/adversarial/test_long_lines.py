"""Long hostile lines: the text parsers are linear in the line's length, and give what the old patterns gave.

The old patterns (kept below as references) backtracked over runs of blanks: ``re.split(r"\\s+#")`` in env
files and LXC ``lxc.environment`` values, ``(.*?)\\s*$`` in NCCL's WARN and transport lines, ``\\s+.*`` in
all_reduce_perf's rank lines, ``\\s+(.*?)\\s*\\(`` in ``nvflash --list`` lines, a lazy key before ``\\s*:`` in
nvflash blocks, ``\\[\\s*(...+?)\\s*\\]`` in config.toml headers, and grub menu titles retried through every
``'\\''``. A 150 KB LXC value made ``doctor`` take 41 s; a 16 MiB line (what capture records) would take days.

Linearity is asserted by structure, not by the clock: :func:`test_no_pattern_has_the_backtracking_shapes`
reads every pattern in fwman and refuses the shapes above; hypothesis checks the rewrites against the old
patterns on ordinary lines; and 200 KB lines of the hostile shape parse (seconds to hours each before).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core import config
from fwman.driver.boot import loaders
from fwman.firmware.nvflash import protocol
from fwman.p2p import nccl_log
from fwman.platform import envfile
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST, REPO

LONG = 200_000

# -- the old patterns, as references --------------------------------------------------------------------------
OLD_CHANNEL = re.compile(
    r"NCCL INFO (?P<what>Channel|Ring) (?P<channel>\d+)(?:/(?P<sub>\d+))? : "
    r"(?P<src>\d+)(?:\[(?P<srcdev>[0-9a-fA-F]+)\])? -> (?P<dst>\d+)(?:\[(?P<dstdev>[0-9a-fA-F]+)\])? "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<transport>\S.*?)\s*$"
)
OLD_WARN = re.compile(r"NCCL WARN (.*?)\s*$")
OLD_RANK = re.compile(r"^#\s+Rank\s+\d+\s+.*device\s+\d+\s+\[[0-9a-fA-F:.]+\]")
OLD_LIST = re.compile(
    r"^\s*<(?P<index>\d+)>\s+(?P<name>.*?)\s*"
    r"\((?P<v>[0-9A-Fa-f]{4}),(?P<d>[0-9A-Fa-f]{4}),(?P<sv>[0-9A-Fa-f]{4}),(?P<sd>[0-9A-Fa-f]{4})\)\s+"
    r"S:(?P<s>[0-9A-Fa-f]{2,4}),B:(?P<b>[0-9A-Fa-f]{2}),D:(?P<dev>[0-9A-Fa-f]{2}),F:(?P<f>[0-9A-Fa-f]{1,2})"
    r"(?:\s+H:\S+)?\s*$"
)
OLD_KV = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 '()/._-]*?)\s*:\s(?P<value>.*)$")
OLD_HEADER = re.compile(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?")


def old_unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


# -- hypothesis: the rewrites give what the old patterns gave ----------------------------------------------
BLANKS = " \t\x0b\x0c\u00a0\u2003"  # what \s and str.isspace agree on, beyond the space


def lines(alphabet: str, *parts: str, max_size: int = 12) -> st.SearchStrategy[str]:
    """Return lines made of ``parts`` and random runs of ``alphabet`` (blanks included) between them."""
    filler = st.text(alphabet=alphabet + BLANKS, max_size=max_size)
    pieces = st.lists(st.one_of(filler, st.sampled_from(parts or ("",))), max_size=8)
    return pieces.map("".join)


@settings(max_examples=400, deadline=None)
@given(lines("ab#'\"x=", "#", " #", "'", '"'))
def test_unquote_agrees_with_the_old_split(value: str) -> None:
    tried()
    assert envfile.unquote(value) == old_unquote(value)


CHANNEL_HEADS = ("NCCL INFO Channel 00/0 : 0[0] -> 1[1] ", "NCCL INFO Ring 01 : 2 -> 3 [send] ", "via ", "NCCL INFO ")


@settings(max_examples=400, deadline=None)
@given(lines("P2P/CUMEM via", *CHANNEL_HEADS, "NCCL WARN ", "NCCL WARN x"))
def test_nccl_lines_agree_with_the_old_patterns(line: str) -> None:
    tried()
    old, new = OLD_CHANNEL.search(line), nccl_log._CHANNEL.search(line)
    assert (old is None) == (new is None)
    if old is not None and new is not None:
        assert {**new.groupdict(), "transport": new.group("transport").rstrip()} == old.groupdict()
    old_w, new_w = OLD_WARN.search(line), nccl_log._WARN.search(line)
    assert (old_w is None) == (new_w is None)
    if old_w is not None and new_w is not None:
        assert new_w.group(1).rstrip() == old_w.group(1)


@settings(max_examples=400, deadline=None)
@given(lines("#Rank0device[0000:04:00]", "#  Rank  0 ", "device  0 [0000:04:00]", " Group ", "#"))
def test_rank_lines_agree_with_the_old_pattern(line: str) -> None:
    tried()
    assert bool(nccl_log._RANK.match(line)) == bool(OLD_RANK.match(line))


ADAPTER = ("<0> ", "(10DE,2204,147D,3842) ", "S:00,B:41,D:00,F:00", " H:--:NRM", "(10DE,2204", "GeForce RTX")


@settings(max_examples=400, deadline=None)
@given(lines("<>0()AS:BDF,H", *ADAPTER))
def test_adapter_lines_agree_with_the_old_pattern(line: str) -> None:
    tried()
    old, new = OLD_LIST.match(line), protocol._adapter_line(line)
    assert (old is None) == (new is None), line
    if old is not None and new is not None:
        index, name, tail = new
        assert (index, name, tail.groupdict()) == (
            old.group("index"),
            old.group("name"),
            {k: v for k, v in old.groupdict().items() if k not in ("index", "name")},
        )


@settings(max_examples=400, deadline=None)
@given(lines("Ab (/)._-:x'1", "Version", " : ", ":", ": 94.02"))
def test_key_value_lines_agree_with_the_old_pattern(line: str) -> None:
    tried()
    old, new = OLD_KV.match(line), protocol._key_value(line)
    assert (old is None) == (new is None), line
    if old is not None and new is not None:
        # the key may end in blanks only where the old lazy key stopped short of them: both are stripped after
        assert (new[0].strip(), new[1]) == (old.group("key").strip(), old.group("value"))


@settings(max_examples=400, deadline=None)
@given(lines('[]#"ab.', "[", "]", "[modules]", "# c", "[[x]]"))
def test_config_headers_agree_with_the_old_pattern(line: str) -> None:
    tried()
    stripped = line.strip()
    old = OLD_HEADER.fullmatch(stripped)
    new = config._table_header(stripped)
    assert (old is None) == (new is None), stripped
    if old is not None:
        assert new == old.group(1).strip()


GRUB = ("menuentry ", "submenu ", "'", "'\\''", '"', "{", " --class x ", "$menuentry_id_option 'id' ")


@settings(max_examples=400, deadline=None)
@given(lines("ab{}'\\\"", *GRUB))
def test_grub_menu_lines_agree_with_the_old_pattern(raw: str) -> None:
    tried()
    line = raw.strip()
    # parse_grub_cfg now asks the pattern only about lines ending in "{": the pattern matches no other line
    assert loaders._ITEM_RE.match(line) is None or line.endswith("{")
    loaders.parse_grub_cfg(raw)  # and the parser takes any line


# -- by structure: no pattern in fwman has the shapes that backtrack over a run of blanks ----------------------
#: a lazy group or quantifier followed by blanks; a run of blanks followed by "anything"; ``\s+#``
BAD_SHAPES = re.compile(r"[*+]\?\)?\\s|\\s[*+]\.[*+]|\\s\+#")


def fwman_patterns() -> list[tuple[str, str]]:
    """Return (where, pattern) for every string literal fwman hands to a function of ``re``."""
    found = []
    for path in sorted((REPO / "fwman").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append((f"{path.relative_to(REPO)}:{node.lineno}", node.args[0].value))
    return found


def test_no_pattern_has_the_backtracking_shapes() -> None:
    patterns = fwman_patterns()
    assert len(patterns) > 50  # the scan sees fwman's patterns (and would see a new one)
    assert [(where, p) for where, p in patterns if BAD_SHAPES.search(p)] == []
    for old in (OLD_CHANNEL, OLD_WARN, OLD_RANK, OLD_LIST, OLD_KV, OLD_HEADER):  # the check can fail
        assert BAD_SHAPES.search(old.pattern), old.pattern
    assert BAD_SHAPES.search(r"\s+#")


# -- 200 KB lines of the hostile shape parse (seconds to hours each before) -------------------------------------
def test_long_hostile_lines_parse() -> None:
    blanks = " " * LONG
    assert envfile.parse_env_file(f"NCCL_P2P_DISABLE=a{blanks}b\n") == {"NCCL_P2P_DISABLE": f"a{blanks}b"}
    log = nccl_log.parse_nccl_log(
        f"x NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM{blanks}x\nx NCCL WARN a{blanks}b{blanks}\n"
    )
    assert log.channels[0].transport == f"P2P/CUMEM{blanks}x" and log.warnings == [f"a{blanks}b"]
    assert nccl_log._RANK.match(f"#  Rank  0 {blanks}") is None
    assert protocol._adapter_line(f"<0> {blanks}x") is None
    assert protocol._key_value(f"A{blanks}x") is None
    assert config._table_header(f"[{blanks}x") is None
    assert loaders.parse_grub_cfg("menuentry '" + "'\\''" * (LONG // 4) + "' x").items == []
    tried(7)


def test_doctor_on_a_long_lxc_environment_value(attack: CountingEnv, tmp_path: Path) -> None:
    # the reviewer's replay: 41 s before, quadratic in the value's length
    snap = Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap"))
    conf = snap / "files/etc/pve/lxc/101.conf"
    conf.write_text(f"lxc.environment: NCCL_P2P_DISABLE=a{' ' * 150_000}b\n" + conf.read_text())
    before = attack("--snapshot", str(EXAMPLE_HOST), "doctor")
    r = attack("--snapshot", str(snap), "doctor")
    assert r.code == before.code == 4, r.stderr  # the rig's doctor blocks on the same findings as before
    assert "NCCL_P2P_LEVEL not set in container 101" in r.stdout  # the long line was read, not skipped


@pytest.mark.parametrize("value", ["a #c", "a\t#c", "a#b", "'a #b'", '"x"', "#c", "a  # c # d"])
def test_inline_comments_are_cut_as_before(value: str) -> None:
    assert envfile.unquote(value) == old_unquote(value)
