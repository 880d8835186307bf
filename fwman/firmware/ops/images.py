"""Which image a flash writes: resolving ``--image FILE|BOARD/VERSION``, a catalog entry's cached image, a backup.

The one owner of turning what the user (or the upgrade plan) names into an :class:`ImageSource` with its
catalog facts (entry, the owner's recorded vendor MD5, the board's second firmware chip). ``fwman flash``,
``fwman flash resume``, ``fwman restore`` and ``fwman upgrade --apply`` all come here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fwman.core.errors import BlockedError, MissingError
from fwman.firmware.ops.flash import ImageSource, find_backup
from fwman.gpu.card import Card
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import Catalog, CatalogEntry


def _with_entry(source: ImageSource, entry: CatalogEntry | None) -> ImageSource:
    """Return ``source`` with the facts of catalog ``entry`` attached (unchanged when None)."""
    if entry is not None:
        source.catalog_entry = entry
        source.override_md5 = entry.override.md5 if entry.override is not None else None
        source.dual_firmware_switch = entry.board.board.dual_firmware_switch
    return source


def cached_image(host: Host, entry: CatalogEntry) -> ImageSource:
    """Return the fetched image of ``entry`` from the cache, with its catalog facts.

    Raises MissingError when it has not been fetched.
    """
    from fwman.firmware.ops.fetch import cache_path

    path = cache_path(entry)
    try:
        data = host.read_bytes(path)
    except MissingError as e:
        raise MissingError(f"{entry.ref} is not downloaded ({path})", hint=f"fwman fetch {entry.ref}") from e
    return _with_entry(ImageSource(label=entry.ref, data=data), entry)


def catalog_image(host: Host, ref: str, catalog: Catalog | None = None) -> ImageSource:
    """Return the fetched image of catalog entry ``ref`` (``3842:3987/94.02.42.80.27``) with its catalog facts.

    ``catalog`` defaults to the host's (:func:`fwman.firmware.catalog.load.load_catalog`). Raises UsageError for
    an unknown entry, MissingError when it has not been fetched.
    """
    from fwman.firmware.catalog.load import load_catalog

    return cached_image(host, (catalog or load_catalog(host)).entry(ref))


def with_catalog(host: Host, source: ImageSource) -> ImageSource:
    """Return ``source`` with the facts of the catalog entry its bytes are (by hash, else subsystem + version).

    Raises MissingError when no catalog is installed, ParseError when the bytes are not a VBIOS image.
    """
    from fwman.firmware.catalog.load import find_entry_for_rom, load_catalog
    from fwman.firmware.rom.parse import parse_rom

    return _with_entry(source, find_entry_for_rom(load_catalog(host), parse_rom(source.data)))


def resolve_image(host: Host, ref: str) -> ImageSource:
    """Return the image named by ``ref``: a file the user names on this machine, or ``BOARD/VERSION`` (cache).

    A file is read through the user-file door (relative to the real working directory, never under
    ``--root``). Raises MissingError when the file or cached image is absent, UsageError for an unknown catalog
    entry, ParseError when a file is not a VBIOS image.
    """
    from fwman.firmware.catalog.load import find_entry_for_rom, load_catalog
    from fwman.firmware.rom.parse import parse_rom

    catalog = load_catalog(host)
    if os.path.isfile(ref):  # the user's file, not a host path: also with --root
        data = read_user_file(ref)
        source = ImageSource(label=os.path.abspath(ref), data=data)
        return _with_entry(source, find_entry_for_rom(catalog, parse_rom(data)))
    if "/" in ref and ":" in ref.split("/", 1)[0]:
        return cached_image(host, catalog.entry(ref))
    raise MissingError(
        f"no such image file: {ref}", hint="give a file path or BOARD/VERSION (3842:3987/94.02.42.80.27)"
    )


def dual_switch(host: Host, card: Card) -> bool | None:
    """Return whether the catalog says ``card``'s board has a second firmware chip (None when unknown)."""
    from fwman.firmware.catalog.load import load_catalog

    try:
        board = load_catalog(host).board_for(
            card.vendor_id, card.device_id, card.subsystem_vendor_id, card.subsystem_device_id
        )
    except MissingError:
        return None
    return board.board.dual_firmware_switch if board else None


def backup_image(host: Host, card: Card, path: str) -> ImageSource:
    """Return backup ``path`` as the image to put back onto ``card``: only a backup recorded for this very card.

    Raises BlockedError when fwman did not record ``path`` or it belongs to another card.
    """
    entry = find_backup(host, path)
    if entry.card != card.bus_id or entry.subsystem != card.subsystem:
        raise BlockedError(
            f"{path} belongs to card {entry.card} ({entry.subsystem}), not {card.bus_id} ({card.subsystem})",
            hint=f"restore {card.bus_id} from its own backups (fwman backup list)",
        )
    return ImageSource(
        label=path, data=host.read_bytes(path), restore_of=entry, dual_firmware_switch=dual_switch(host, card)
    )
