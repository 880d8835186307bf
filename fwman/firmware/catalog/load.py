"""Loading the VBIOS catalog in use, and finding entries in it.

Two copies can exist: the one bundled with fwman (the ``catalog/`` directory next to the package; trusted as installed)
and the local copy that ``fwman catalog update`` installs under ``/var/lib/fwman/catalog/`` (its signature was verified
when it was installed). The copy with the higher serial is used; the local one wins a tie."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fwman.core import clock, paths
from fwman.core.errors import MissingError, NotRecordedError, UsageError, VerificationError
from fwman.core.resources import bundled, is_data_dir, is_data_file, list_data, read_data
from fwman.firmware.catalog.local import load_local_entries
from fwman.firmware.catalog.overrides import HashOverride, find_override, load_overrides
from fwman.firmware.catalog.schema import (
    BOARDS_DIR,
    INDEX_NAME,
    MAX_BOARD_FILE,
    Board,
    CatalogImage,
    CatalogIndex,
    parse_board,
    parse_index,
    parse_timestamp,
)
from fwman.firmware.catalog.signing import KEYS_NAME, KEYS_SIG_NAME, MAX_KEYS_FILE, KeysDocument, RetiredKey, parse_keys
from fwman.host.base import Host

#: the catalog bundled with fwman: ``catalog/`` of the source tree, or ``<prefix>/share/fwman/catalog`` when installed
BUNDLED_CATALOG = bundled("catalog")


@dataclass(frozen=True)
class CatalogEntry:
    """One image of one board: what ``BOARD/VERSION`` names."""

    board: Board
    image: CatalogImage
    #: a vendor MD5 the owner recorded on this host for an image whose catalog hash is unknown
    override: HashOverride | None = None
    #: the board comes from a local entry (``/etc/fwman/catalog.d``, unsigned), not the curated catalog
    local: bool = False

    @property
    def ref(self) -> str:
        """Return ``subvendor:subdevice/VERSION``, the form ``fwman fetch`` takes."""
        return f"{self.board.subsystem}/{self.image.version}"

    @property
    def label(self) -> str:
        """Return the ref as cited to the user: ``ref (local entry)`` for a local entry."""
        return f"{self.ref} (local entry)" if self.local else self.ref

    @property
    def hash_origin(self) -> str:
        """Return where this entry's hashes come from: ``catalog`` or ``local entry``."""
        return "local entry" if self.local else "catalog"


@dataclass
class Catalog:
    """The catalog in use: its boards, and where it came from."""

    boards: list[Board]
    source: str  # "bundled", "local", or "directory"
    location: str
    serial: int | None = None
    date: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the index's expiry (``YYYY-MM-DDTHH:MM:SSZ``); None for an index without one
    expires: str | None = None
    #: owner-supplied vendor MD5s on the host (``fwman fetch --expect-md5``); attached to the entries they cover
    overrides: list[HashOverride] = field(default_factory=list)
    #: PCI keys of the boards that come from local entries (``fwman catalog add-local``) -> their file
    local_files: dict[str, str] = field(default_factory=dict)

    def is_local(self, board: Board) -> bool:
        """Return True when ``board`` comes from a local entry, not the curated catalog."""
        return board.key in self.local_files

    def entry_for(self, board: Board, image: CatalogImage) -> CatalogEntry:
        """Return the entry for ``image`` of ``board`` (with its override and local mark)."""
        return CatalogEntry(board, image, find_override(self.overrides, board.key, image.version), self.is_local(board))

    def board_for(self, vendor: str, device: str, subsystem_vendor: str, subsystem_device: str) -> Board | None:
        """Return the board with exactly these PCI IDs (lower-case hex), or None. Never a near match."""
        key = f"{vendor}:{device}:{subsystem_vendor}:{subsystem_device}".lower()
        return next((b for b in self.boards if b.key == key), None)

    def find_board(self, ref: str) -> Board:
        """Return the board named by ``ref``: ``3842:3987``, ``10de:2204:3842:3987`` or ``10de-2204-3842-3987``.

        Raises UsageError when none (or, for a bare subsystem, more than one) matches.
        """
        wanted = ref.strip().lower().replace("-", ":")
        matches = [b for b in self.boards if wanted in (b.key, b.subsystem)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UsageError(
                f"{ref} names {len(matches)} boards", hint="give all four IDs: vendor:device:subvendor:subdevice"
            )
        known = ", ".join(sorted(b.subsystem for b in self.boards)) or "none"
        raise UsageError(f"no catalog board {ref}", hint=f"known subsystems: {known} (see `fwman catalog list`)")

    def entry(self, ref: str) -> CatalogEntry:
        """Return the entry named ``BOARD/VERSION`` (e.g. ``3842:3987/94.02.42.80.27``). Raises UsageError."""
        board_ref, sep, version = ref.partition("/")
        if not sep or not version:
            raise UsageError(f"{ref}: expected BOARD/VERSION", hint="e.g. 3842:3987/94.02.42.80.27")
        board = self.find_board(board_ref)
        image = board.image(version)
        if image is None:
            versions = ", ".join(i.version for i in board.images_newest_first()) or "none"
            raise UsageError(f"{board.subsystem} has no image {version}", hint=f"known versions: {versions}")
        return self.entry_for(board, image)

    def board_entries(self, board: Board) -> list[CatalogEntry]:
        """Return ``board``'s images as entries (with the host's recorded vendor MD5s), newest first."""
        return [self.entry_for(board, i) for i in board.images_newest_first()]

    def entries(self) -> list[CatalogEntry]:
        """Return every (board, image) pair, boards in key order, images newest first."""
        return [e for b in sorted(self.boards, key=lambda b: b.key) for e in self.board_entries(b)]

    def describe(self) -> str:
        """Return one line saying which catalog this is."""
        serial = f"serial {self.serial}" if self.serial is not None else "no index"
        date = f", {self.date}" if self.date else ""
        expires = f", expires {self.expires[:10]}" if self.expires else ""
        return f"{self.source} catalog ({serial}{date}{expires}) at {self.location}"

    def summary(self) -> dict[str, Any]:
        """Return the JSON form of where this catalog came from."""
        keys = ("source", "location", "serial", "date", "expires")
        return {**{k: getattr(self, k) for k in keys}, "notes": list(self.notes)}


class _Reader(Protocol):
    def __call__(self, relpath: str, limit: int) -> bytes: ...


def _load_tree(read: _Reader, names: Callable[[], list[str]], where: str) -> tuple[CatalogIndex | None, list[Board]]:
    """Load an index (if any) and the boards it lists, checking each file against its hash in the index.

    Without an index (a maintainer's working directory), every ``boards/*.toml`` is loaded.
    """
    try:
        index_bytes: bytes | None = read(INDEX_NAME, 1024 * 1024)
    except MissingError:
        index_bytes = None
    if index_bytes is None:
        return None, [
            parse_board(read(f"{BOARDS_DIR}/{n}", MAX_BOARD_FILE), f"{where}/{BOARDS_DIR}/{n}") for n in names()
        ]
    index = parse_index(index_bytes, f"{where}/{INDEX_NAME}")
    boards = []
    for item in index.files:
        data = read(item.path, MAX_BOARD_FILE + 1)
        if hashlib.sha256(data).hexdigest() != item.sha256:
            if where == paths.LOCAL_CATALOG_DIR:
                # `catalog update` alone needs a configured URL: name what works without one too
                hint = (
                    "the installed catalog was changed after it was signed: install a signed copy again with "
                    f"`fwman catalog update --url URL`, or remove it (rm -r {where}) to use the catalog bundled "
                    "with fwman"
                )
            else:
                hint = f"the catalog in {where} was changed after it was signed: re-sign it (fwman catalog sign)"
            raise VerificationError(f"{where}/{item.path}: SHA-256 does not match {INDEX_NAME}", hint=hint)
        boards.append(parse_board(data, f"{where}/{item.path}"))
    return index, boards


def load_directory(path: Path, source: str = "directory") -> Catalog:
    """Return the catalog in a plain directory (the bundled one, or a maintainer's working copy).

    Package data and maintainer checkouts are fwman's own files, not host state, so they are read directly.
    Raises MissingError when the directory is absent, VerificationError when a file is invalid.
    """
    if not is_data_dir(path):
        raise MissingError(f"no catalog directory at {path}")

    def read(relpath: str, limit: int) -> bytes:
        return read_data(path / relpath, limit)

    def names() -> list[str]:
        return [p.name for p in list_data(path / BOARDS_DIR, "*.toml")]

    index, boards = _load_tree(read, names, str(path))
    if index is None:
        return Catalog(boards, source, str(path))
    return Catalog(boards, source, str(path), index.serial, index.date, expires=index.expires)


def load_host_catalog(host: Host, path: str = paths.LOCAL_CATALOG_DIR) -> Catalog | None:
    """Return the catalog installed at ``path`` on ``host``, or None when there is none (or it was not recorded).

    Raises VerificationError when an installed file does not match the index.
    """
    try:
        if not host.exists(f"{path}/{INDEX_NAME}"):
            return None
    except NotRecordedError:
        return None

    def read(relpath: str, limit: int) -> bytes:
        return host.read_bytes(f"{path}/{relpath}", limit=limit)

    index, boards = _load_tree(read, lambda: [], path)
    assert index is not None
    return Catalog(boards, "local", path, index.serial, index.date, expires=index.expires)


def load_catalog(host: Host, bundled: Path | None = None) -> Catalog:
    """Return the catalog to use on ``host``: the local copy or the bundled one, whichever has the higher serial.

    The host's hash overrides are attached (see :class:`CatalogEntry`). On a snapshot that did not record
    ``/var/lib/fwman`` the bundled catalog is used and a note says so. Raises MissingError when neither copy
    exists, VerificationError when the chosen one is damaged or the overrides contradict each other.
    """
    bundled = bundled or BUNDLED_CATALOG
    notes = []
    try:
        host.exists(f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}")
    except NotRecordedError:
        notes.append(
            f"{host.description} did not record {paths.LOCAL_CATALOG_DIR}: using the catalog bundled with fwman"
        )
    local = load_host_catalog(host)
    packaged = load_directory(bundled, "bundled") if is_data_dir(bundled) else None
    if local is None and packaged is None:
        raise MissingError("no VBIOS catalog installed", hint="install one with `fwman catalog update --url URL`")
    chosen = local or packaged
    assert chosen is not None
    if local is not None and packaged is not None and (packaged.serial or 0) > (local.serial or 0):
        notes.append(f"local copy at {local.location} (serial {local.serial}) is older: not used")
        chosen = packaged
    chosen.notes.extend(notes)
    _note_expiry(chosen)
    chosen.overrides = load_overrides(host)
    _add_local_entries(host, chosen)
    return chosen


def _note_expiry(catalog: Catalog) -> None:
    """Add a note when the catalog in use has expired.

    A note, not a refusal: the installed copy was verified when it arrived, and the bundled one ships with the
    package, so refusing it would leave an offline host with no catalog at all. ``catalog update`` is where
    expired metadata is refused (docs/signing.md).
    """
    if catalog.expires is not None and clock.now_utc() >= parse_timestamp(catalog.expires):
        catalog.notes.append(
            f"the {catalog.source} catalog expired on {catalog.expires}: newer advice may exist; "
            "run `fwman catalog update`"
        )


@dataclass
class InstalledKeys:
    """The keys document in force on a host: the installed or bundled one with the higher serial."""

    doc: KeysDocument | None
    data: bytes | None  # its exact bytes
    origin: str
    #: the installed local catalog directory, when the document in force is the one there
    local_dir: str | None = None
    #: (keys.json, keys.json.sig) of the local copy, carried forward when a catalog is installed without a new one
    local_pair: tuple[bytes, bytes] | None = None
    #: every key id retired by either copy (a retirement is never undone by a copy that omits it)
    retired: list[RetiredKey] = field(default_factory=list)


def installed_keys(host: Host, bundled: Path | None = None) -> InstalledKeys:
    """Return the keys document in force on ``host`` (both copies were verified when they were installed).

    Raises VerificationError when an installed keys document is malformed.
    """
    bundled = bundled or BUNDLED_CATALOG
    found: list[tuple[KeysDocument, bytes, str, tuple[bytes, bytes] | None]] = []
    local = f"{paths.LOCAL_CATALOG_DIR}/{KEYS_NAME}"
    try:
        if host.exists(local):
            data = host.read_bytes(local, limit=MAX_KEYS_FILE)
            sig = host.read_bytes(f"{paths.LOCAL_CATALOG_DIR}/{KEYS_SIG_NAME}", limit=MAX_KEYS_FILE)
            found.append((parse_keys(data, local), data, local, (data, sig)))
    except (MissingError, NotRecordedError):  # not recorded on a snapshot, or a half-written copy: none there
        pass
    if is_data_file(bundled / KEYS_NAME):
        data = read_data(bundled / KEYS_NAME, MAX_KEYS_FILE)
        found.append((parse_keys(data, str(bundled / KEYS_NAME)), data, str(bundled / KEYS_NAME), None))
    retired = {r.key_id: r for doc, *_ in found for r in doc.retired}
    if not found:
        return InstalledKeys(None, None, "none", retired=[])
    # the local copy wins a tie (it is listed first)
    doc, data, origin, pair = max(found, key=lambda f: (f[0].serial, f[3] is not None))
    in_force = paths.LOCAL_CATALOG_DIR if pair else None
    return InstalledKeys(doc, data, origin, in_force, pair, sorted(retired.values(), key=lambda r: r.key_id))


def _add_local_entries(host: Host, catalog: Catalog) -> None:
    """Add the host's local entries to ``catalog``, marked local; a curated board is never shadowed."""
    entries, notes = load_local_entries(host)
    catalog.notes.extend(notes)
    for entry in entries:
        if catalog.board_for(*entry.board.key.split(":")) is not None:
            catalog.notes.append(f"local entry {entry.path} not used: the catalog knows {entry.board.key}")
            continue
        catalog.boards.append(entry.board)
        catalog.local_files[entry.board.key] = entry.path


class RomLike(Protocol):
    """The parts of a parsed ROM (``fwman.firmware.rom.parse.RomImage``) the catalog checks look at."""

    @property
    def md5(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def chain_sha256(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def subsystem(self) -> str | None: ...


def find_entry_for_rom(catalog: Catalog, image: RomLike, device: str | None = None) -> CatalogEntry | None:
    """Return the catalog entry ``image`` is, or None.

    A hash match (file SHA-256, vendor MD5 or chain SHA-256) wins; otherwise subsystem plus version (the
    version string alone never identifies an image, but it finds the entry whose hash is then compared).
    """
    for entry in catalog.entries():
        i = entry.image
        if (
            (i.sha256 and i.sha256 == image.sha256)
            or (i.md5 and i.md5 == image.md5)
            or (i.chain_sha256 and i.chain_sha256 == image.chain_sha256)
        ):
            return entry
    if image.subsystem is None or image.version is None:
        return None
    for entry in catalog.entries():
        same = entry.board.subsystem == image.subsystem and entry.image.version == image.version.upper()
        if same and (device is None or entry.board.pci.device == device):
            return entry
    return None
