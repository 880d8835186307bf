"""``fwman doctor``'s vLLM cache step on the host: vLLM's ``gpu_p2p_access_cache_for_<devices>.json`` files
found where a host's model server keeps them (a unit's VLLM_CACHE_ROOT, root's and each /home user's
~/.cache/vllm) and compared with the record `fwman p2p` wrote on this configuration."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.hostgen.materialize import materialize
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.gpus import MemoryGpus, all_pairs, memory_driver

PREFIX = "gpu_p2p_access_cache_for_"


def _root(tmp_path: Path, *, p2p_ok: bool) -> Path:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    gpus = MemoryGpus(2, peer=all_pairs(2), corrupt={} if p2p_ok else {(0, 1): [3]})
    r = FwmanEnv(cuda_driver=memory_driver(gpus))("--root", str(root), "p2p", "--size", "1", "--repeats", "1")
    assert r.code == (0 if p2p_ok else 4), r.stderr
    return root


def _cache(root: Path, directory: str, devices: str, verdicts: dict[str, bool]) -> str:
    d = root / directory.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{PREFIX}{devices}.json").write_text(json.dumps(verdicts))
    return f"{directory}/{PREFIX}{devices}.json"


def _vllm_findings(root: Path, *extra: str) -> list[dict[str, object]]:
    r = FwmanEnv()("--root", str(root), "doctor", "--json", *extra)
    doc = json.loads(r.stdout)
    steps = [s for s in doc["steps"] if s["id"] == "vllm.cache"]
    return [f for s in steps for f in s["findings"]]


def test_a_cache_that_says_no_after_fwman_verified_p2p_is_named_stale_with_the_command_to_clear_it(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path, p2p_ok=True)
    stale = _cache(root, "/root/.cache/vllm", "0,1", {"0->1": False, "1->0": False, "0->0": True, "1->1": True})
    agrees = _cache(root, "/home/alice/.cache/vllm", "0,1", {"0->1": True, "1->0": True})
    unit = root / "etc/systemd/system/vllm.service"
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Service]\nEnvironment=VLLM_CACHE_ROOT=/srv/vllm/cache\nExecStart=/usr/bin/vllm serve m\n")
    by_unit = _cache(root, "/srv/vllm/cache", "2,3", {"0->1": False})
    findings = _vllm_findings(root, "--unit", "/etc/systemd/system/vllm.service")
    by_path = {next(p for p in (stale, agrees, by_unit) if p in str(f["message"])): f for f in findings}
    assert set(by_path) == {stale, agrees, by_unit}
    assert by_path[stale]["severity"] == "warn" and "says no for 0->1, 1->0" in str(by_path[stale]["message"])
    assert "the cache is stale" in str(by_path[stale]["message"]) and "root's home" in str(by_path[stale]["message"])
    assert f"`rm '{stale}'`" in str(by_path[stale]["fix"])
    assert by_path[agrees]["severity"] == "ok"
    assert by_path[by_unit]["severity"] == "warn"
    assert "the cache directory /etc/systemd/system/vllm.service sets" in str(by_path[by_unit]["message"])


def test_a_cache_that_says_yes_after_fwman_s_test_failed_is_a_warning(tmp_path: Path) -> None:
    root = _root(tmp_path, p2p_ok=False)
    path = _cache(root, "/root/.cache/vllm", "0,1", {"0->1": True, "1->0": True})
    [f] = _vllm_findings(root)
    assert f["severity"] == "warn" and "FAILED on this configuration" in str(f["message"]) and path in str(f["fix"])


def test_no_cache_no_step_and_a_foreign_file_is_said(tmp_path: Path) -> None:
    root = _root(tmp_path, p2p_ok=True)
    assert _vllm_findings(root) == []
    d = root / "root/.cache/vllm"
    d.mkdir(parents=True)
    (d / f"{PREFIX}0,1.json").write_text('{"not": "a cache"}')
    [f] = _vllm_findings(root)
    assert f["severity"] == "info" and "not readable" in str(f["message"]) and f"{PREFIX}0,1.json" in str(f["message"])
