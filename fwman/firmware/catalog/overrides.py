"""Local hash overrides: vendor-published MD5s an owner supplied for catalog images whose hash is unknown.

``fwman fetch BOARD/VERSION --expect-md5 HEX`` records the MD5 (with where it came from, the SHA-256 of the
file that matched it, and when) in ``/var/lib/fwman/overrides.toml``; an administrator may also keep entries in
``/etc/fwman/catalog-overrides.toml`` (same format). They are host-local: never written into ``catalog/``.

Format::

    [[override]]
    board = "10de:2204:3842:3987"
    version = "94.02.42.80.27"
    md5 = "<32 hex>"
    sha256 = "<64 hex>"          # of the file that matched the MD5 (optional in hand-written entries)
    size = 1048576               # optional
    source = "https://... (vendor page) / typed by the owner"
    recorded_at = "2026-11-29T08:10:00Z"

An image taken from a board maker's signed update program (``fwman fetch --image PACKAGE``, the Authenticode
signature verified up to a trusted root and its signer one the catalog records for the board) is recorded the
same way, with ``md5``/``sha256``/``size`` of the image itself and two more keys::

    signer = "CN=EVGA Corporation,O=EVGA Corporation,C=US"   # the signing certificate's subject (RFC 4514)
    package_sha256 = "<64 hex>"                                # of the signed package the image came from
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError, VerificationError
from fwman.core.names import lower_hex
from fwman.core.tomltext import parse_toml, toml_value
from fwman.host.base import Host

_HEADER = (
    "# Vendor-published hashes supplied on this host with `fwman fetch --expect-md5`.\n"
    "# Written by fwman; local to this host, never part of the curated catalog.\n"
)


class HashOverride(BaseModel):
    """One owner-supplied vendor MD5 for a catalog image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    board: str  # PCI key 10de:2204:3842:3987
    version: str
    md5: str
    sha256: str = ""
    size: int | None = Field(default=None, gt=0)
    source: str = Field(min_length=1)
    recorded_at: str = ""
    #: set when the image came from a signed update package: the signing certificate's subject (RFC 4514)
    signer: str = ""
    #: the SHA-256 of that signed package
    package_sha256: str = ""

    _md5 = field_validator("md5")(lower_hex(32))
    _sha = field_validator("sha256", "package_sha256")(lower_hex(64, empty_ok=True))

    @property
    def signed_package(self) -> bool:
        """Return True when the hashes are of an image taken from a package whose signature fwman verified."""
        return bool(self.signer)

    def provenance(self, maker: str) -> str:
        """Return how the hashes came to be trusted, as outputs and the history name it: "extracted from a
        package signed by <maker> (<subject>)" or "the vendor MD5 recorded on this host (<source>)"."""
        if self.signer:
            return f"extracted from a package signed by {maker} ({self.signer})"
        return f"the vendor MD5 recorded on this host ({self.source})"


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    override: list[HashOverride] = Field(default_factory=list)


def _read(host: Host, path: str) -> list[HashOverride]:
    try:
        if not host.exists(path):
            return []
        text = host.read_text(path)
    except (NotRecordedError, MissingError):  # unreadable, or a replay that did not record it: no overrides
        return []
    try:
        return _File.model_validate(parse_toml(text, path)).override
    except ParseError as e:
        raise VerificationError(f"{path}: not a valid overrides file: {e.detail}".splitlines()[0]) from e
    except ValidationError as e:
        raise VerificationError(f"{path}: not a valid overrides file: {e}".splitlines()[0]) from e


def load_overrides(host: Host) -> list[HashOverride]:
    """Return every override on ``host`` (administrator's file first). Raises VerificationError on a bad file."""
    return _read(host, paths.CATALOG_ETC_OVERRIDES) + _read(host, paths.CATALOG_STATE_OVERRIDES)


def find_override(overrides: list[HashOverride], board: str, version: str) -> HashOverride | None:
    """Return the override for ``board``/``version``, or None.

    Raises VerificationError when two overrides give different MD5s for the same image (one of them is wrong,
    and fwman cannot tell which).
    """
    found = [o for o in overrides if o.board == board and o.version == version]
    if len({o.md5 for o in found}) > 1:
        raise VerificationError(
            f"conflicting vendor MD5s recorded for {board} {version}: {', '.join(sorted({o.md5 for o in found}))}",
            hint=f"remove the wrong one from {paths.CATALOG_ETC_OVERRIDES} or {paths.CATALOG_STATE_OVERRIDES}",
        )
    return found[0] if found else None


def record_override(host: Host, override: HashOverride) -> None:
    """Add ``override`` to ``/var/lib/fwman/overrides.toml`` (atomic rewrite; an identical entry is replaced).

    Raises VerificationError when the file holds a different MD5 for the same image.
    """
    existing = _read(host, paths.CATALOG_STATE_OVERRIDES)
    find_override([*existing, override], override.board, override.version)
    kept = [o for o in existing if not (o.board == override.board and o.version == override.version)]
    parts = [_HEADER]
    for o in [*kept, override]:
        parts.append("\n[[override]]\n")
        for key, value in o.model_dump(exclude_none=True).items():
            if value == "" and key in ("sha256", "recorded_at", "signer", "package_sha256"):
                continue
            # TOML's own escaping (core/tomltext): json.dumps wrote surrogate-pair escapes and raw DEL, TOML refuses
            parts.append(f"{key} = {toml_value(value)}\n")
    host.mkdir(paths.STATE_DIR)
    host.write_bytes(paths.CATALOG_STATE_OVERRIDES, "".join(parts).encode())
