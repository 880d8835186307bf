"""The curated VBIOS catalog: schema, loading, lookup and lint.

One TOML file per board in ``catalog/boards/``, keyed by PCI IDs (vendor, device, subsystem vendor, subsystem
device); ``catalog/index.json`` lists every file with its SHA-256 plus a serial number and a date, and
``index.json.sig`` signs it (see :mod:`fwman.firmware.catalog.signing`). ``docs/catalog-format.md`` documents the
format.

Two copies can exist: the one bundled with fwman (the ``catalog/`` directory next to the package; trusted as
installed) and the local copy that ``fwman catalog update`` installs under ``/var/lib/fwman/catalog/`` (its
signature was verified when it was installed). The copy with the higher serial is used; the local one wins a tie.

Nothing here invents a fact: a hash, URL or date that is not known is empty, and an image without a hash is
``unverified``.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, UsageError, VerificationError
from fwman.core.findings import Finding, Severity
from fwman.core.resources import bundled
from fwman.firmware.catalog.overrides import HashOverride, find_override, load_overrides
from fwman.host.base import Host

#: where ``fwman catalog update`` installs the verified catalog on a host (a link to ``catalogs/<serial>``)
#: the catalog bundled with fwman: ``catalog/`` of the source tree, or ``<prefix>/share/fwman/catalog`` when installed
BUNDLED_CATALOG = bundled("catalog")

INDEX_NAME = "index.json"
SIG_NAME = "index.json.sig"
BOARDS_DIR = "boards"
INDEX_FORMAT = "fwman-catalog-index"
#: a board file larger than this is not a board file (also the download cap in ``catalog update``)
MAX_BOARD_FILE = 256 * 1024

_HEX4 = re.compile(r"^[0-9a-f]{4}$")
_VERSION = re.compile(r"^[0-9A-F]{2}(\.[0-9A-F]{2}){4}$")
_DATE = re.compile(r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")
_FULL_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")
_BOARD_ID = re.compile(r"^0x[0-9a-f]{4}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DRIVER = re.compile(r"^\d+\.\d+(\.\d+)?$")


class ImageStatus(StrEnum):
    """Where an image stands: only ``current`` and ``unverified`` images are ever recommended."""

    CURRENT = "current"  # recommended; its hash is known
    SUPERSEDED = "superseded"  # a newer image replaces it (still a valid image, e.g. to go back)
    WITHDRAWN = "withdrawn"  # the vendor pulled it: never recommended, never fetched, never flashed
    UNVERIFIED = "unverified"  # would be recommended, but no published hash is known: cannot be flashed yet


def version_key(version: str) -> tuple[int, ...]:
    """Return a sort key for an upper-case VBIOS version (``94.02.42.80.27``): its five hex bytes as ints.

    Raises ValueError on a malformed version (the schema rejects those before this is called).
    """
    return tuple(int(part, 16) for part in version.split("."))


def check_file_name(name: str) -> str | None:
    """Return why ``name`` is not a safe plain file name (no path separators, not hidden), or None if it is."""
    if not name:
        return "is empty"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if name in (".", "..") or name.startswith("."):
        return "starts with a dot"
    if any(ord(c) < 32 for c in name):
        return "contains a control character"
    return None


def check_url(url: str) -> str | None:
    """Return why ``url`` is not an acceptable catalog source (https with a host name), or None if it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme != "https":
        return "is not https"
    if not parts.hostname:
        return "has no host name"
    if any(c.isspace() for c in url):
        return "contains white space"
    return None


class CatalogImage(BaseModel):
    """One published firmware image of a board. Empty strings and ``None`` mean *unknown*."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(description="upper-case VBIOS version, e.g. 94.02.42.80.27")
    status: ImageStatus
    status_reason: str = ""
    status_date: str = ""  # YYYY, YYYY-MM or YYYY-MM-DD; empty when unknown
    release_date: str = ""
    superseded_by: str = ""  # the version that replaces this one
    md5: str = ""  # the vendor-published MD5 of the file
    sha256: str = ""  # SHA-256 of the same file
    chain_sha256: str = ""  # SHA-256 of the option-ROM chain (identifies the firmware inside a card dump)
    size: int | None = Field(default=None, gt=0, le=64 * 1024 * 1024)
    file: str = ""  # the name the image is stored under in the cache (default: <version>.rom)
    urls: list[str] = Field(default_factory=list)
    rebar: bool | None = None  # the image supports Resizable BAR
    max_bar1_bytes: int | None = Field(default=None, gt=0)  # the largest BAR1 the card offers on this image
    power_limit_w: float | None = Field(default=None, gt=0)  # default power limit on this image
    min_driver: str = ""  # the oldest driver that uses what the image is for (e.g. 465.89 for ReBAR)
    notes: str = ""
    #: public pages that state this image's facts (https); required from board format 2 on
    sources: list[str] = Field(default_factory=list)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _VERSION.match(v):
            raise ValueError("must be five upper-case two-digit hex groups, e.g. 94.02.42.80.27")
        return v

    @field_validator("superseded_by")
    @classmethod
    def _superseded_by(cls, v: str) -> str:
        if v and not _VERSION.match(v):
            raise ValueError("must be a version like 94.02.42.80.27")
        return v

    @field_validator("status_date", "release_date")
    @classmethod
    def _date(cls, v: str) -> str:
        if v and not _DATE.match(v):
            raise ValueError("must be YYYY, YYYY-MM or YYYY-MM-DD (empty when unknown)")
        return v

    @field_validator("md5")
    @classmethod
    def _md5(cls, v: str) -> str:
        if v and not _MD5.match(v):
            raise ValueError("malformed MD5: must be 32 lower-case hex digits (empty when unknown)")
        return v

    @field_validator("sha256", "chain_sha256")
    @classmethod
    def _sha256(cls, v: str) -> str:
        if v and not _SHA256.match(v):
            raise ValueError("malformed SHA-256: must be 64 lower-case hex digits (empty when unknown)")
        return v

    @field_validator("file")
    @classmethod
    def _file(cls, v: str) -> str:
        if v and (why := check_file_name(v)):
            raise ValueError(f"file name {why}")
        return v

    @field_validator("urls", "sources")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if why := check_url(url):
                raise ValueError(f"{url!r} {why}")
        return v

    @field_validator("min_driver")
    @classmethod
    def _driver(cls, v: str) -> str:
        if v and not _DRIVER.match(v):
            raise ValueError("must be a driver version like 465.89")
        return v

    @property
    def has_hash(self) -> bool:
        """Return True when a published hash (MD5 or SHA-256) is known for the file."""
        return bool(self.md5 or self.sha256)

    @property
    def file_name(self) -> str:
        """Return the name the image has in the cache."""
        return self.file or f"{self.version}.rom"

    @property
    def recommendable(self) -> bool:
        """Return True when the image may be recommended (``current``, or ``unverified`` pending a hash)."""
        return self.status in (ImageStatus.CURRENT, ImageStatus.UNVERIFIED)


class PciIds(BaseModel):
    """The key of a board: four lower-case 4-digit hex IDs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor: str
    device: str
    subsystem_vendor: str
    subsystem_device: str

    @field_validator("vendor", "device", "subsystem_vendor", "subsystem_device")
    @classmethod
    def _hex(cls, v: str) -> str:
        if not _HEX4.match(v):
            raise ValueError("must be 4 lower-case hex digits, e.g. 3842")
        return v

    @property
    def key(self) -> str:
        """Return ``vendor:device:subvendor:subdevice``."""
        return f"{self.vendor}:{self.device}:{self.subsystem_vendor}:{self.subsystem_device}"

    @property
    def subsystem(self) -> str:
        """Return ``subvendor:subdevice`` (what nvflash calls the IFR subsystem ID)."""
        return f"{self.subsystem_vendor}:{self.subsystem_device}"

    @property
    def file_stem(self) -> str:
        """Return the board file's expected name without ``.toml``: ``10de-2204-3842-3987``."""
        return self.key.replace(":", "-")


class BoardInfo(BaseModel):
    """What a board is. Lists are empty and strings empty when unknown."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    maker: str = Field(min_length=1)
    part_numbers: list[str] = Field(default_factory=list)
    board_ids: list[str] = Field(default_factory=list)  # compatible board IDs (nvflash's "Board ID"), 0x-hex
    dual_firmware_switch: bool | None = None  # a second firmware chip behind a switch
    vram_bytes: int | None = Field(default=None, gt=0)
    notes: str = ""
    #: public pages that state the board's facts (https); required from board format 2 on
    sources: list[str] = Field(default_factory=list)

    @field_validator("sources")
    @classmethod
    def _sources(cls, v: list[str]) -> list[str]:
        for url in v:
            if why := check_url(url):
                raise ValueError(f"{url!r} {why}")
        return v

    @field_validator("board_ids")
    @classmethod
    def _board_ids(cls, v: list[str]) -> list[str]:
        for b in v:
            if not _BOARD_ID.match(b):
                raise ValueError(f"board ID {b!r} must look like 0x0240 (lower-case hex)")
        return v


class Board(BaseModel):
    """One board file: its PCI key, what it is, and its images (newest last is not required)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1, 2] = 1  # 2: every board and image cites its sources (fwman.firmware.catalog.sources)
    pci: PciIds
    board: BoardInfo
    images: list[CatalogImage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_versions(self) -> Board:
        seen: set[str] = set()
        for image in self.images:
            if image.version in seen:
                raise ValueError(f"duplicate image version {image.version}")
            seen.add(image.version)
        return self

    @property
    def key(self) -> str:
        """Return the PCI key ``10de:2204:3842:3987``."""
        return self.pci.key

    @property
    def subsystem(self) -> str:
        """Return the subsystem ID ``3842:3987``."""
        return self.pci.subsystem

    def image(self, version: str) -> CatalogImage | None:
        """Return the image with ``version`` (case-insensitive), or None."""
        wanted = version.upper()
        return next((i for i in self.images if i.version == wanted), None)

    def images_newest_first(self) -> list[CatalogImage]:
        """Return the images sorted by version, newest first."""
        return sorted(self.images, key=lambda i: version_key(i.version), reverse=True)

    def recommended(self) -> CatalogImage | None:
        """Return the newest image that may be recommended (``current`` or ``unverified``), or None.

        Withdrawn and superseded images are never recommended, however high their version sorts.
        """
        return next((i for i in self.images_newest_first() if i.recommendable), None)


class IndexFile(BaseModel):
    """One file listed in the signed index."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str
    size: int = Field(ge=0, le=MAX_BOARD_FILE)

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        parts = v.split("/")
        if len(parts) != 2 or parts[0] != BOARDS_DIR or not parts[1].endswith(".toml"):
            raise ValueError("must be boards/<name>.toml")
        if why := check_file_name(parts[1]):
            raise ValueError(f"file name {why}")
        return v

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not _SHA256.match(v):
            raise ValueError("malformed SHA-256: must be 64 lower-case hex digits")
        return v


class CatalogIndex(BaseModel):
    """``index.json``: every catalog file with its SHA-256, a serial that only ever grows, and a date."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fwman-catalog-index"] = "fwman-catalog-index"
    version: Literal[1] = 1
    serial: int = Field(ge=1)
    date: str
    files: list[IndexFile]

    @field_validator("date")
    @classmethod
    def _date(cls, v: str) -> str:
        if not _FULL_DATE.match(v):
            raise ValueError("must be YYYY-MM-DD")
        return v

    @model_validator(mode="after")
    def _unique(self) -> CatalogIndex:
        paths = [f.path for f in self.files]
        if len(paths) != len(set(paths)):
            raise ValueError("a file is listed twice")
        return self

    def to_json(self) -> bytes:
        """Return the canonical bytes of this index (what gets signed)."""
        return (json.dumps(self.model_dump(mode="json"), indent=2) + "\n").encode()


def parse_index(data: bytes, where: str = INDEX_NAME) -> CatalogIndex:
    """Return the index parsed from ``data``. Raises VerificationError naming what is wrong."""
    try:
        return CatalogIndex.model_validate_json(data)
    except ValidationError as e:
        raise VerificationError(f"{where}: not a valid catalog index: {_first_error(e)}") from e


def parse_board(data: bytes, where: str) -> Board:
    """Return the board parsed from TOML ``data``. Raises VerificationError naming the file and the field."""
    raw = _load_toml(data, where)
    try:
        return Board.model_validate(raw)
    except ValidationError as e:
        raise VerificationError(
            f"{where}: {_first_error(e)}", hint="run `fwman catalog lint` for every problem in the catalog"
        ) from e


def _load_toml(data: bytes, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise VerificationError(f"{where}: not UTF-8 text") from e
    except tomllib.TOMLDecodeError as e:
        raise VerificationError(f"{where}: not valid TOML: {e}") from e


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{_loc(err['loc']) or 'document'}: {_error_text(err)}"


def _error_text(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


# -- the loaded catalog ------------------------------------------------------------------------------------


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
    #: owner-supplied vendor MD5s on the host (``fwman fetch --expect-md5``); attached to the entries they cover
    overrides: list[HashOverride] = field(default_factory=list)
    #: PCI keys of the boards that come from local entries (``fwman catalog add-local``) -> their file
    local_files: dict[str, str] = field(default_factory=dict)

    def is_local(self, board: Board) -> bool:
        """Return True when ``board`` comes from a local entry, not the curated catalog."""
        return board.key in self.local_files

    def _entry(self, board: Board, image: CatalogImage) -> CatalogEntry:
        override = find_override(self.overrides, board.key, image.version)
        return CatalogEntry(board, image, override, self.is_local(board))

    def entry_for(self, board: Board, image: CatalogImage) -> CatalogEntry:
        """Return the entry for ``image`` of ``board`` (with its override and local mark)."""
        return self._entry(board, image)

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
        return self._entry(board, image)

    def entries(self) -> list[CatalogEntry]:
        """Return every (board, image) pair, boards in key order, images newest first."""
        return [self._entry(b, i) for b in sorted(self.boards, key=lambda b: b.key) for i in b.images_newest_first()]

    def describe(self) -> str:
        """Return one line saying which catalog this is."""
        serial = f"serial {self.serial}" if self.serial is not None else "no index"
        date = f", {self.date}" if self.date else ""
        return f"{self.source} catalog ({serial}{date}) at {self.location}"

    def summary(self) -> dict[str, Any]:
        """Return the JSON form of where this catalog came from."""
        return {
            "source": self.source,
            "location": self.location,
            "serial": self.serial,
            "date": self.date,
            "notes": list(self.notes),
        }


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
            raise VerificationError(
                f"{where}/{item.path}: SHA-256 does not match {INDEX_NAME}",
                hint="the catalog was changed after it was signed: run `fwman catalog update` (or re-sign it)",
            )
        boards.append(parse_board(data, f"{where}/{item.path}"))
    return index, boards


def load_directory(path: Path, source: str = "directory") -> Catalog:
    """Return the catalog in a plain directory (the bundled one, or a maintainer's working copy).

    Package data and maintainer checkouts are fwman's own files, not host state, so they are read directly.
    Raises MissingError when the directory is absent, VerificationError when a file is invalid.
    """
    if not path.is_dir():
        raise MissingError(f"no catalog directory at {path}")

    def read(relpath: str, limit: int) -> bytes:
        try:
            with open(path / relpath, "rb") as f:
                return f.read(limit)
        except FileNotFoundError as e:
            raise MissingError(f"{path / relpath}: not found") from e

    def names() -> list[str]:
        boards = path / BOARDS_DIR
        return sorted(p.name for p in boards.glob("*.toml")) if boards.is_dir() else []

    index, boards = _load_tree(read, names, str(path))
    return Catalog(boards, source, str(path), index.serial if index else None, index.date if index else None)


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
    return Catalog(boards, "local", path, index.serial, index.date)


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
    packaged = load_directory(bundled, "bundled") if bundled.is_dir() else None
    if local is None and packaged is None:
        raise MissingError("no VBIOS catalog installed", hint="install one with `fwman catalog update --url URL`")
    chosen: Catalog
    if local is None:
        assert packaged is not None
        chosen = packaged
    elif packaged is not None and (packaged.serial or 0) > (local.serial or 0):
        notes.append(f"local copy at {local.location} (serial {local.serial}) is older: not used")
        chosen = packaged
    else:
        chosen = local
    chosen.notes.extend(notes)
    chosen.overrides = load_overrides(host)
    _add_local_entries(host, chosen)
    return chosen


def _add_local_entries(host: Host, catalog: Catalog) -> None:
    """Add the host's local entries to ``catalog``, marked local; a curated board is never shadowed."""
    from fwman.firmware.catalog.local import load_local_entries

    entries, notes = load_local_entries(host)
    catalog.notes.extend(notes)
    for entry in entries:
        if catalog.board_for(*entry.board.key.split(":")) is not None:
            catalog.notes.append(f"local entry {entry.path} not used: the catalog knows {entry.board.key}")
            continue
        catalog.boards.append(entry.board)
        catalog.local_files[entry.board.key] = entry.path


def installed_serial(host: Host, bundled: Path | None = None) -> int:
    """Return the highest serial installed (local copy or bundled), 0 when none."""
    bundled = bundled or BUNDLED_CATALOG
    serials = [0]
    try:
        if host.exists(f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}"):
            serials.append(parse_index(host.read_bytes(f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}")).serial)
    except NotRecordedError:
        pass
    if (bundled / INDEX_NAME).is_file():
        serials.append(parse_index((bundled / INDEX_NAME).read_bytes()).serial)
    return max(serials)


# -- lint ----------------------------------------------------------------------------------------------------


class LintIssue(BaseModel):
    """One lint problem: ``error`` fails the lint (exit 4), ``warning`` does not."""

    model_config = ConfigDict(frozen=True)

    level: Literal["error", "warning"]
    file: str
    where: str  # the key path inside the file ("images[1].md5"), empty for the whole file
    message: str


def lint_directory(path: Path) -> list[LintIssue]:
    """Return every problem in the catalog directory ``path`` (boards, index, duplicates), errors first.

    Never raises for a bad catalog: everything wrong is an issue. The signature is checked by the CLI (it needs
    the trusted keys).
    """
    issues: list[LintIssue] = []
    boards_dir = path / BOARDS_DIR
    if not boards_dir.is_dir():
        return [LintIssue(level="error", file=str(path), where="", message=f"no {BOARDS_DIR}/ directory")]
    files = sorted(boards_dir.iterdir())
    loaded: dict[str, Board] = {}
    for f in files:
        rel = f"{BOARDS_DIR}/{f.name}"
        if not f.name.endswith(".toml"):
            issues.append(LintIssue(level="warning", file=rel, where="", message="not a .toml file: ignored"))
            continue
        board = _lint_board_file(f.read_bytes(), rel, issues)
        if board is not None:
            loaded[rel] = board
    _lint_across(loaded, issues)
    _lint_index(path, files, issues)
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
        issues.append(LintIssue(level="error", file=rel, where=where, message=message))

    def warn(where: str, message: str) -> None:
        issues.append(LintIssue(level="warning", file=rel, where=where, message=message))

    if len(data) > MAX_BOARD_FILE:
        err("", f"larger than {MAX_BOARD_FILE} bytes")
        return None
    try:
        raw = _load_toml(data, rel)
    except VerificationError as e:
        err("", e.message.removeprefix(f"{rel}: "))
        return None
    try:
        board = Board.model_validate(raw)
    except ValidationError as e:
        for error in e.errors():
            err(_loc(error["loc"]), _error_text(error))
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
    from fwman.firmware.catalog.sources import source_issues

    for level, where, message in source_issues(board, rel):
        (err if level == "error" else warn)(where, message)
    return board


def _lint_across(loaded: dict[str, Board], issues: list[LintIssue]) -> None:
    by_key: dict[str, str] = {}
    for rel, board in loaded.items():
        if board.key in by_key:
            issues.append(
                LintIssue(
                    level="error",
                    file=rel,
                    where="pci",
                    message=f"duplicate board {board.key} (also in {by_key[board.key]})",
                )
            )
        by_key.setdefault(board.key, rel)
    seen_hashes: dict[str, str] = {}
    for rel, board in loaded.items():
        names: dict[str, str] = {}
        for n, image in enumerate(board.images):
            where = f"images[{n}]"
            if image.file_name in names:
                issues.append(
                    LintIssue(
                        level="error",
                        file=rel,
                        where=f"{where}.file",
                        message=f"file name {image.file_name} is used by {names[image.file_name]} too",
                    )
                )
            names[image.file_name] = image.version
            for kind, value in (("md5", image.md5), ("sha256", image.sha256)):
                if not value:
                    continue
                label = f"{board.subsystem}/{image.version}"
                other = seen_hashes.get(value)
                if other is not None and other != label:
                    issues.append(
                        LintIssue(
                            level="error",
                            file=rel,
                            where=f"{where}.{kind}",
                            message=f"duplicate hash: {label} has the same {kind} as {other}",
                        )
                    )
                seen_hashes[value] = label


def _lint_index(path: Path, files: list[Path], issues: list[LintIssue]) -> None:
    index_path = path / INDEX_NAME
    if not index_path.is_file():
        issues.append(
            LintIssue(
                level="warning", file=INDEX_NAME, where="", message="no index: run `fwman catalog sign --key FILE`"
            )
        )
        return
    try:
        index = parse_index(index_path.read_bytes())
    except VerificationError as e:
        issues.append(LintIssue(level="error", file=INDEX_NAME, where="", message=e.message))
        return
    listed = {f.path: f for f in index.files}
    present = {f"{BOARDS_DIR}/{f.name}" for f in files if f.name.endswith(".toml")}
    for rel in sorted(present - listed.keys()):
        issues.append(
            LintIssue(level="error", file=INDEX_NAME, where="files", message=f"{rel} is not in the index: re-sign")
        )
    for rel in sorted(listed.keys() - present):
        issues.append(LintIssue(level="error", file=INDEX_NAME, where="files", message=f"{rel} is listed but missing"))
    for rel in sorted(present & listed.keys()):
        data = (path / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != listed[rel].sha256 or len(data) != listed[rel].size:
            issues.append(
                LintIssue(
                    level="error",
                    file=INDEX_NAME,
                    where="files",
                    message=f"{rel} changed since the index was signed: re-sign",
                )
            )


# -- what `fwman rom verify` asks the catalog ---------------------------------------------------------------


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


def find_entry_for_rom(
    catalog: Catalog, image: RomLike, vendor: str = "10de", device: str | None = None
) -> CatalogEntry | None:
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


def catalog_findings(image: RomLike, entry: CatalogEntry | None, override_md5: str | None = None) -> list[Finding]:
    """Return what the catalog says about a parsed ROM: board match, hash known and matching, status.

    ``entry`` is the catalog entry the image claims to be (see :func:`find_entry_for_rom`); None gives one
    ``warn`` (not in the catalog). ``override_md5`` is a vendor MD5 the owner recorded locally
    (``fwman fetch --expect-md5``) for an entry whose catalog hash is unknown; by default the one attached to
    ``entry`` by :func:`load_catalog`. Blocks: a different board, a hash
    mismatch, no known hash, a withdrawn image.
    """
    if entry is None:
        return [
            Finding(
                id="catalog.entry",
                severity=Severity.WARN,
                message="image not in the VBIOS catalog: its hash cannot be checked against a published one",
                evidence={"version": image.version or "unknown", "subsystem": image.subsystem or "unknown"},
                fix="compare its MD5 with the one the card maker publishes",
            )
        ]
    board, cat = entry.board, entry.image
    if override_md5 is None and entry.override is not None:
        override_md5 = entry.override.md5
    ev = {"catalog": entry.label, "status": cat.status.value}
    out: list[Finding] = []
    if image.subsystem is not None and image.subsystem != board.subsystem:
        out.append(
            Finding(
                id="catalog.board",
                severity=Severity.BLOCK,
                message=f"image is for subsystem {image.subsystem}, the {'local' if entry.local else 'catalog'} entry "
                f"is {board.subsystem}",
                evidence={**ev, "image_subsystem": image.subsystem},
            )
        )
    if image.version is not None and image.version.upper() != cat.version:
        out.append(
            Finding(
                id="catalog.version",
                severity=Severity.WARN,
                message=f"image says version {image.version}, the {'local' if entry.local else 'catalog'} entry "
                f"is {cat.version}",
                evidence={**ev, "image_version": image.version},
                fix="vendors have shipped different images under one version: trust the hash, not the string",
            )
        )
    out.append(_hash_finding(image, cat, ev, override_md5, entry.local))
    out.append(_status_finding(cat, ev))
    if entry.local:
        out.append(
            Finding(
                id="catalog.local",
                severity=Severity.INFO,
                message=f"{entry.label}: written on this host by `fwman catalog add-local`, not signed by the catalog",
                evidence=ev,
            )
        )
    return out


def _hash_finding(
    image: RomLike, cat: CatalogImage, ev: dict[str, str], override_md5: str | None, local: bool = False
) -> Finding:
    checks: list[tuple[str, str, str]] = []  # (what, expected, actual)
    if cat.sha256:
        checks.append(("SHA-256", cat.sha256, image.sha256))
    if cat.md5:
        checks.append(("MD5", cat.md5, image.md5))
    if not checks and cat.chain_sha256:
        checks.append(("chain SHA-256", cat.chain_sha256, image.chain_sha256))
    from_override = not checks and bool(override_md5)
    if from_override and override_md5:
        checks.append(("MD5", override_md5, image.md5))
    if not checks:
        return Finding(
            id="catalog.hash",
            severity=Severity.BLOCK,
            message=f"{cat.version} is unverified: no published hash is known, so this file cannot be checked",
            evidence=ev,
            fix="supply the vendor-published MD5: fwman fetch BOARD/VERSION --from FILE --expect-md5 HEX",
        )
    whose = "the vendor MD5 recorded on this host for" if from_override else (
        "the local entry's" if local else "the catalog's"
    )  # fmt: skip
    bad = [(what, exp, act) for what, exp, act in checks if exp != act]
    if bad and cat.chain_sha256 and cat.chain_sha256 == image.chain_sha256:
        # a card dump differs after the chain (per-card data): the firmware itself is the same
        return Finding(
            id="catalog.hash",
            severity=Severity.OK,
            message=f"option-ROM chain matches {cat.version} (the file differs only in per-card data)",
            evidence={**ev, "chain_sha256": image.chain_sha256},
        )
    if bad:
        what, exp, act = bad[0]
        return Finding(
            id="catalog.hash",
            severity=Severity.BLOCK,
            message=f"{what} does not match {whose} {cat.version}: this is not the published image",
            evidence={**ev, "expected": exp, "actual": act},
            fix="download the image again from the vendor; never flash a file whose hash differs",
        )
    names = " and ".join(w for w, _, _ in checks)
    verb = "match" if len(checks) > 1 else "matches"
    return Finding(
        id="catalog.hash",
        severity=Severity.OK,
        message=f"{names} {verb} {whose} {cat.version}",
        evidence={**ev, **{w: e for w, e, _ in checks}},
    )


def _status_finding(cat: CatalogImage, ev: dict[str, str]) -> Finding:
    reason = f": {cat.status_reason}" if cat.status_reason else ""
    if cat.status is ImageStatus.WITHDRAWN:
        return Finding(
            id="catalog.status",
            severity=Severity.BLOCK,
            message=f"{cat.version} was withdrawn{reason}",
            evidence=ev,
            fix=f"use {cat.superseded_by} instead" if cat.superseded_by else "use the board's current image",
        )
    if cat.status is ImageStatus.SUPERSEDED:
        newer = f" by {cat.superseded_by}" if cat.superseded_by else ""
        return Finding(
            id="catalog.status",
            severity=Severity.INFO,
            message=f"{cat.version} is superseded{newer}{reason}",
            evidence=ev,
        )
    if cat.status is ImageStatus.UNVERIFIED:
        return Finding(
            id="catalog.status",
            severity=Severity.INFO,
            message=f"{cat.version} is listed as unverified (no published hash in the catalog)",
            evidence=ev,
        )
    return Finding(id="catalog.status", severity=Severity.OK, message=f"{cat.version} is current", evidence=ev)
