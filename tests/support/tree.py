"""What a directory tree holds, to prove a command wrote nothing (or something) under a root."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_digest(root: Path) -> dict[str, str]:
    """Return {relative path: content hash, link target or 'dir'} for everything under ``root``."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = f"-> {os.readlink(p)}"
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
