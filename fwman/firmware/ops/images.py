"""Which image a flash writes: resolving ``--image FILE|BOARD/VERSION``, a catalog entry's cached image, a backup.

The one owner of turning what the user (or the upgrade plan) names into an :class:`ImageSource` with its catalog facts
(entry, the owner's recorded vendor MD5, the board's second firmware chip). ``fwman flash``, ``fwman flash resume``,
``fwman restore`` and ``fwman upgrade --apply`` all come here."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.errors import BlockedError, MissingError, VerificationError
from fwman.firmware.catalog.load import Catalog, CatalogEntry, find_entry_for_rom, load_catalog
from fwman.firmware.ops.backup import BackupEntry, load_manifest
from fwman.firmware.ops.fetch import cache_path, refuse_withdrawn
from fwman.firmware.ops.journal import Operation
from fwman.firmware.rom.parse import parse_rom
from fwman.gpu.card import Card
from fwman.host.base import Host
from fwman.host.userfiles import is_user_file, read_user_file, user_path


@dataclass
class ImageSource:
    """What to write: the bytes (already read), a label for people, and the catalog facts about it."""

    label: str
    data: bytes
    catalog_entry: CatalogEntry | None = None
    override_md5: str | None = None
    restore_of: BackupEntry | None = None  # set for `fwman restore`: the manifest entry being put back
    dual_firmware_switch: bool | None = None

    @property
    def verified_by(self) -> str | None:
        """Return what vouches for the bytes, as outputs and the history name it: the card's own backup, the
        catalog's (or local entry's) hash, an image "extracted from a package signed by <maker> (<subject>)", a
        vendor MD5 recorded on this host; None when nothing does (the gates then block)."""
        if self.restore_of is not None:
            return "the card's own backup (its manifest hashes)"
        entry = self.catalog_entry
        if entry is None:
            return None
        if entry.image.has_hash or entry.image.chain_sha256:
            return entry.hash_origin
        if entry.override is not None:
            return entry.override.provenance(entry.board.board.maker)
        return None

    @property
    def sha256(self) -> str:
        """Return the SHA-256 of the bytes."""
        return hashlib.sha256(self.data).hexdigest()


def _with_entry(source: ImageSource, entry: CatalogEntry | None) -> ImageSource:
    """Return ``source`` with the facts of catalog ``entry`` attached (unchanged when None)."""
    if entry is not None:
        source.catalog_entry = entry
        source.override_md5 = entry.override.md5 if entry.override is not None else None
        source.dual_firmware_switch = entry.board.board.dual_firmware_switch
    return source


def cached_image(host: Host, entry: CatalogEntry, bus_id: str | None = None) -> ImageSource:
    """Return the fetched image of ``entry`` from the cache, with its catalog facts.

    ``bus_id`` (the card being flashed) goes into the hint of a refusal, so it is a command that runs as given.

    Raises BlockedError when the image is withdrawn (it is never fetched, so "not downloaded" would send the
    owner to a fetch that refuses it), MissingError when it has not been fetched.
    """
    refuse_withdrawn(entry, f"flash --card {bus_id}" if bus_id else "flash --card BUS")
    path = cache_path(entry)
    try:
        data = host.read_bytes(path)
    except MissingError as e:
        raise MissingError(f"{entry.ref} is not downloaded ({path})", hint=f"fwman fetch {entry.ref}") from e
    return _with_entry(ImageSource(label=entry.label, data=data), entry)


def catalog_image(host: Host, ref: str, catalog: Catalog | None = None) -> ImageSource:
    """Return the fetched image of catalog entry ``ref`` (``3842:3987/94.02.42.80.27``) with its catalog facts.

    ``catalog`` defaults to the host's (:func:`fwman.firmware.catalog.load.load_catalog`). Raises UsageError for
    an unknown entry, MissingError when it has not been fetched.
    """
    return cached_image(host, (catalog or load_catalog(host)).entry(ref))


def with_catalog(host: Host, source: ImageSource) -> ImageSource:
    """Return ``source`` with the facts of the catalog entry its bytes are (by hash, else subsystem + version).

    Raises MissingError when no catalog is installed, ParseError when the bytes are not a VBIOS image.
    """
    return _with_entry(source, find_entry_for_rom(load_catalog(host), parse_rom(source.data)))


def resolve_image(host: Host, ref: str, bus_id: str | None = None) -> ImageSource:
    """Return the image named by ``ref``: a file the user names on this machine, or ``BOARD/VERSION`` (cache).

    ``bus_id`` is the card the image is for (named in the hint when a catalog image is refused).
    A file is read through the user-file door (relative to the real working directory, never under
    ``--root``). Raises MissingError when the file or cached image is absent, UsageError for an unknown catalog
    entry, ParseError when a file is not a VBIOS image.
    """
    catalog = load_catalog(host)
    if is_user_file(ref):  # the user's file, not a host path: also with --root
        data = read_user_file(ref)
        source = ImageSource(label=user_path(ref), data=data)
        return _with_entry(source, find_entry_for_rom(catalog, parse_rom(data)))
    if "/" in ref and ":" in ref.split("/", 1)[0]:
        return cached_image(host, catalog.entry(ref), bus_id)
    raise MissingError(
        f"no such image file: {ref}", hint="give a file path or BOARD/VERSION (3842:3987/94.02.42.80.27)"
    )


def dual_switch(host: Host, card: Card) -> bool | None:
    """Return whether the catalog says ``card``'s board has a second firmware chip (None when unknown)."""
    try:
        catalog = load_catalog(host)
    except MissingError:
        return None
    board = catalog.board_for(card.vendor_id, card.device_id, card.subsystem_vendor_id, card.subsystem_device_id)
    return board.board.dual_firmware_switch if board else None


def backup_image(host: Host, card: Card, path: str) -> ImageSource:
    """Return backup ``path`` as the image to put back onto ``card``: only a backup recorded for this very card.

    Raises BlockedError when fwman did not record ``path`` or it belongs to another card.
    """
    entry = find_backup(host, path)
    if not entry.is_of(card):  # refused before any backup is taken; the flash gates check it again
        raise BlockedError(
            f"{path} belongs to card {entry.card} ({entry.subsystem}), not {card.bus_id} ({card.subsystem})",
            hint=f"restore {card.bus_id} from its own backups (fwman backup list)",
        )
    return ImageSource(
        label=path, data=host.read_bytes(path), restore_of=entry, dual_firmware_switch=dual_switch(host, card)
    )


def staged_source(host: Host, op: Operation) -> ImageSource:
    """Return the image of an unfinished operation from its staged copy (checked against the journaled hash).

    Raises MissingError when the staged copy is gone, VerificationError when it changed.
    """
    path = f"{paths.FLASH_STAGING_DIR}/{op.id}.rom"
    try:
        data = host.read_bytes(path)
    except MissingError as e:
        raise MissingError(f"the image of {op.id} is no longer staged at {path}", hint="start a new flash") from e
    if hashlib.sha256(data).hexdigest() != op.image_sha256:
        raise VerificationError(f"staged image {path} changed since {op.id} started")
    return ImageSource(label=op.image or path, data=data)


def find_backup(host: Host, path: str) -> BackupEntry:
    """Return the manifest entry of backup file ``path``. Raises BlockedError when fwman did not record it."""
    entry = load_manifest(host).find(path)
    if entry is None:
        raise BlockedError(
            f"{path} is not a backup fwman recorded",
            hint="restore takes only backups listed by `fwman backup list` (their hashes are in the manifest)",
        )
    return entry


def resume_source(host: Host, op: Operation, card: Card) -> ImageSource:
    """Return the image an unfinished flash or restore ``op`` of ``card`` writes, with its facts again.

    A restore gets its backup's manifest entry back (its gates accept only the card's own backup); a flash gets
    the catalog entry its bytes are. Raises MissingError / VerificationError as :func:`staged_source`,
    BlockedError when a restore's backup is no longer recorded.
    """
    source = staged_source(host, op)
    if op.kind == "restore":
        source.restore_of = find_backup(host, op.extra.get("backup", ""))
        source.dual_firmware_switch = dual_switch(host, card)
        return source
    return with_catalog(host, source)
