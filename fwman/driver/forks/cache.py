"""The branch cache, ``/var/cache/fwman/branches.json``: every live listing with the time it was fetched, and
the reads of branch trees per commit. A fork that cannot be listed live is shown from it, with its age.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fwman.core import paths
from fwman.core.errors import HostChangeError, MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver.forks.model import Fork, ForkBranches
from fwman.host.base import Host
from fwman.host.capped import read_capped

#: the branch cache is read up to this; a larger file (one written before answers were capped) is unreadable,
#: hence empty, and the next live listing rewrites it. A full listing is at most _MAX_PAGES pages of 100 names
#: of at most 255 characters: about 1.3 MB per fork.
MAX_CACHE_BYTES = 16 << 20


def _read_cache(host: Host) -> Any:
    """Return the branch cache file's JSON document, or None when there is none, it is over MAX_CACHE_BYTES or
    it does not parse. Never raises."""
    try:
        if not host.exists(paths.BRANCH_CACHE_FILE):
            return None
        return parse_json(read_capped(host, paths.BRANCH_CACHE_FILE, MAX_CACHE_BYTES, "branch cache"), "branch cache")
    except (MissingError, NotRecordedError, ParseError):
        return None


def load_cache(host: Host) -> dict[str, dict[str, Any]]:
    """Return the cached listings keyed by URL ({} when there is no readable cache, or it is over
    MAX_CACHE_BYTES). Never raises."""
    data = _read_cache(host)
    entries = data.get("forks") if isinstance(data, dict) else None
    return {k: v for k, v in entries.items() if isinstance(v, dict)} if isinstance(entries, dict) else {}


def load_trees(host: Host) -> dict[str, dict[str, Any]]:
    """Return the cached reads of branch trees, {commit: {"version", "date", "error"}} ({} when none or
    unreadable). Never raises."""
    data = _read_cache(host)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, dict):
        return {}
    return {k: v for k, v in trees.items() if isinstance(v, dict) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", k)}


def save_cache(host: Host, listings: Sequence[ForkBranches], trees: Mapping[str, Any] | None = None) -> str | None:
    """Merge live ``listings`` and the tree reads ``trees`` ({commit: ...}) into the cache file. Returns None, or
    why it could not be written."""
    entries = load_cache(host)
    all_trees = load_trees(host)
    all_trees.update(trees or {})
    for f in listings:
        if f.source in ("git", "api") and f.fetched_at is not None:
            entries[f.url if f.donor is None else Fork(f.fork, f.url, f.donor).cache_key] = {
                "fork": f.fork,
                "branches": f.branches,
                "commits": f.commits,
                "source": f.source,
                "fetched_at": f.fetched_at.isoformat(),
            }
    doc = {"format": "fwman-branch-cache", "version": 1, "forks": entries, "trees": all_trees}
    try:
        host.write_bytes(paths.BRANCH_CACHE_FILE, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    except (OSError, HostChangeError) as e:
        return f"cannot write {paths.BRANCH_CACHE_FILE}: {e.strerror or e}"
    return None
