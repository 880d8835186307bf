"""Issue 37, row 5: a file whose size someone else chooses is read only up to a bound, and refused past it.

Any user can make their ``~/.cache/vllm/gpu_p2p_access_cache_for_0,1.json`` half a gigabyte (a sparse file costs
no disk); ``fwman doctor`` runs as root and read it whole (about 1 GiB at peak; under a memory cap, "unexpected
MemoryError"). A real cache is a few dozen bytes."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from fixtures.hostgen.materialize import materialize
from fwman.host.live import LiveHost
from fwman.reports.doctor.vllm_caches import find_caches
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST

HUGE = 512 << 20
CACHE = "home/mallory/.cache/vllm/gpu_p2p_access_cache_for_0,1.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Return a host tree with one user's vLLM cache grown (sparse) to 512 MiB."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    cache = root / CACHE
    cache.parent.mkdir(parents=True)
    with cache.open("wb") as f:
        f.write(b'{"0->1": true}' + b" " * 64)
        os.truncate(f.fileno(), HUGE)
    return root


def test_a_huge_vllm_cache_is_refused_without_being_read(root: Path) -> None:
    tried()
    tracemalloc.start()
    try:
        found, unreadable = find_caches(LiveHost(str(root)), [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes at peak"  # it was: over 512 MiB (the file, then its text)
    assert found == []
    assert unreadable == [f"/{CACHE} (over 64 KiB (file size of vLLM P2P cache /{CACHE}))"]


def test_doctor_says_which_cache_it_would_not_read(attack: CountingEnv, root: Path) -> None:
    r = attack("--root", str(root), "doctor", "--json")
    assert "unexpected" not in r.stderr and "MemoryError" not in r.stderr
    doc = json.loads(r.stdout)
    said = json.dumps([s for s in doc["steps"] if s["id"] == "vllm.cache"])
    assert f"/{CACHE}" in said and "over 64 KiB" in said, said
