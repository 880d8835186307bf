"""``fwman catalog lint``: every problem in a catalog directory (schema, per-board rules, duplicates, index, expiry,
keys document, signatures)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from fwman.core import clock
from fwman.core.errors import MissingError, VerificationError
from fwman.core.signing import TrustedKey
from fwman.firmware.catalog.schema import (
    BOARDS_DIR,
    INDEX_NAME,
    MAX_BOARD_FILE,
    SIG_NAME,
    Board,
    ImageStatus,
    error_location,
    error_text,
    load_toml,
    parse_index,
)
from fwman.firmware.catalog.signing import (
    KEYS_NAME,
    KEYS_SIG_NAME,
    MAX_KEYS_FILE,
    KeysDocument,
    parse_keys,
    verify_catalog_index,
    verify_keys_document,
)
from fwman.firmware.catalog.sources import source_issues
from fwman.firmware.catalog.tree import CatalogTree, bundled_tree


class LintIssue(BaseModel):
    """One lint problem: ``error`` fails the lint (exit 4), ``warning`` does not."""

    model_config = ConfigDict(frozen=True)

    level: Literal["error", "warning"]
    file: str
    where: str  # the key path inside the file ("images[1].md5"), empty for the whole file
    message: str


def _error(file: str, where: str, message: str) -> LintIssue:
    """Return an ``error`` issue in ``file`` at key path ``where``."""
    return LintIssue(level="error", file=file, where=where, message=message)


def _warning(file: str, where: str, message: str) -> LintIssue:
    """Return a ``warning`` issue in ``file`` at key path ``where``."""
    return LintIssue(level="warning", file=file, where=where, message=message)


def lint_directory(path: Path | CatalogTree) -> list[LintIssue]:
    """Return every problem in the catalog directory ``path`` (boards, index, duplicates), errors first.

    ``path`` is a :class:`CatalogTree` (a bare Path: fwman's bundled data). Never raises for a bad catalog:
    everything wrong is an issue. The signature is checked by :func:`lint_signature` (it needs the trusted keys).
    """
    tree = bundled_tree(path)
    issues: list[LintIssue] = []
    if not tree.is_dir(BOARDS_DIR):
        return [_error(str(tree.path), "", f"no {BOARDS_DIR}/ directory")]
    names = tree.names(BOARDS_DIR)
    loaded: dict[str, Board] = {}
    for name in names:
        rel = f"{BOARDS_DIR}/{name}"
        if not name.endswith(".toml"):
            issues.append(_warning(rel, "", "not a .toml file: ignored"))
            continue
        board = _lint_board_file(tree.read(rel), rel, issues)
        if board is not None:
            loaded[rel] = board
    _lint_across(loaded, issues)
    _lint_index(tree, names, issues)
    return sorted(issues, key=lambda i: (i.level != "error", i.file, i.where))


def lint_board_bytes(data: bytes, rel: str) -> list[LintIssue]:
    """Return the problems in one board file's bytes (schema and per-board rules)."""
    issues: list[LintIssue] = []
    board = _lint_board_file(data, rel, issues)
    if board is not None:
        _lint_across({rel: board}, issues)
    return issues


def _lint_board_file(data: bytes, rel: str, issues: list[LintIssue]) -> Board | None:
    def err(where: str, message: str) -> None:
        issues.append(_error(rel, where, message))

    def warn(where: str, message: str) -> None:
        issues.append(_warning(rel, where, message))

    if len(data) > MAX_BOARD_FILE:
        err("", f"larger than {MAX_BOARD_FILE} bytes")
        return None
    try:
        raw = load_toml(data, rel)
    except VerificationError as e:
        err("", e.message.removeprefix(f"{rel}: "))
        return None
    try:
        board = Board.model_validate(raw)
    except ValidationError as e:
        for error in e.errors():
            err(error_location(error["loc"]), error_text(error))
        return None
    stem = rel.rsplit("/", 1)[-1].removesuffix(".toml")
    if stem != board.pci.file_stem:
        err("pci", f"file must be named {board.pci.file_stem}.toml (its PCI IDs)")
    if not board.images:
        warn("images", "no images listed")
    versions = {i.version for i in board.images}
    for n, image in enumerate(board.images):
        where = f"images[{n}]"
        if image.status is ImageStatus.CURRENT and not image.has_hash:
            err(f"{where}.status", "a current image needs md5 or sha256; without one it is `unverified`")
        if image.status is ImageStatus.UNVERIFIED and image.has_hash:
            warn(f"{where}.status", "has a hash: mark it `current` once the hash is checked against the vendor")
        if image.status is ImageStatus.WITHDRAWN and not image.status_reason:
            err(f"{where}.status_reason", "a withdrawn image needs the reason")
        if image.status is ImageStatus.SUPERSEDED and not (image.superseded_by or image.status_reason):
            err(f"{where}.superseded_by", "a superseded image needs superseded_by or a status_reason")
        if image.superseded_by and image.superseded_by not in versions:
            err(f"{where}.superseded_by", f"{image.superseded_by} is not an image of this board")
        if image.superseded_by == image.version:
            err(f"{where}.superseded_by", "an image cannot supersede itself")
        if image.has_hash and image.size is None:
            warn(f"{where}.size", "size unknown: downloads are capped at the default limit instead")
    for level, where, message in source_issues(board, rel):
        (err if level == "error" else warn)(where, message)
    return board


def _lint_across(loaded: dict[str, Board], issues: list[LintIssue]) -> None:
    by_key: dict[str, str] = {}
    for rel, board in loaded.items():
        if board.key in by_key:
            issues.append(_error(rel, "pci", f"duplicate board {board.key} (also in {by_key[board.key]})"))
        by_key.setdefault(board.key, rel)
    seen_hashes: dict[str, str] = {}
    for rel, board in loaded.items():
        names: dict[str, str] = {}
        for n, image in enumerate(board.images):
            where = f"images[{n}]"
            if image.file_name in names:
                issues.append(
                    _error(rel, f"{where}.file", f"file name {image.file_name} is used by {names[image.file_name]} too")
                )
            names[image.file_name] = image.version
            for kind, value in (("md5", image.md5), ("sha256", image.sha256)):
                if not value:
                    continue
                label = f"{board.subsystem}/{image.version}"
                other = seen_hashes.get(value)
                if other is not None and other != label:
                    issues.append(
                        _error(rel, f"{where}.{kind}", f"duplicate hash: {label} has the same {kind} as {other}")
                    )
                seen_hashes[value] = label


def _lint_index(tree: CatalogTree, names: list[str], issues: list[LintIssue]) -> None:
    if not tree.is_file(INDEX_NAME):
        # an error (docs/catalog-format.md): an unsigned catalog is never installed, so lint must not pass it
        issues.append(_error(INDEX_NAME, "", "no index: run `fwman catalog sign --key FILE`"))
        return
    try:
        index = parse_index(tree.read(INDEX_NAME))
    except VerificationError as e:
        issues.append(_error(INDEX_NAME, "", e.message))
        return
    _lint_expiry(INDEX_NAME, "the index", index.expires, index.expires_at, issues)
    listed = {f.path: f for f in index.files}
    present = {f"{BOARDS_DIR}/{name}" for name in names if name.endswith(".toml")}
    for rel in sorted(present - listed.keys()):
        issues.append(_error(INDEX_NAME, "files", f"{rel} is not in the index: re-sign"))
    for rel in sorted(listed.keys() - present):
        issues.append(_error(INDEX_NAME, "files", f"{rel} is listed but missing"))
    for rel in sorted(present & listed.keys()):
        data = tree.read(rel)
        if hashlib.sha256(data).hexdigest() != listed[rel].sha256 or len(data) != listed[rel].size:
            issues.append(_error(INDEX_NAME, "files", f"{rel} changed since the index was signed: re-sign"))


#: an expiry closer than this is a warning: the maintainers should re-sign before it passes
EXPIRY_WARNING = timedelta(days=30)


def _lint_expiry(file: str, what: str, expires: str | None, at: datetime | None, issues: list[LintIssue]) -> None:
    if expires is None or at is None:
        issues.append(_error(file, "expires", f"{what} has no expiry (version 1): re-sign with `fwman catalog sign`"))
        return
    now = clock.now_utc()
    if now >= at:
        issues.append(_error(file, "expires", f"{what} expired on {expires}: re-sign it"))
    elif at - now < EXPIRY_WARNING:
        issues.append(_warning(file, "expires", f"{what} expires on {expires}: re-sign it soon"))


@dataclass
class TrustCheck:
    """What ``lint_signature`` found: the problems, the key that signed the index, the keys document used."""

    issues: list[LintIssue]
    key: TrustedKey | None = None
    keys: KeysDocument | None = None
    root: TrustedKey | None = None  # the root key that signed ``keys``


def lint_signature(path: Path | CatalogTree, roots: list[TrustedKey], admin: list[TrustedKey]) -> TrustCheck:
    """Return the trust problems of the catalog directory ``path``, checked as ``catalog update`` checks them.

    ``keys.json`` (when present) must be signed by one of ``roots`` and not expired (a warning within 30 days);
    ``index.json.sig`` must verify with a catalog key it names that is valid now, or with one of ``admin``; a
    retired key is an error naming its retirement. No index: nothing to check (``lint_directory`` reports it).
    Never raises for a bad catalog.
    """
    tree = bundled_tree(path)
    check = TrustCheck([])
    now = clock.now_utc()
    if tree.is_file(KEYS_NAME):
        try:
            data = tree.read(KEYS_NAME, MAX_KEYS_FILE)
            if not tree.is_file(KEYS_SIG_NAME):
                check.keys = parse_keys(data)
                check.issues.append(_error(KEYS_SIG_NAME, "", "missing: run `fwman catalog keys sign`"))
            else:
                # an expired document is reported below, as lint reports an expired index
                check.keys, check.root = verify_keys_document(
                    data, tree.read(KEYS_SIG_NAME, MAX_KEYS_FILE), roots, None
                )
            _lint_expiry(KEYS_NAME, "the keys document", check.keys.expires, check.keys.expires_at, check.issues)
        except (VerificationError, MissingError) as e:
            check.issues.append(_error(KEYS_SIG_NAME, "", e.message))
            check.keys = None
    if not tree.is_file(INDEX_NAME):
        return check
    if not tree.is_file(SIG_NAME):
        check.issues.append(_error(SIG_NAME, "", "missing: run `fwman catalog sign`"))
        return check
    try:
        check.key = verify_catalog_index(
            tree.read(INDEX_NAME), tree.read(SIG_NAME), check.keys, admin, now, doc_origin=str(tree / KEYS_NAME)
        )
    except (VerificationError, MissingError) as e:
        check.issues.append(_error(SIG_NAME, "", e.message))
    return check
