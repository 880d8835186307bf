"""Deeply nested JSON wherever fwman reads JSON from outside: the documented exit, never `unexpected RecursionError`.

A few hundred KB of ``[`` is past the interpreter's recursion limit; every reader goes through
fwman.core.jsontext.parse_json, so each of them refuses the way its own garbage is refused.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from fixtures.forge import ForgeState, forge_server
from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from fwman.core.errors import ParseError, VerificationError
from fwman.host.live import LiveHost
from tests.support.counting import CountingEnv
from tests.support.env import EXAMPLE_HOST
from tests.support.errors import one_error_line

DEEP = "[" * 200_000 + "]" * 200_000
SHALLOW_BUT_TOO_DEEP = '{"format": ' + "[" * 100 + "]" * 100 + "}"  # json.loads takes it; fwman does not


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Return a live root tree made from the 4x3090 snapshot."""
    return materialize(EXAMPLE_HOST, tmp_path / "root")


def put(root: Path, host_path: str, text: str) -> None:
    path = root / host_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("text", [DEEP, SHALLOW_BUT_TOO_DEEP])
def test_a_nested_snapshot_json_is_exit_2_for_a_replay_and_for_check(
    attack: CountingEnv, tmp_path: Path, text: str
) -> None:
    snap = Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap"))
    (snap / "snapshot.json").write_text(text)
    r = attack("--snapshot", str(snap), "scan")
    assert r.code == 2, r.stderr
    assert "unreadable snapshot" in one_error_line(r) and "nested deeper than 64 levels" in r.stderr
    r = attack("capture", "--check", str(snap))
    assert r.code == 2, r.stderr
    assert "snapshot.json is not readable JSON: nested deeper than 64 levels" in r.stdout


def test_a_bundle_whose_bundle_json_is_nested_is_exit_4(attack: CountingEnv, root: Path, tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.TarFile(fileobj=out, mode="w") as tar:
        data = DEEP.encode()
        info = tarfile.TarInfo("bundle.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    bundle = tmp_path / "deep.fwbundle"
    bundle.write_bytes(out.getvalue())
    r = attack("--root", str(root), "modules", "import", str(bundle), "--dry-run")
    assert r.code == 4, r.stderr
    assert "bundle.json: nested deeper than 64 levels" in one_error_line(r)


def test_a_nested_history_line_is_a_damaged_line(attack: CountingEnv, root: Path) -> None:
    good = '{"time": "t", "kind": "flash", "card": "0000:41:00.0", "result": "success"}'
    put(root, paths.FLASH_HISTORY_FILE, f"{good}\n{DEEP}\n")
    r = attack("--root", str(root), "flash", "history")
    assert r.code == 4, r.stderr
    assert "0000:41:00.0" in r.stdout
    line = one_error_line(r)
    assert f"damaged flash history: {paths.FLASH_HISTORY_FILE} line 2: nested deeper than 64 levels" in line


def test_a_nested_forge_answer_is_could_not_list(attack: CountingEnv, tmp_path: Path) -> None:
    from fwman.driver.forks.listing import list_branches
    from fwman.driver.forks.model import Fork

    empty = tmp_path / "emptybin"
    empty.mkdir()
    (tmp_path / "root").mkdir()
    state = ForgeState(repos={}, body=DEEP.encode())
    with forge_server(state) as api:
        host = LiveHost(str(tmp_path / "root"), env={"PATH": str(empty)})
        fork = Fork("aikitoria", "https://github.com/aikitoria/open-gpu-kernel-modules")
        report = list_branches(host, [fork], api=api)
        attack.variables = {"PATH": str(empty), "FWMAN_FORGE_API": api}
        r = attack("--root", str(tmp_path / "root"), "driver", "branches", "--driver-version", "570.86.16")
    assert report.forks[0].source == "none"
    assert "unexpected answer" in (report.forks[0].error or "")
    assert r.code == 5, r.stderr  # as for a forge that answers HTTP 500: no fork could be listed
    assert "no fork could be listed" in r.stdout
    assert "fwman: error: no fork could be listed and there is no cache" in r.stderr
    assert "note: aikitoria: " in r.stderr and "(not a list of branches)" in r.stderr
    assert "RecursionError" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "root" / paths.BRANCH_CACHE_FILE.lstrip("/")).exists()


@pytest.mark.parametrize("text", [DEEP, SHALLOW_BUT_TOO_DEEP])
def test_a_nested_catalog_signature_or_index_is_a_verification_error(text: str) -> None:
    from fwman.core.signing import signature_key_id
    from fwman.firmware.catalog.schema import parse_index
    from fwman.firmware.catalog.signing import verify_catalog_signature

    with pytest.raises(VerificationError, match=r"index\.json\.sig: not a signature document \(nested deeper"):
        verify_catalog_signature(b"{}", text.encode(), [])
    with pytest.raises(VerificationError, match=r"index\.json\.sig: not a signature document"):
        signature_key_id(text.encode(), "index.json.sig")
    with pytest.raises(VerificationError, match="not a valid catalog index"):
        parse_index(text.encode())  # pydantic's own JSON parser stops at its depth limit


def test_a_nested_torch_result_line_is_a_parse_error() -> None:
    from fwman.p2p.nccl import RESULT_TAG, parse_torch_output

    with pytest.raises(ParseError, match="torch NCCL runner: result line: nested deeper than 64 levels"):
        parse_torch_output(f"warming up\n{RESULT_TAG}{DEEP}\n")


def test_nested_state_records_are_refused_as_their_garbage_is(root: Path) -> None:
    from fwman.driver.boot.pin import read_pin
    from fwman.driver.forks.cache import load_cache
    from fwman.driver.kmod.sign import configured_key
    from fwman.driver.userspace_hold import read_record

    host = LiveHost(str(root))
    for path in (paths.BOOT_PIN_STATE, paths.SIGNING_CONFIG, paths.USERSPACE_HOLD_STATE, paths.BRANCH_CACHE_FILE):
        put(root, path, DEEP)
    with pytest.raises(ParseError, match=r"boot pin record: .*nested deeper than 64 levels"):
        read_pin(host)
    with pytest.raises(ParseError, match=r"signing configuration: .*nested deeper than 64 levels"):
        configured_key(host)
    assert read_record(host) is None  # an unreadable hold record is "holds nothing", as before
    assert load_cache(host) == {}  # the cache is a convenience: unreadable is empty


def test_a_replayed_config_toml_nested_past_the_limit_is_exit_2(attack: CountingEnv, tmp_path: Path) -> None:
    snap = Path(shutil.copytree(EXAMPLE_HOST, tmp_path / "snap"))
    config = snap / "files" / paths.CONFIG_FILE.lstrip("/")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("a = " + "[" * 5_000 + "]" * 5_000 + "\n")  # TOML: tomllib recursed past the limit
    r = attack("--snapshot", str(snap), "audit", "--offline")
    assert r.code == 2, r.stderr
    assert f"{paths.CONFIG_FILE}: not valid TOML: nested deeper than 64 levels" in one_error_line(r)
