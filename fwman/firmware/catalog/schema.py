"""The VBIOS catalog's schema: board files, images, the signed index, and their parsers.

One TOML file per board in ``catalog/boards/``, keyed by PCI IDs (vendor, device, subsystem vendor, subsystem device);
``catalog/index.json`` lists every file with its SHA-256 plus a serial number, a date and an expiry, and
``index.json.sig`` signs it (see :mod:`fwman.firmware.catalog.signing`). ``docs/catalog-format.md`` documents the
format. Loading a catalog is :mod:`fwman.firmware.catalog.load`; lint is :mod:`fwman.firmware.catalog.lint`.

Nothing here invents a fact: a hash, URL or date that is not known is empty, and an image without a hash is
``unverified``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fwman.core import names
from fwman.core.clock import TIMESTAMP_FORMAT
from fwman.core.errors import ParseError, VerificationError
from fwman.core.tomltext import parse_toml
from fwman.firmware.versions import newest_first

INDEX_NAME = "index.json"
SIG_NAME = "index.json.sig"
BOARDS_DIR = "boards"
#: a board file larger than this is not a board file (also the download cap in ``catalog update``)
MAX_BOARD_FILE = 256 * 1024

_HEX4 = re.compile(r"^[0-9a-f]{4}$")
_VERSION = re.compile(r"^[0-9A-F]{2}(\.[0-9A-F]{2}){4}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DRIVER = re.compile(r"^\d+\.\d+(\.\d+)?$")


def check_with(test: Callable[[str], object], message: str, *, empty_ok: bool = True) -> Callable[[str], str]:
    """Return a pydantic field validator that returns the value when ``test`` accepts it (or, ``empty_ok``, when it is
    empty: unknown) and raises ValueError(``message``) otherwise."""

    def check(v: str) -> str:
        if (v or not empty_ok) and not test(v):
            raise ValueError(message)
        return v

    return check


class ImageStatus(StrEnum):
    """Where an image stands: only ``current`` and ``unverified`` images are ever recommended."""

    CURRENT = "current"  # recommended; its hash is known
    SUPERSEDED = "superseded"  # a newer image replaces it (still a valid image, e.g. to go back)
    WITHDRAWN = "withdrawn"  # the vendor pulled it: never recommended, never fetched, never flashed
    UNVERIFIED = "unverified"  # would be recommended, but no published hash is known: cannot be flashed yet


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

    _version = field_validator("version")(
        check_with(_VERSION.match, "must be five upper-case two-digit hex groups, e.g. 94.02.42.80.27", empty_ok=False)
    )
    _superseded_by = field_validator("superseded_by")(
        check_with(_VERSION.match, "must be a version like 94.02.42.80.27")
    )
    _date = field_validator("status_date", "release_date")(
        check_with(names.is_partial_date, "must be YYYY, YYYY-MM or YYYY-MM-DD (empty when unknown)")
    )
    _md5 = field_validator("md5")(
        check_with(_MD5.match, "malformed MD5: must be 32 lower-case hex digits (empty when unknown)")
    )
    _sha256 = field_validator("sha256", "chain_sha256")(
        check_with(_SHA256.match, "malformed SHA-256: must be 64 lower-case hex digits (empty when unknown)")
    )

    @field_validator("file")
    @classmethod
    def _file(cls, v: str) -> str:
        if v and (why := check_file_name(v)):
            raise ValueError(f"file name {why}")
        return v

    @field_validator("urls", "sources")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        # every bad URL in one message: a lint that stops at the first hides the next one from the reviewer
        bad = [f"{url!r} {why}" for url in v if (why := check_url(url))]
        if bad:
            raise ValueError("; ".join(bad))
        return v

    _driver = field_validator("min_driver")(check_with(_DRIVER.match, "must be a driver version like 465.89"))

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

    _hex = field_validator("vendor", "device", "subsystem_vendor", "subsystem_device")(
        check_with(_HEX4.match, "must be 4 lower-case hex digits, e.g. 3842", empty_ok=False)
    )

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


def parse_subject(subject: str) -> Any:
    """Return ``subject`` (an RFC 4514 distinguished name, ``CN=EVGA Corporation,O=EVGA Corporation,C=US``) as a
    ``cryptography.x509.Name``, compared attribute by attribute (never as text: OpenSSL and RFC 4514 print names
    in different orders and escapes).

    Raises ValueError when it is empty or not an RFC 4514 name.
    """
    from cryptography import x509  # heavy, and only signed packages need it: doctor reads this module

    if not subject.strip():
        raise ValueError("an empty certificate subject")
    try:
        name = x509.Name.from_rfc4514_string(subject)
    except ValueError as e:
        raise ValueError(f"certificate subject {subject!r} is not an RFC 4514 name ({e})") from e
    if not list(name):
        raise ValueError(f"certificate subject {subject!r} names no attribute")
    return name


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
    #: the certificate subjects (RFC 4514, as ``CN=...,O=...``) that sign the maker's Windows update programs
    #: (Authenticode): a package signed by one of them, up to a trusted root, vouches for the image inside it
    #: (docs/fetch.md). Empty when unknown: then only a published hash gives provenance.
    package_signers: list[str] = Field(default_factory=list)

    @field_validator("sources")
    @classmethod
    def _sources(cls, v: list[str]) -> list[str]:
        for url in v:
            if why := check_url(url):
                raise ValueError(f"{url!r} {why}")
        return v

    @field_validator("package_signers")
    @classmethod
    def _signers(cls, v: list[str]) -> list[str]:
        for subject in v:
            parse_subject(subject)  # a ValueError names what is wrong
        return v

    @field_validator("board_ids")
    @classmethod
    def _board_ids(cls, v: list[str]) -> list[str]:
        normal = [names.normal_board_id(b) for b in v]
        bad = next((b for b, n in zip(v, normal, strict=True) if n is None), None)
        if bad is not None:
            raise ValueError(f"board ID {bad!r}: {names.BOARD_ID_HINT}")
        return [n for n in normal if n is not None]


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
        """Return the images newest first, in the catalog's order (:func:`fwman.firmware.versions.newest_first`).

        Supersession and release dates decide before the version's first four fields; the fifth (the board
        maker's build code) never does: 94.02.42.80.27 replaced 94.02.42.80.AD and comes first.
        """
        return newest_first(self.images)

    def recommended(self) -> CatalogImage | None:
        """Return the newest image (catalog order) that may be recommended (``current`` or ``unverified``), or None.

        Withdrawn and superseded images are never recommended, wherever they sort.
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

    _sha = field_validator("sha256")(
        check_with(_SHA256.match, "malformed SHA-256: must be 64 lower-case hex digits", empty_ok=False)
    )


def parse_timestamp(value: str) -> datetime:
    """Return the UTC time of a metadata timestamp ``YYYY-MM-DDTHH:MM:SSZ`` (TUF's form). Raises ValueError."""
    if not _TIMESTAMP.match(value):
        raise ValueError("must be YYYY-MM-DDTHH:MM:SSZ (UTC)")
    return datetime.strptime(value, TIMESTAMP_FORMAT).replace(tzinfo=UTC)


def check_timestamp(v: str | None) -> str | None:
    """Return ``v`` when it is None or a metadata timestamp (a pydantic field validator). Raises ValueError."""
    if v is not None:
        parse_timestamp(v)
    return v


def check_iso_date(v: str) -> str:
    """Return ``v`` when it is a date ``YYYY-MM-DD`` (a pydantic field validator). Raises ValueError."""
    if not names.is_iso_date(v):
        raise ValueError("must be YYYY-MM-DD")
    return v


class CatalogIndex(BaseModel):
    """``index.json``: every catalog file with its SHA-256, a serial that only ever grows, a date and an expiry.

    Version 1 (the first catalogs) had no expiry; version 2 must carry one (``expires``): ``catalog update``
    installs only version 2, so a frozen mirror cannot keep serving an old index for ever.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fwman-catalog-index"] = "fwman-catalog-index"
    version: Literal[1, 2] = 2
    serial: int = Field(ge=1)
    date: str
    expires: str | None = None
    files: list[IndexFile]

    _check_date = field_validator("date")(check_iso_date)
    _check_expires = field_validator("expires")(check_timestamp)

    @model_validator(mode="after")
    def _unique(self) -> CatalogIndex:
        paths = [f.path for f in self.files]
        if len(paths) != len(set(paths)):
            raise ValueError("a file is listed twice")
        if (self.version == 2) != (self.expires is not None):
            raise ValueError("version 2 needs expires, version 1 has none")
        return self

    @property
    def expires_at(self) -> datetime | None:
        """Return the expiry as a UTC time (None for a version-1 index, which has none)."""
        return parse_timestamp(self.expires) if self.expires is not None else None

    def to_json(self) -> bytes:
        """Return the canonical bytes of this index (what gets signed)."""
        return (json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2) + "\n").encode()


def parse_index(data: bytes, where: str = INDEX_NAME) -> CatalogIndex:
    """Return the index parsed from ``data``. Raises VerificationError naming what is wrong."""
    try:
        return CatalogIndex.model_validate_json(data)
    except ValidationError as e:
        raise VerificationError(f"{where}: not a valid catalog index: {first_error(e)}") from e


def parse_board(data: bytes, where: str) -> Board:
    """Return the board parsed from TOML ``data``. Raises VerificationError naming the file and the field."""
    raw = load_toml(data, where)
    try:
        return Board.model_validate(raw)
    except ValidationError as e:
        raise VerificationError(
            f"{where}: {first_error(e)}", hint="run `fwman catalog lint` for every problem in the catalog"
        ) from e


def load_toml(data: bytes, where: str) -> dict[str, Any]:
    """Return the TOML document in ``data``. Raises VerificationError (naming ``where``) for bad text or TOML."""
    try:
        return parse_toml(data.decode("utf-8"), where)
    except UnicodeDecodeError as e:
        raise VerificationError(f"{where}: not UTF-8 text") from e
    except ParseError as e:
        raise VerificationError(f"{where}: not valid TOML: {e.detail}") from e


def error_location(loc: Iterable[int | str]) -> str:
    """Return a pydantic error location as a key path: ``images[1].md5``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def first_error(e: ValidationError) -> str:
    """Return the first problem of ``e`` as ``key.path: message``."""
    err = e.errors()[0]
    return f"{error_location(err['loc']) or 'document'}: {error_text(err)}"


def error_text(err: Any) -> str:
    """Return the message of one pydantic error, in the catalog's words."""
    if err["type"] == "extra_forbidden":
        return "unknown key"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")
