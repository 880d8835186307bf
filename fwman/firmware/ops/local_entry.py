"""Making a local catalog entry (``fwman catalog add-local``) and linting the host's local entries.

An operation over the catalog, the card's verified backup and the owner's vendor file, so it lives with the other
firmware operations: :mod:`fwman.firmware.catalog.local` only reads and writes the entry format (and the catalog loader
uses it), which keeps the loader free of backups and packages."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from fwman.core import names
from fwman.core.errors import MissingError, NotRecordedError, UsageError, VerificationError
from fwman.core.findings import Severity
from fwman.firmware.catalog.lint import LintIssue, lint_board_bytes
from fwman.firmware.catalog.load import load_catalog
from fwman.firmware.catalog.local import (
    LOCAL_DIR,
    TOOL,
    LocalEntry,
    LocalInfo,
    build_local_board,
    local_path,
    parse_local,
    render_board,
)
from fwman.firmware.catalog.schema import MAX_BOARD_FILE
from fwman.firmware.ops.backup import load_manifest, verify_entry
from fwman.firmware.ops.unpack import MAX_PACKAGE, scan_package
from fwman.firmware.rom.package import select_image
from fwman.firmware.rom.parse import parse_rom
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file


@dataclass(frozen=True)
class MadeEntry:
    """What ``make_local_entry`` built: the entry and the image chosen from the owner's file."""

    entry: LocalEntry
    text: str
    image_origin: str  # the file, or "<package>: <member>" for an image unpacked from a package


def make_local_entry(
    host: Host,
    unpack_host: Host,
    card: Any,
    *,
    image_path: str,
    expect_md5: str,
    md5_source: str,
    version: str | None = None,
    backup_path: str | None = None,
    name: str | None = None,
    maker: str | None = None,
    now: str,
) -> MadeEntry:
    """Return the local entry for ``card`` (a :class:`fwman.gpu.card.Card`), not yet written.

    The running firmware is read from ``card``'s newest stored backup (or ``backup_path``), which must verify
    (hash as recorded, a full dump of this card). The vendor file ``image_path`` is the user's (read through
    the user-file door) and must have the MD5 ``expect_md5`` the vendor published; a package is unpacked on
    ``unpack_host`` (the machine the file is on) and searched for the one image whose subsystem, device (and
    ``version``) are the card's. Raises UsageError, VerificationError, BlockedError, MissingError.
    """
    # typed text lands in the TOML file and its header comment: one line each (a newline broke the file)
    for text, option in ((name, "--name"), (maker, "--maker"), (md5_source, "--md5-source")):
        if text is not None:
            names.one_line(text, option)
    md5 = expect_md5.strip().lower()
    if len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5):
        raise UsageError(f"--expect-md5 {expect_md5}: not an MD5 (32 hex digits)")
    manifest = load_manifest(host)
    backups = manifest.for_card(card.bus_id)
    chosen = manifest.find(backup_path) if backup_path else (backups[0] if backups else None)
    if chosen is None:
        raise MissingError(
            f"no stored backup of {card.bus_id}" + (f" at {backup_path}" if backup_path else ""),
            hint=f"take one first: fwman backup --card {card.bus_id}",
        )
    if chosen.card != card.bus_id:
        raise UsageError(f"{chosen.path} is a backup of {chosen.card}, not {card.bus_id}")
    bad = [f for f in verify_entry(host, chosen, card) if f.severity is Severity.BLOCK]
    if bad:
        raise VerificationError(f"the backup does not verify: {bad[0].message}", hint="take a fresh backup")
    running = parse_rom(host.read_bytes(chosen.path))

    raw = read_user_file(image_path, max_bytes=MAX_PACKAGE)
    got = hashlib.md5(raw, usedforsecurity=False).hexdigest()
    if got != md5:
        raise VerificationError(
            f"{image_path}: MD5 {got} is not the vendor's {md5} ({md5_source})",
            hint="download the file again from the card maker; nothing was written",
        )
    # unpacked from ``raw`` (a private copy), never from the file again: the MD5 above covers the image's bytes
    scan = scan_package(unpack_host, image_path, raw)
    hit = select_image(scan, card.subsystem, card.device_id, version)
    is_file = hit.extent == "file" and hit.data == raw
    new = hit.rom
    if new.vendor_id != card.vendor_id:
        raise VerificationError(f"the image is for vendor {new.vendor_id}, the card is {card.vendor_id}")
    board = build_local_board(
        vendor=card.vendor_id,
        device=card.device_id,
        subsystem_vendor=card.subsystem_vendor_id,
        subsystem_device=card.subsystem_device_id,
        name=name or running.sign_on or card.name or "unknown board",
        maker=maker or "unknown",
        board_id=chosen.board_id,
        running=running,
        rebar_sizes=list(card.rebar_sizes_bytes),
        new=new,
        new_is_the_file=is_file,
        new_file_md5=md5,
        md5_source=md5_source,
        package_name=image_path.rsplit("/", 1)[-1],
    )
    info = LocalInfo(
        created_at=now,
        card=card.bus_id,
        backup=chosen.path,
        backup_sha256=chosen.sha256,
        image_file=image_path,
        image_file_md5=md5,
        md5_source=md5_source,
        image_member="" if is_file else hit.describe(),
    )
    path = local_path(board.pci)
    # the name may come from the firmware's sign-on string: a comment must stay one line whatever it holds
    shown = "".join(c if c.isprintable() else " " for c in board.board.name)
    header = (
        f"# Local catalog entry for {shown} ({board.key}), written by {TOOL}.\n"
        "# Unsigned and for this host only; `fwman catalog add-local --export` prints the curated form."
    )
    text = render_board(board, info, header)
    entry = parse_local(text.encode(), path)  # what is written must read back as the same entry
    origin = image_path if is_file else f"{image_path}: {hit.describe()}"
    return MadeEntry(entry, text, origin)


def write_local_entry(host: Host, made: MadeEntry, *, replace: bool) -> str:
    """Write ``made`` to its file under the local catalog directory and return that host path.

    Raises UsageError when the file exists and ``replace`` is False (an owner's entry is never overwritten
    silently), and what the host raises on a failed write.
    """
    target = made.entry.path
    if host.exists(target) and not replace:
        raise UsageError(f"{target} exists", hint="--replace writes the new entry over it")
    host.mkdir(target.rsplit("/", 1)[0])
    host.write_bytes(target, made.text.encode())
    return target


def lint_local_entries(host: Host) -> list[LintIssue]:
    """Return every problem in the host's local entries (``/etc/fwman/catalog.d``) as lint issues, errors first.

    Each file must be a valid local entry (board schema, ``[local]`` provenance, named for its IDs) and pass
    the curated board rules; a local entry for a board the curated catalog knows is a warning (never used).
    """
    issues: list[LintIssue] = []
    try:
        if not host.is_dir(LOCAL_DIR):
            return []
        names = sorted(host.listdir(LOCAL_DIR))
    except (NotRecordedError, MissingError):
        return []
    catalog = load_catalog(host)
    curated = {b.key for b in catalog.boards} - set(catalog.local_files)
    for name in names:
        where = f"{LOCAL_DIR}/{name}"
        if not name.endswith(".toml"):
            issues.append(LintIssue(level="warning", file=where, where="", message="not a .toml file: ignored"))
            continue
        try:
            entry = parse_local(host.read_bytes(where, limit=MAX_BOARD_FILE + 1), where)
        except (VerificationError, MissingError) as e:
            issues.append(LintIssue(level="error", file=where, where="", message=e.message.removeprefix(f"{where}: ")))
            continue
        for issue in lint_board_bytes(render_board(entry.board).encode(), where):
            # a local entry's provenance is its [local] table, not public pages: the sources rule is for curated files
            if issue.where != "format" and not issue.where.endswith("sources"):
                issues.append(issue)
        if entry.board.key in curated:
            unused = f"the curated catalog knows {entry.board.key}: this local entry is not used"
            issues.append(LintIssue(level="warning", file=where, where="pci", message=unused))
    return sorted(issues, key=lambda i: (i.level != "error", i.file, i.where))
