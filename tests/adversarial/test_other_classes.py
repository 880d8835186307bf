"""The other classes of issue 25, each closed where it occurs: non-UTF-8 file names, scratch-name collisions,
characters TOML cannot hold, a search cut off silently, archive links whose target the lister does not show."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fixtures.romgen import RomSpec, build_rom
from fwman.core.errors import ParseError, UsageError, VerificationError
from fwman.core.tomltext import parse_toml, toml_value
from fwman.driver.boot.initramfs import host_decompressor
from fwman.firmware.ops.listing import check_listing, parse_7zz_listing
from fwman.firmware.rom.package import MAX_MARKER_HITS, scan_blob
from fwman.host.live import LiveHost
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST

ODD = b"6.1.0-\xff\xfe-amd64"  # a kernel directory whose name is not UTF-8


# -- non-UTF-8 file names -------------------------------------------------------------------------------------
@pytest.fixture
def odd_root(tmp_path: Path) -> Path:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    os.makedirs(bytes(root) + b"/lib/modules/" + ODD + b"/kernel")
    os.makedirs(bytes(root) + b"/boot", exist_ok=True)
    with open(bytes(root) + b"/boot/vmlinuz-" + ODD, "wb") as f:
        f.write(b"x")
    return root


@pytest.mark.parametrize(
    "command",
    [
        ("metrics", "write", "-o", "METRICS"),
        ("modules", "catchup"),
        ("modules", "status"),
        ("modules", "status", "--json"),
        ("modules", "check-boot"),
        ("audit", "--offline"),
        ("hooks", "status"),
        ("capture", "CAPTURE"),
    ],
)
def test_a_kernel_directory_that_is_not_utf8_is_never_an_unexpected_error(
    attack: CountingEnv, odd_root: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    argv = [a.replace("METRICS", "/m.prom").replace("CAPTURE", str(tmp_path / "cap")) for a in command]
    r = attack("--root", str(odd_root), *argv)
    assert "unexpected" not in r.stderr, r.stderr  # it was: unexpected UnicodeEncodeError (metrics, catchup)
    assert "\udcff" not in r.stdout + r.stderr
    if command[0] == "metrics":
        assert r.code == 0 and (odd_root / "m.prom").read_text(encoding="utf-8")  # -o is a host path; UTF-8
    if command[:2] == ("modules", "catchup"):
        stamp = (odd_root / "var/lib/fwman/modules/current.stamp").read_bytes()
        assert ODD in stamp  # the exact bytes the shell fast path lists


# -- scratch-name collisions ----------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs zstd")
def test_two_readers_of_zstd_images_at_once_never_see_each_others_scratch(tmp_path: Path) -> None:
    payloads = [os.urandom(3 << 20) for _ in range(2)]  # 3 MiB each: the tool takes a moment
    streams = [subprocess.run(["zstd", "-q", "-c"], input=p, capture_output=True, check=True).stdout for p in payloads]
    host = LiveHost(str(tmp_path))
    errors: list[str] = []

    def read(i: int) -> None:
        run = host_decompressor(host)
        for _ in range(6):
            try:
                if run("zstd", streams[i]) != payloads[i]:
                    errors.append(f"reader {i} got another stream's bytes")
            except Exception as e:  # any failure is the collision this test is about
                errors.append(f"reader {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    tried(12)
    assert errors == []
    assert os.listdir(tmp_path / "var/cache/fwman/initramfs") == []  # every scratch file removed


# -- characters TOML cannot hold ------------------------------------------------------------------------------
@given(st.text())
def test_any_unicode_text_round_trips_through_toml(text: str) -> None:
    tried()
    assert parse_toml(f"k = {toml_value(text)}\n", "t")["k"] == text


@pytest.mark.parametrize("text", ["GeForce RTX 3090 \U0001f680", "del\x7f", "nul\x00", "\u2028sep"])
def test_what_json_wrote_that_toml_refused_now_reads_back(text: str) -> None:
    tried()
    assert parse_toml(f"k = {toml_value(text)}\n", "t")["k"] == text


def test_text_that_is_not_unicode_is_a_usage_error_not_a_broken_file() -> None:
    tried()
    with pytest.raises(UsageError, match="not UTF-8 text: a TOML file cannot hold it"):
        toml_value(b"\xff board".decode("utf-8", "surrogateescape"))


# -- a search cut off silently --------------------------------------------------------------------------------
def _option_rom() -> bytes:
    return build_rom(RomSpec(kind="option_rom", version="94.02.42.40.66")).ljust(1 << 20, b"\xff")


def test_55aa_filler_no_longer_hides_an_image_further_on() -> None:
    tried()
    rom = _option_rom()
    blob = b"\x55\xaa" * 100_000 + rom  # 100,000 markers that are not images, then one that is
    images, notes = scan_blob(blob, "package.exe")
    assert [i.offset for i in images] == [200_000] and notes == []  # it was: no image and no note


def test_a_search_that_stops_says_where() -> None:
    tried()
    blob = b"\x55\xaa" * (MAX_MARKER_HITS + 10) + _option_rom()
    images, notes = scan_blob(blob, "package.exe")
    assert images == []
    assert len(notes) == 1 and "the search for option ROMs stopped at offset 0x" in notes[0]


# -- links whose target the lister does not show --------------------------------------------------------------
def test_a_link_listed_without_its_target_is_refused() -> None:
    tried()
    listing = "Path = a.rom\nSize = 10\nMode = -rw-r--r--\n\nPath = evil\nSize = 0\nMode = lrwxrwxrwx\n"
    members = parse_7zz_listing(listing)
    assert [(m.name, m.kind, m.targets) for m in members] == [("a.rom", "-", ()), ("evil", "l", ())]
    with pytest.raises(VerificationError, match="a link whose target the listing does not show"):
        check_listing("pkg.7z", members)


@given(st.lists(st.tuples(st.sampled_from("-dlhpcbs"), st.text(max_size=20)), max_size=8))
def test_any_listing_passes_only_with_every_link_inside_the_tree(rows: list[tuple[str, str]]) -> None:
    tried()
    text = "".join(
        f"Path = m{i}\nSize = 1\nMode = {k}rw-r--r--\n" + (f"Symbolic Link = {t}\n" if k == "l" and t else "")
        for i, (k, t) in enumerate(rows)
    )
    members = parse_7zz_listing(text)
    try:
        check_listing("pkg.7z", members)
    except VerificationError:
        return
    for m in members:
        assert m.kind in "-dlh"
        if m.kind in "lh":
            assert m.targets and all(t and not t.startswith("/") and ".." not in t.split("/") for t in m.targets)


def test_parse_error_is_the_only_failure_of_toml_text() -> None:
    tried()
    with pytest.raises(ParseError):
        parse_toml('k = "\\ud83d"\n', "t")  # the escape json.dumps wrote for half of an emoji
