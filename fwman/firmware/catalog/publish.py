"""Publishing the catalog: a new ``index.json`` for a catalog directory that lints clean, signed by the maintainer.

Kept apart from :mod:`fwman.firmware.catalog.signing` (keys, signatures, verification) because publishing needs
the lint and lint needs signature verification: one direction each, no circle.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fwman.core.errors import UsageError, VerificationError
from fwman.core.resources import read_data
from fwman.firmware.catalog.signing import sign_index
from fwman.host.base import Host


def make_index(directory: Path, date: str, serial: int | None = None) -> bytes:
    """Return the bytes of a new ``index.json`` for the catalog in ``directory``.

    Lists every ``boards/*.toml`` with its SHA-256 and size. ``serial`` defaults to the previous index's serial
    plus one (1 for a first index); a given serial must be higher than the previous one. Raises UsageError for
    a serial that does not grow, VerificationError when a board file is invalid (a catalog that does not lint
    clean is never signed).
    """
    from fwman.firmware.catalog.lint import lint_directory
    from fwman.firmware.catalog.schema import BOARDS_DIR, INDEX_NAME, CatalogIndex, IndexFile, parse_index

    previous = 0
    if (directory / INDEX_NAME).is_file():
        previous = parse_index(read_data(directory / INDEX_NAME)).serial
    if serial is None:
        serial = previous + 1
    elif serial <= previous:
        raise UsageError(f"serial {serial} is not higher than the current index's {previous}")
    errors = [i for i in lint_directory(directory) if i.level == "error" and i.file != INDEX_NAME]
    if errors:
        first = errors[0]
        raise VerificationError(
            f"{first.file}: {first.where + ': ' if first.where else ''}{first.message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            hint="fix it (see `fwman catalog lint`) before signing",
        )
    files = []
    for path in sorted((directory / BOARDS_DIR).glob("*.toml")):
        data = read_data(path)
        files.append(
            IndexFile(path=f"{BOARDS_DIR}/{path.name}", sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        )
    return CatalogIndex(serial=serial, date=date, files=files).to_json()


def sign_directory(local: Host, directory: Path, key: Ed25519PrivateKey, date: str, serial: int | None = None) -> bytes:
    """Write a new ``index.json`` (:func:`make_index`) and its signature into catalog ``directory``; return the index.

    ``local`` is the machine the maintainer's working tree is on (never a ``--root`` or snapshot). Raises as
    :func:`make_index`; OSError when the files cannot be written.
    """
    from fwman.firmware.catalog.schema import INDEX_NAME, SIG_NAME

    index_bytes = make_index(directory, date, serial)
    sig_bytes = sign_index(index_bytes, key)
    local.write_bytes(str(directory / INDEX_NAME), index_bytes)
    local.write_bytes(str(directory / SIG_NAME), sig_bytes)
    return index_bytes
