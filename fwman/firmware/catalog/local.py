"""Local catalog entries: a board the curated catalog does not know, described by its owner on one host.

``fwman catalog add-local`` writes ``/etc/fwman/catalog.d/<vendor>-<device>-<subvendor>-<subdevice>.toml`` from what the
machine and the owner know: the card's live PCI IDs, its running firmware read back from a verified backup, and the
vendor image the owner downloaded, checked against the MD5 the vendor published. The file is the curated board format
plus a ``[local]`` table saying where each fact came from; it is unsigned and never part of ``catalog/``.
``load_catalog`` adds these boards to the catalog in use, marked local, so ``upgrade``, ``fetch`` and ``rom verify``
apply every gate to them and say "local entry" wherever they cite one. A local file never shadows a curated board: the
curated one wins and a note says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, VerificationError
from fwman.core.names import lower_hex
from fwman.core.tomltext import toml_value
from fwman.firmware.catalog.schema import (
    MAX_BOARD_FILE,
    Board,
    BoardInfo,
    CatalogImage,
    ImageStatus,
    PciIds,
    first_error,
    load_toml,
)
from fwman.firmware.rom.model import RomImage
from fwman.host.base import Host

LOCAL_DIR = paths.LOCAL_CATALOG_ENTRIES_DIR
LOCAL_TABLE = "local"
TOOL = "fwman catalog add-local"


class LocalInfo(BaseModel):
    """Where a local entry's facts came from (the ``[local]`` table)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    created_at: str  # UTC, ISO 8601
    created_by: str = TOOL
    card: str  # the bus ID the live IDs were read from
    backup: str  # the verified backup the running firmware was read from
    backup_sha256: str
    image_file: str  # the vendor file the owner gave (a ROM or an update package)
    image_file_md5: str  # its MD5, equal to the vendor-published one the owner typed
    md5_source: str = Field(min_length=1)  # where the vendor published that MD5
    image_member: str = ""  # inside a package: the unpacked file (or offset) the image came from

    _md5 = field_validator("image_file_md5")(lower_hex(32))


@dataclass(frozen=True)
class LocalEntry:
    """One local board file: the board, where its facts came from, and the host path of the file."""

    board: Board
    info: LocalInfo
    path: str


def local_path(pci: PciIds) -> str:
    """Return the host path of the local entry for ``pci``."""
    return f"{LOCAL_DIR}/{pci.file_stem}.toml"


def parse_local(data: bytes, where: str) -> LocalEntry:
    """Return the local entry in TOML ``data``. Raises VerificationError naming the file and the field."""
    if len(data) > MAX_BOARD_FILE:
        raise VerificationError(f"{where}: larger than {MAX_BOARD_FILE} bytes")
    raw = load_toml(data, where)
    info_raw = raw.pop(LOCAL_TABLE, None)
    if not isinstance(info_raw, dict):
        raise VerificationError(f"{where}: no [{LOCAL_TABLE}] table: not a local entry written by {TOOL}")
    try:
        board = Board.model_validate(raw)
        info = LocalInfo.model_validate(info_raw)
    except ValidationError as e:
        raise VerificationError(f"{where}: {first_error(e)}") from e
    stem = where.rsplit("/", 1)[-1].removesuffix(".toml")
    if stem != board.pci.file_stem:
        raise VerificationError(f"{where}: must be named {board.pci.file_stem}.toml (its PCI IDs)")
    return LocalEntry(board, info, where)


def load_local_entries(host: Host) -> tuple[list[LocalEntry], list[str]]:
    """Return (entries, notes): every valid local entry on ``host``; each unreadable file is a note, not a board.

    A file that does not parse is left out (its card then stays "not in catalog": left alone, never guessed).
    """
    try:
        if not host.is_dir(LOCAL_DIR):
            return [], []
        names = sorted(n for n in host.listdir(LOCAL_DIR) if n.endswith(".toml"))
    except (NotRecordedError, MissingError):
        return [], []
    entries: list[LocalEntry] = []
    notes: list[str] = []
    for name in names:
        where = f"{LOCAL_DIR}/{name}"
        try:
            entries.append(parse_local(host.read_bytes(where, limit=MAX_BOARD_FILE + 1), where))
        except (VerificationError, MissingError) as e:
            notes.append(f"local entry not used: {e.message}")
    return entries, notes


# -- building one ------------------------------------------------------------------------------------------


def build_local_board(
    *,
    vendor: str,
    device: str,
    subsystem_vendor: str,
    subsystem_device: str,
    name: str,
    maker: str,
    board_id: str | None,
    running: RomImage,
    rebar_sizes: list[int],
    new: RomImage,
    new_is_the_file: bool,
    new_file_md5: str,
    md5_source: str,
    package_name: str,
) -> Board:
    """Return the board a local entry describes: the running firmware (superseded) and the vendor image (current).

    ``rebar_sizes`` are the BAR1 sizes the card offers on its running firmware (config space). The vendor
    image's MD5 is recorded only when the vendor's MD5 is of that file itself (``new_is_the_file``); for an
    image unpacked from a package the SHA-256 of the image is recorded and the notes say which package MD5
    vouched for it. Raises VerificationError when the two images have the same version.
    """
    if running.version is None or new.version is None:
        raise VerificationError("both the running firmware and the vendor image must carry a version")
    if running.version == new.version:
        raise VerificationError(f"the card already runs {new.version}: there is nothing to describe an upgrade to")
    offered = max(rebar_sizes) if rebar_sizes else None
    running_image = CatalogImage(
        version=running.version,
        status=ImageStatus.SUPERSEDED,
        superseded_by=new.version,
        status_reason="the firmware the card ran when the local entry was made (read from a verified backup)",
        chain_sha256=running.chain_sha256,
        rebar=None if offered is None else offered > 256 * 1024 * 1024,
        max_bar1_bytes=offered,
        notes=f"build date {running.build_date or 'unknown'}; sign-on {running.sign_on or 'unknown'}",
    )
    how = "its MD5 is the one the vendor published" if new_is_the_file else (
        f"unpacked from {package_name}, whose MD5 {new_file_md5} is the one the vendor published"
    )  # fmt: skip
    new_image = CatalogImage(
        version=new.version,
        status=ImageStatus.CURRENT,
        md5=new.md5 if new_is_the_file else "",
        sha256=new.sha256,
        chain_sha256=new.chain_sha256,
        size=new.size,
        notes=f"the vendor image the owner downloaded; {how} (source: {md5_source})",
    )
    return Board(
        pci=PciIds(vendor=vendor, device=device, subsystem_vendor=subsystem_vendor, subsystem_device=subsystem_device),
        board=BoardInfo(
            name=name,
            maker=maker,
            board_ids=[board_id] if board_id else [],
            notes=f"local entry made by {TOOL} from the card's live IDs and a verified backup",
        ),
        images=[new_image, running_image],
    )


def _table(data: dict[str, Any]) -> list[str]:
    # TOML's own escaping (core/tomltext): json.dumps wrote surrogate-pair escapes and raw DEL, which TOML refuses
    return [f"{k} = {toml_value(v)}" for k, v in data.items() if v not in (None, "", [])]


def render_board(board: Board, info: LocalInfo | None = None, header: str = "") -> str:
    """Return ``board`` as board-file TOML (the curated format), plus the ``[local]`` table when ``info`` is given."""
    lines = [header.rstrip()] if header else []
    lines.append(f"format = {board.format}")
    lines += ["", "[pci]", *_table(board.pci.model_dump())]
    lines += ["", "[board]", *_table(board.board.model_dump(mode="json"))]
    for image in board.images:
        lines += ["", "[[images]]", *_table(image.model_dump(mode="json"))]
    if info is not None:
        lines += ["", f"[{LOCAL_TABLE}]", *_table(info.model_dump())]
    return "\n".join(lines) + "\n"


def export_curated(entry: LocalEntry) -> str:
    """Return ``entry`` in the curated format for contributing upstream (no ``[local]`` table).

    The header says what a maintainer still needs: public sources for each fact, and a signature.
    """
    header = (
        f"# {entry.board.board.name}: exported from the local entry {entry.path} ({TOOL}).\n"
        f"# Before this goes into catalog/boards/: add the public pages that state each fact as `sources`\n"
        f"# ([board] and every [[images]]; the vendor's download page with its MD5: {entry.info.md5_source}),\n"
        f"# then `fwman catalog lint` and sign."
    )
    # curated files are format 2: `catalog lint` refuses them until every board and image cites its sources
    return render_board(entry.board.model_copy(update={"format": 2}), None, header)
