"""Rows 2 and 3: decompression is bounded everywhere (fwman/core/bounded.py owns the limits). 3.1 MB of
concatenated gzip members (3 GB inflated) and a gzip inside a gzip 1,500 times are "unreadable: over N" in
`modules status`, `check-boot` and `metrics write`, under a 2 GB address-space limit, never a MemoryError or a
RecursionError; any bytes given to a decoder give bytes or a ParseError."""

from __future__ import annotations

import bz2
import gzip
import lzma
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fwman.core import bounded
from fwman.core.errors import ParseError
from fwman.driver.boot.initramfs import read_archives
from fwman.driver.kmod.kofile import decompress as ko_decompress
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST, REPO

KVER = "6.8.12-4-pve"  # the example rig's kernel
MEMBER = gzip.compress(b"\0" * (1 << 20), 9)  # 1 MiB of zeros in about 1 KB


def concatenated_members(size: int = 3_100_000) -> bytes:
    """Return ``size`` bytes of gzip members, each inflating to 1 MiB (row 2: about 3 GB in all)."""
    return MEMBER * (size // len(MEMBER))


def nested(depth: int = 1500) -> bytes:
    """Return a gzip inside a gzip ``depth`` times (row 3: 36 KB)."""
    data = b"x"
    for _ in range(depth):
        data = gzip.compress(data)
    return data


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {"members": concatenated_members(), "nested": nested()}


def test_concatenated_members_stop_at_the_limit(bombs: dict[str, bytes]) -> None:
    tried()
    with pytest.raises(bounded.OverLimit, match=r"^over 64 MiB uncompressed \(gzip stream of initramfs\)"):
        read_archives(bombs["members"])


def test_nested_streams_stop_at_the_depth_limit(bombs: dict[str, bytes]) -> None:
    tried()
    with pytest.raises(bounded.OverLimit, match=r"^over 1 level of compression"):
        read_archives(bombs["nested"])


@pytest.mark.parametrize("kind", ["xz", "bzip2", "lzma"])
def test_every_stdlib_format_is_bounded(kind: str) -> None:
    big = b"\0" * (80 << 20)  # 80 MiB: past the 64 MiB floor, and a ratio far past 20:1
    data = {"xz": lzma.compress, "bzip2": bz2.compress, "lzma": lambda b: lzma.compress(b, lzma.FORMAT_ALONE)}[kind](
        big
    )
    tried()
    with pytest.raises(bounded.OverLimit, match=r"^over 64 MiB uncompressed"):
        bounded.decompress(kind, data, bounded.INITRAMFS, "initramfs")


def test_a_module_bomb_is_over_the_module_limit() -> None:
    tried()
    with pytest.raises(bounded.OverLimit, match=r"^over"):
        ko_decompress(concatenated_members(300_000), "nvidia.ko.gz")
    with pytest.raises(bounded.OverLimit, match=r"^over"):
        ko_decompress(lzma.compress(b"\0" * (80 << 20)), "nvidia.ko.xz")


def test_real_streams_within_the_limits_read_as_before() -> None:
    payload = bytes(range(256)) * 4096
    tried(3)
    two = gzip.compress(payload) + b"\0" * 7 + gzip.compress(payload[::-1])  # members, zero padding between
    assert bounded.decompress("gzip", two, bounded.INITRAMFS, "t") == payload + payload[::-1]
    assert bounded.decompress("xz", lzma.compress(payload), bounded.INITRAMFS, "t") == payload
    assert bounded.decompress("bzip2", bz2.compress(payload), bounded.INITRAMFS, "t") == payload


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(["gzip", "xz", "lzma", "bzip2"]), data=st.binary(max_size=2048), cut=st.integers(0, 64))
def test_any_bytes_give_bytes_or_a_parse_error(kind: str, data: bytes, cut: int) -> None:
    tried()
    real = {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress, "lzma": lzma.compress}[kind](data)
    for candidate in (data, real[: max(0, len(real) - cut)], real + data):
        try:
            bounded.decompress(kind, candidate, bounded.INITRAMFS, "t")
        except ParseError:
            pass


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize("bomb", ["members", "nested"])
@pytest.mark.parametrize("command", [("modules", "status"), ("modules", "check-boot"), ("metrics", "write")])
def test_commands_on_a_bomb_initramfs_say_over_under_2_gb(
    tmp_path: Path, bombs: dict[str, bytes], bomb: str, command: tuple[str, ...]
) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/initrd.img-{KVER}").write_bytes(bombs[bomb])
    argv = [sys.executable, "-m", "fwman", "--root", str(root), *command]
    if command[0] == "metrics":
        argv += ["-o", str(tmp_path / "fwman.prom")]
    if command[-1] == "status":
        argv += ["--json"]
    tried()
    r = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=120, preexec_fn=lambda: _limited(2 << 30)
    )
    out = r.stdout + r.stderr
    assert "unexpected" not in out and "Traceback" not in out, out
    assert r.returncode in (0, 3, 4), out  # the command's own verdict on the rest of the host
    if command[-1] == "status":
        assert '"error": "over ' in r.stdout
    if command[0] == "metrics":
        assert r.returncode == 0, out


def test_a_bomb_in_a_snapshot_is_unreadable_in_the_status_table(
    attack: CountingEnv, tmp_path: Path, bombs: dict[str, bytes]
) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/initrd.img-{KVER}").write_bytes(bombs["members"])
    r = attack("--root", str(root), "modules", "status")
    assert r.code == 0, r.stderr
    assert f"initramfs of {KVER}: unreadable: over 64 MiB uncompressed" in r.stdout


@pytest.mark.parametrize("bomb", ["members", "nested"])
def test_modules_import_over_a_bomb_initramfs_is_never_unexpected(
    attack: CountingEnv, tmp_path: Path, bombs: dict[str, bytes], bomb: str
) -> None:
    import hashlib

    from fixtures.tinymod.elfgen import build_elf, modinfo_blob, nvidia_tags
    from fwman.driver.bundle.format import BundleDoc, BundleModule, pack
    from fwman.gpu.kernel_modules import MODULE_NAMES

    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    files = {n: build_elf(modinfo_blob(nvidia_tags("570.86.16", KVER, name=n))) for n in MODULE_NAMES}
    doc = BundleDoc(
        kernel=KVER,
        vermagic=f"{KVER} SMP preempt mod_unload modversions",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
        built_at="2026-12-01T00:00:00+00:00",
    )
    bundle = tmp_path / "p2p.fwbundle"
    bundle.write_bytes(pack(doc.to_json(), files))
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/initrd.img-{KVER}").write_bytes(bombs[bomb])
    r = attack("--root", str(root), "modules", "import", str(bundle))
    assert "unexpected" not in r.stderr, r.stderr  # row 3: it was `unexpected RecursionError`
    assert r.code == 0, r.stderr
    r = attack("--root", str(root), "modules", "status")
    assert f"initramfs of {KVER}: unreadable: over " in r.stdout, r.stdout


class SlowClock:
    """A clock on which every look at the monotonic time finds a minute gone (a decoder that crawls)."""

    def __init__(self) -> None:
        self.ticks = 0.0

    def now_utc(self) -> object:
        from datetime import UTC, datetime

        return datetime(2026, 12, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        self.ticks += 60.0
        return self.ticks

    def sleep(self, seconds: float) -> None:
        self.ticks += seconds


def test_the_time_limit_stops_a_crawling_decompression() -> None:
    from fwman.core import clock

    data = gzip.compress(bytes(range(256)) * 40_000) * 3  # three members: a look at the clock after each chunk
    tried()
    with clock.using(SlowClock()), pytest.raises(bounded.OverLimit, match=r"^over 120 s of decompression"):  # type: ignore[arg-type]
        bounded.decompress("gzip", data, bounded.INITRAMFS, "initramfs")
