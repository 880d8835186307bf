"""vLLM's cached P2P verdicts on the host (not in a container): where they are and what they say.

vLLM writes ``gpu_p2p_access_cache_for_<CUDA_VISIBLE_DEVICES>.json`` under ``VLLM_CACHE_ROOT``
(vllm/distributed/device_communicators/all_reduce_utils.py: ``os.path.join(envs.VLLM_CACHE_ROOT,
f"gpu_p2p_access_cache_for_{cuda_visible_devices}.json")``; ``VLLM_CACHE_ROOT`` defaults to
``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``) and reads it instead of testing again, so a verdict written
while P2P worked "outlives whatever broke it" (club-3090 docs/PCIE_P2P.md section 7).

Where fwman looks, and why: the ``VLLM_CACHE_ROOT`` (or ``XDG_CACHE_HOME``) that a model server's unit or
environment file given to ``fwman doctor`` sets; root's ``/root/.cache/vllm``; and ``~/.cache/vllm`` of every
home directory under ``/home`` (owners run vLLM from their own venvs: club-3090's guides clear
``~/.cache/vllm/gpu_p2p_access_cache_for_*.json``). Service accounts with homes elsewhere are found through
their unit's ``VLLM_CACHE_ROOT`` (``--unit``), not by walking the password database. Containers' caches are
read by the ``containers`` step (:mod:`fwman.platform.containers`), whose parser this reuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import FwmanError
from fwman.host.base import Host
from fwman.host.capped import read_text_capped
from fwman.platform.containers import MAX_VLLM_CACHE, parse_vllm_cache, vllm_cache_dir

PREFIX = "gpu_p2p_access_cache_for_"
ROOT_CACHE = "/root/.cache/vllm"
HOMES = "/home"


@dataclass(frozen=True)
class HostVllmCache:
    """One cache file: its path, the devices in its name (``0,1``), the verdicts (``{"0->1": True}``) and the
    place it came from (``VLLM_CACHE_ROOT of /etc/systemd/system/vllm.service``, ``root's home``)."""

    path: str
    devices: str
    verdicts: dict[str, bool]
    found_by: str


def cache_dirs(host: Host, environments: list[tuple[str, dict[str, str]]]) -> list[tuple[str, str]]:
    """Return ``(directory, why)`` to look in: each environment's ``VLLM_CACHE_ROOT``/``XDG_CACHE_HOME`` (those
    that set one), root's cache and every ``/home/*/.cache/vllm``; each directory once."""
    out: list[tuple[str, str]] = []
    for where, env in environments:
        if env.get("VLLM_CACHE_ROOT") or env.get("XDG_CACHE_HOME"):
            out.append((vllm_cache_dir(env), f"the cache directory {where} sets"))
    out.append((ROOT_CACHE, "root's home"))
    try:
        homes = sorted(host.listdir(HOMES))
    except (FwmanError, OSError):
        homes = []
    out += [(f"{HOMES}/{h}/.cache/vllm", f"{h}'s home") for h in homes]
    unique: dict[str, str] = {}
    for d, why in out:
        unique.setdefault(d, why)
    return list(unique.items())


def find_caches(host: Host, environments: list[tuple[str, dict[str, str]]]) -> tuple[list[HostVllmCache], list[str]]:
    """Return the cache files found (in directory order, names sorted) and what could not be read
    (``<path> (<why>)``). Never raises."""
    found: list[HostVllmCache] = []
    unreadable: list[str] = []
    for directory, why in cache_dirs(host, environments):
        try:
            names = sorted(n for n in host.listdir(directory) if n.startswith(PREFIX) and n.endswith(".json"))
        except (FwmanError, OSError):
            continue
        for name in names:
            path = f"{directory}/{name}"
            try:
                verdicts = parse_vllm_cache(read_text_capped(host, path, MAX_VLLM_CACHE, "vLLM P2P cache"), path)
            except (FwmanError, OSError) as e:
                unreadable.append(f"{path} ({getattr(e, 'message', e)})")
                continue
            found.append(HostVllmCache(path, name[len(PREFIX) : -len(".json")], verdicts, why))
    return found, unreadable
