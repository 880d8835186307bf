"""``fwman catalog add-local``: the use case (a local catalog entry for a card the curated catalog does not
know), whose result owns its JSON shape (``fwman.catalog-local/2``) and the lines the CLI prints."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from fwman.app.text import Out, Result, document, say
from fwman.core.clock import timestamp
from fwman.core.errors import UsageError
from fwman.core.jsonout import encode
from fwman.firmware.catalog.load import load_catalog
from fwman.firmware.catalog.local import export_curated
from fwman.firmware.ops.local_entry import MadeEntry, make_local_entry, write_local_entry
from fwman.gpu.inventory import find_card, require_cards
from fwman.host.base import Host
from fwman.host.live import LiveHost
from fwman.host.userfiles import user_path


@dataclass
class LocalAdded(Result):
    """The local entry written at ``path``, where its image came from, and (``export``) its curated form."""

    path: str
    made: MadeEntry
    md5_source: str
    export: str | None = None  # the entry in the curated format, when asked for (for upstream)
    image_file: str = "FILE"  # the vendor file as the user named it: the next step's fetch imports it

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-local/2``."""
        board = self.made.entry.board
        return {
            "path": self.path,
            "pci_key": board.key,
            "board": board.board.model_dump(mode="json"),
            "images": encode(board.images),
            "local": self.made.entry.info.model_dump(),
            "image_from": self.made.image_origin,
            "export": self.export,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the headline (bold), then board, images, origin, the MD5 matched, what to run next, and the
        entry in the curated format when asked for."""
        board = self.made.entry.board
        ref = f"{board.subsystem}/{board.images[0].version}"
        out: Out = [
            say(f"wrote local entry {self.path}", "bold"),
            say(f"  board      {board.board.name} ({board.key}), local, unsigned"),
            *(say(f"  image      {image.version}  {image.status.value}") for image in board.images),
            say(f"  from       {self.made.image_origin}"),
            say(f"  MD5        {self.made.entry.info.image_file_md5} matches the vendor's ({self.md5_source})"),
            say(f"  next       fwman upgrade --dry-run; fwman fetch {ref} --image {shlex.quote(self.image_file)}"),
        ]
        # the curated form is a whole file (ending in a newline): one line of the text, its last newline the line's
        return out if self.export is None else [*out, say(), document(self.export)]


def add_local(
    host: Host,
    bus: str,
    image_file: str,
    *,
    expect_md5: str,
    md5_source: str,
    version: str | None = None,
    backup_path: str | None = None,
    name: str | None = None,
    maker: str | None = None,
    replace: bool = False,
    export: bool = False,
) -> LocalAdded:
    """Write the local catalog entry of the card at ``bus`` from its backup and the vendor file ``image_file``
    (a file the user names: a ROM, or an update program or archive unpacked with 7zz); return what was written.

    Raises UsageError for a board the curated catalog knows or an existing entry without ``replace``,
    VerificationError when the file's MD5 is not ``expect_md5`` or no image fits the card, MissingError.
    """
    card = find_card(require_cards(host), bus)
    catalog = load_catalog(host)
    known = catalog.board_for(card.vendor_id, card.device_id, card.subsystem_vendor_id, card.subsystem_device_id)
    if known is not None and not catalog.is_local(known):
        raise UsageError(
            f"{known.key} is in the curated catalog ({known.board.name}): no local entry is needed",
            hint=f"fwman catalog show {known.subsystem}",
        )
    made = make_local_entry(
        host,
        LiveHost("/"),  # the downloaded file is on the machine the user sits at, also with --root
        card,
        image_path=user_path(image_file),
        expect_md5=expect_md5,
        md5_source=md5_source,
        version=version,
        backup_path=backup_path,
        name=name,
        maker=maker,
        now=timestamp(),
    )
    target = write_local_entry(host, made, replace=replace)
    return LocalAdded(target, made, md5_source, export_curated(made.entry) if export else None, image_file)
