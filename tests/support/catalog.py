"""Builders shared by the catalog, fetch and upgrade tests (plus the checks that the builders build valid things).

Test catalogs are written like a maintainer writes them: TOML board files, an index made by ``make_index`` and
a signature from a key made here (never the maintainer's key: its private half is not in the repository).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fixtures.romgen import RomSpec, build_rom
from fwman.core import paths
from fwman.core.signing import public_pem, sign_document
from fwman.firmware.catalog.publish import make_index

REBAR = "94.02.42.80.27"
LAUNCH = "94.02.26.48.15"
WITHDRAWN = "94.02.42.80.AD"


def rom(version: str = REBAR, subsystem_device: int = 0x3987, **kw: Any) -> bytes:
    """Return a synthetic full dump (fixtures.romgen) of an EVGA 3090 FTW3 Ultra image."""
    return build_rom(RomSpec(version=version, subsystem_device=subsystem_device, **kw))


def md5(data: bytes) -> str:
    """Return the MD5 hex of ``data``."""
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def sha256(data: bytes) -> str:
    """Return the SHA-256 hex of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)


def board_toml(
    images: list[dict[str, Any]],
    subsystem_device: str = "3987",
    extra_board: dict[str, Any] | None = None,
    pci: dict[str, str] | None = None,
) -> str:
    """Return a board file for 10de:2204:3842:<subsystem_device> with ``images`` (dicts of image keys)."""
    ids = {"vendor": "10de", "device": "2204", "subsystem_vendor": "3842", "subsystem_device": subsystem_device}
    ids.update(pci or {})
    lines = ["format = 1", "", "[pci]"]
    lines += [f"{k} = {_value(v)}" for k, v in ids.items()]
    board = {"name": "EVGA GeForce RTX 3090 FTW3 Ultra", "maker": "EVGA", "dual_firmware_switch": True}
    board.update(extra_board or {})
    lines += ["", "[board]"] + [f"{k} = {_value(v)}" for k, v in board.items()]
    for image in images:
        lines += ["", "[[images]]"] + [f"{k} = {_value(v)}" for k, v in image.items()]
    return "\n".join(lines) + "\n"


def seed_images(rebar_image: bytes | None = None) -> list[dict[str, Any]]:
    """Return the 3842:3987 images of the seed case; the ReBAR image gets the hashes of ``rebar_image``."""
    rebar: dict[str, Any] = {"version": REBAR, "status": "unverified", "rebar": True, "power_limit_w": 420}
    if rebar_image is not None:
        rebar.update(status="current", md5=md5(rebar_image), sha256=sha256(rebar_image), size=len(rebar_image))
    return [
        rebar,
        {
            "version": WITHDRAWN,
            "status": "withdrawn",
            "status_reason": "owners reported a lowered power limit",
            "superseded_by": REBAR,
            "rebar": True,
        },
        {"version": LAUNCH, "status": "superseded", "superseded_by": REBAR, "rebar": False},
    ]


#: test indexes and keys documents expire long after any test runs (an expiry test sets its own)
FAR_FUTURE = "2100-01-01T00:00:00Z"


def write_catalog(
    directory: Path,
    boards: dict[str, str],
    key: Ed25519PrivateKey | None = None,
    serial: int = 2,
    date: str = "2026-01-02",
    expires: str = FAR_FUTURE,
) -> Path:
    """Write ``boards`` (file stem -> TOML) into ``directory``, with an index and (given a key) its signature."""
    (directory / "boards").mkdir(parents=True, exist_ok=True)
    for stem, text in boards.items():
        (directory / "boards" / f"{stem}.toml").write_text(text)
    index = make_index(directory, date, serial, expires)
    (directory / "index.json").write_bytes(index)
    if key is not None:
        (directory / "index.json.sig").write_bytes(sign_document(index, key))
    return directory


def trust(root: Path, key: Ed25519PrivateKey, name: str = "test") -> Path:
    """Add ``key``'s public half to ``/etc/fwman/keys.d`` under host root ``root``; return the file."""
    keys = root / "etc/fwman/keys.d"
    keys.mkdir(parents=True, exist_ok=True)
    path = keys / f"{name}.pub"
    path.write_bytes(public_pem(key))
    return path


def write_keys(
    directory: Path,
    root_key: Ed25519PrivateKey,
    catalog_keys: list[Ed25519PrivateKey],
    serial: int = 2,
    retired: dict[str, str] | None = None,
    expires: str = FAR_FUTURE,
    not_before: str = "2020-01-01T00:00:00Z",
    not_after: str = FAR_FUTURE,
) -> Path:
    """Write ``keys.json`` naming ``catalog_keys`` (and ``retired``: key id -> reason), signed by ``root_key``."""
    from fwman.core.signing import load_public_key
    from fwman.firmware.catalog.schema import parse_timestamp
    from fwman.firmware.catalog.signing import KeysDocument, RetiredKey, catalog_key_entry

    named = [
        catalog_key_entry(
            load_public_key(public_pem(k), "test"), parse_timestamp(not_before), parse_timestamp(not_after)
        )
        for k in catalog_keys
    ]
    gone = [RetiredKey(key_id=kid, retired="2026-01-01", reason=why) for kid, why in (retired or {}).items()]
    doc = KeysDocument(serial=serial, date="2026-01-02", expires=expires, keys=named, retired=gone).to_json()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "keys.json").write_bytes(doc)
    (directory / "keys.json.sig").write_bytes(sign_document(doc, root_key))
    return directory


def trust_root(root: Path, key: Ed25519PrivateKey, name: str = "test-root") -> Path:
    """Add ``key``'s public half to ``/etc/fwman/root-keys.d`` under host root ``root``; return the file."""
    keys = root / "etc/fwman/root-keys.d"
    keys.mkdir(parents=True, exist_ok=True)
    path = keys / f"{name}.pub"
    path.write_bytes(public_pem(key))
    return path


def key_id_of(key: Ed25519PrivateKey) -> str:
    """Return the fwman key id of ``key``."""
    from fwman.core.signing import key_id, raw_public

    return key_id(raw_public(key))


def install_local(root: Path, catalog: Path) -> Path:
    """Copy ``catalog`` to the local catalog location under host root ``root`` (as if `catalog update` did)."""
    target = root / paths.LOCAL_CATALOG_DIR.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(catalog, target)
    return target


def seed_catalog(root: Path, rebar_image: bytes | None = None, serial: int = 2) -> Path:
    """Install a local catalog (3842:3987 seed images, ReBAR hashes from ``rebar_image``) under ``root``."""
    src = write_catalog(
        root.parent / f"{root.name}-catalog-src",
        {"10de-2204-3842-3987": board_toml(seed_images(rebar_image))},
        serial=serial,
    )
    return install_local(root, src)


# -- the builders build what the tests rely on ---------------------------------------------------------------
