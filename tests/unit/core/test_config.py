"""/etc/fwman/config.toml: every section and key declared; a misspelling is an error with file, line, known keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.config import known_keys, parse_config
from fwman.core.errors import ExitCode, UsageError
from tests.support.env import REPO, FwmanEnv


def test_misspelt_key_names_file_line_and_known_keys() -> None:
    text = '[forks]\nmine = "https://example.org/fork"\n\n[modules]\nfork = "aikitoria"\nbrnach = "570.86.16-p2p"\n'
    with pytest.raises(UsageError) as e:
        parse_config(text, "/etc/fwman/config.toml")
    assert e.value.message == (
        "/etc/fwman/config.toml:6: unknown key `brnach` in [modules]; known keys: branch, driver-version, fork, "
        "source, strict"
    )
    assert e.value.exit_code == ExitCode.USAGE


def test_misspelt_section_and_wrong_types() -> None:
    with pytest.raises(UsageError, match=r"config.toml:2: unknown section \[module\]; known sections: \[forks\], "):
        parse_config("# fwman\n[module]\nstrict = true\n", "config.toml")
    with pytest.raises(UsageError, match=r"^c:3: \[modules\] strict must be true or false$"):
        parse_config('[modules]\nfork = "x"\nstrict = "yes"\n', "c")
    with pytest.raises(UsageError, match=r"^c:2: \[forks\] api_url must be a string$"):
        parse_config("[forks]\napi_url = 443\n", "c")


def test_known_settings_and_fork_names_are_accepted() -> None:
    config = parse_config(
        '[forks]\nmine = "https://example.org/f"\ndefaults = false\napi_url = "https://forge.example"\n'
        '[modules]\nsource = "/srv/src"\nstrict = true\n'
    )
    assert config.section("forks")["mine"] == "https://example.org/f"
    assert config.get_bool("forks", "defaults", True) is False
    assert config.get_str("modules", "source") == "/srv/src"
    assert config.get_bool("modules", "strict") is True
    assert known_keys() == {
        "forks": ["api_url", "defaults"],
        "modules": ["branch", "driver-version", "fork", "source", "strict"],
        "containers": ["engines"],
    }


def test_container_engines_setting() -> None:
    assert parse_config('[containers]\nengines = ["podman"]\n').section("containers")["engines"] == ["podman"]
    with pytest.raises(UsageError, match=r"c:2: \[containers\] engines"):
        parse_config('[containers]\nengines = ["lxd"]\n', "c")


def test_every_config_example_in_the_docs_parses() -> None:
    # the documented [forks] and [modules] tables are the model: an example the model rejects is a wrong doc
    found = 0
    for page in sorted((REPO / "docs").glob("*.md")):
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(), re.S):
            if re.search(r"^\[(forks|modules)\]", block, re.M):
                parse_config(block, str(page))
                found += 1
    assert found >= 2


def test_cli_refuses_a_misspelt_key_with_exit_2(tmp_path: Path) -> None:
    conf = tmp_path / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text("[forks]\ndefault = false\n")  # not a fork name: a bool, so a misspelling of `defaults`
    r = FwmanEnv()("driver", "branches", "--offline", "--root", str(tmp_path))
    assert r.code == ExitCode.USAGE, r.stderr
    assert "/etc/fwman/config.toml:2: unknown key `default` in [forks]" in r.stderr
    assert "known keys: api_url, defaults" in r.stderr
    conf.write_text("[modules]\nstrcit = true\n")
    r = FwmanEnv()("driver", "branches", "--offline", "--root", str(tmp_path))
    assert r.code == ExitCode.USAGE
    assert (
        "/etc/fwman/config.toml:2: unknown key `strcit` in [modules]; known keys: branch, driver-version, fork, "
        "source, strict" in (r.stderr)
    )


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_property_any_text_is_a_config_or_a_usage_error(text: str) -> None:
    try:
        parse_config(text)
    except UsageError:
        pass
