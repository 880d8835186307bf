"""Backups of every card's firmware: taken with ``nvflash --save``, checked, hashed into a manifest, never overwritten.

Layout: ``/var/lib/fwman/backups/<subsystem>/<card-id>/<run>-<version>.rom`` where ``<subsystem>`` is ``3842-3987``,
``<card-id>`` the PCI location (``0000-41-00.0``) and ``<run>`` the UTC time of the backup run (``20261129T083000Z``):
every card backed up in one run shares it, which is what ``--reuse-backups-from`` names. ``manifest.json`` next to the
subsystem folders records each file's hashes and identity.

A backup counts only when: nvflash said it saved, the file is a full dump (``NVGI``; or, for an RTX 50 card, the whole
EEPROM in the container layout seen on Blackwell: :data:`BACKUP_KINDS`), its subsystem and device equal the card's, its
version equals what nvflash printed for the adapter (and the inventory's, when known), and the stored file reads back
with the same SHA-256."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from pydantic import BaseModel, Field, ValidationError

from fwman.core import clock, paths
from fwman.core.errors import (
    BlockedError,
    ExitCode,
    FwmanError,
    HostChangeError,
    MissingError,
    NotRecordedError,
    ParseError,
)
from fwman.core.findings import Finding, Severity, Topic, blocking
from fwman.core.jsontext import parse_json
from fwman.firmware.nvflash import protocol as nvflash
from fwman.firmware.nvflash.runner import NvflashTool, driver_findings, last_error
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import IDENTITY_IDS, check_compatible
from fwman.gpu.card import Card
from fwman.host.base import Host

FORMAT = "fwman-backups"
VERSION = 1


class BackupError(FwmanError):
    """A backup could not be taken or did not verify (exit 4: nothing trustworthy was stored)."""

    exit_code = ExitCode.VERIFICATION


class BackupEntry(BaseModel):
    """One stored backup."""

    path: str
    run: str
    time: str
    card: str  # bus id
    subsystem: str
    device_id: str
    version: str | None
    board_id: str | None = None
    size: int
    sha256: str
    md5: str
    chain_sha256: str
    nvflash_version: str | None = None

    def is_of(self, card: Card) -> bool:
        """Return True when this backup was taken from ``card`` (same PCI location and subsystem)."""
        return self.card == card.bus_id and self.subsystem == card.subsystem


class Manifest(BaseModel):
    """Every backup fwman stored on this host."""

    format: str = FORMAT
    version: int = VERSION
    backups: list[BackupEntry] = Field(default_factory=list)

    def for_card(self, bus: str) -> list[BackupEntry]:
        """Return ``bus``'s backups, newest first."""
        return sorted((b for b in self.backups if b.card == bus), key=lambda b: b.run, reverse=True)

    def find(self, path: str) -> BackupEntry | None:
        """Return the entry stored at host path ``path``."""
        return next((b for b in self.backups if b.path == path), None)


def run_stamp(taken: set[str] | frozenset[str] = frozenset()) -> str:
    """Return a new backup run id: the UTC second (``20261129T083000Z``), ``-2``, ``-3``... when ``taken`` has it.

    Two runs started in the same second would otherwise share an id, and ``--reuse-backups-from`` could not
    tell them apart.
    """
    stamp = clock.now_utc().strftime("%Y%m%dT%H%M%SZ")
    run, n = stamp, 1
    while run in taken:
        n += 1
        run = f"{stamp}-{n}"
    return run


def card_dir(card: Card) -> str:
    """Return the folder of ``card``'s backups."""
    return f"{paths.BACKUPS_DIR}/{card.subsystem.replace(':', '-')}/{card.bus_id.replace(':', '-')}"


def load_manifest(host: Host) -> Manifest:
    """Return the manifest (empty when absent). Raises ParseError when it exists but is unreadable."""
    try:
        text = host.read_text(paths.BACKUPS_MANIFEST)
    except MissingError:
        return Manifest()
    data = parse_json(text, paths.BACKUPS_MANIFEST, "manifest")
    try:
        manifest = Manifest.model_validate(data)
    except (ValueError, ValidationError) as e:
        raise ParseError(paths.BACKUPS_MANIFEST, "manifest", str(e).splitlines()[0]) from e
    if manifest.format != FORMAT or manifest.version != VERSION:
        raise ParseError(paths.BACKUPS_MANIFEST, "format", f"not an {FORMAT} v{VERSION} manifest")
    return manifest


def reported_board_id(host: Host, card: Card) -> str | None:
    """Return the board ID nvflash reported for ``card`` when its newest backup was taken, or None.

    sysfs and nvidia-smi do not carry the VBIOS board ID (see ``Card.board_id``); nvflash does, and ``fwman
    backup`` records it. None when no backup of this card recorded one, or a replay did not record the manifest.
    Raises ParseError when the manifest exists but is unreadable (evidence is never skipped).
    """
    try:
        manifest = load_manifest(host)
    except NotRecordedError:
        return None
    for entry in sorted(manifest.backups, key=lambda b: b.run, reverse=True):
        if entry.is_of(card) and entry.board_id:
            return entry.board_id
    return None


def save_manifest(host: Host, manifest: Manifest) -> None:
    """Write the manifest atomically."""
    host.write_bytes(paths.BACKUPS_MANIFEST, (manifest.model_dump_json(indent=2) + "\n").encode())


#: what ``nvflash --save`` may give that counts as a backup: a full dump (``NVGI``), or the whole EEPROM of a card
#: whose dump opens with a prefix no public source documents (the Blackwell layout seen: ``container``). Either is
#: kept byte for byte and read back; a container is never a flash source (docs/rom.md), so it cannot be restored
#: by fwman, but every card of a mixed RTX 50 + RTX 30 box is backed up before any flash.
BACKUP_KINDS = (RomKind.NVGI_DUMP, RomKind.CONTAINER)


def check_dump(rom: RomImage, card: Card, expected_version: str | None) -> list[Finding]:
    """Return the findings on a dump of ``card``: ``block`` when it is not a full dump of this card.

    Whether the dump is this card's (device, subsystem, NVGI agreeing) is :func:`check_compatible`'s identity
    checks; a backup adds that it is a full ``nvflash --save`` dump of exactly the running version.
    """
    identity = check_compatible(rom, card, None, catalog=False)
    out = [f for f in identity if f.id in IDENTITY_IDS and f.severity is Severity.BLOCK]

    def bad(fid: str, message: str) -> None:
        out.append(Topic(fid).block(message))

    if rom.kind not in BACKUP_KINDS:
        bad("backup.kind", f"not a full dump: {rom.kind.description}")
    if rom.version is None:
        bad("backup.version", "dump has no readable version")
    elif expected_version is not None and rom.version != expected_version.upper():
        bad("backup.version", f"dump version {rom.version} is not the card's {expected_version}")
    if card.vbios_version and rom.version and rom.version != card.vbios_version.upper():
        bad("backup.version", f"dump version {rom.version} is not the inventory's {card.vbios_version}")
    return out


def require_backup_host(host: Host, euid: int) -> None:
    """Return when nvflash can save EEPROMs on ``host``: run as root, the NVIDIA driver unloaded.

    Raises BlockedError naming what is in the way.
    """
    if euid != 0:
        raise BlockedError("fwman backup needs root (nvflash reads the EEPROM as root)", hint="run with sudo")
    bad = blocking(driver_findings(host))
    if bad:
        raise BlockedError(bad[0].message, hint=bad[0].fix)


def take_backup(host: Host, tool: NvflashTool, card: Card, run: str) -> BackupEntry:
    """Save ``card``'s EEPROM with nvflash, check it, store it under a new name and record it in the manifest.

    Returns the manifest entry. Raises BlockedError when nvflash refuses (driver loaded), BackupError when the
    save fails, the dump does not check out, or the file cannot be stored (disk full).
    """
    adapter = tool.adapter_for(card)
    folder = card_dir(card)
    tmp = f"{folder}/.fwman-save-{run}.rom"
    try:
        host.mkdir(folder)
    except (OSError, HostChangeError) as e:
        raise BackupError(f"cannot create {folder}: {e.strerror}") from e
    local = host.local_path(tmp)
    if local is None:
        raise BackupError("this host has no real filesystem to save a backup to")
    try:
        result = tool.run(nvflash.save_argv(adapter.index, local, tool.path))
        try:
            data = host.read_bytes(tmp)
        except MissingError:
            data = b""
    finally:
        host.unlink(tmp)
    text = result.stdout + result.stderr
    if result.rc != 0 or not data:
        raise BackupError(
            f"nvflash could not save card {card.bus_id} (exit {result.rc}): {last_error(text)}",
            hint="nothing was stored for this card; fix the cause and run `fwman backup` again",
        )
    try:
        block = nvflash.parse_block(result.stdout)
        rom = parse_rom(data)
    except ParseError as e:
        raise BackupError(f"backup of {card.bus_id} does not parse: {e.message}") from e
    problems = check_dump(rom, card, block.version)
    if problems:
        raise BackupError(f"backup of {card.bus_id} rejected: " + "; ".join(f.message for f in problems))
    version = rom.version or "unknown"
    path = f"{folder}/{run}-{version}.rom"
    n = 1
    while host.exists(path):  # never overwrite: a second backup in the same second gets a suffix
        n += 1
        path = f"{folder}/{run}-{version}-{n}.rom"
    try:
        host.write_bytes(path, data, mode=0o444)
    except (OSError, HostChangeError) as e:
        raise BackupError(
            f"cannot store the backup of {card.bus_id} at {path}: {e.strerror}",
            hint="free space under /var/lib/fwman/backups (each backup is about 1 MB), then run again",
        ) from e
    stored = host.read_bytes(path)
    if hashlib.sha256(stored).hexdigest() != rom.sha256:
        host.unlink(path)
        raise BackupError(f"backup of {card.bus_id} read back with another SHA-256: the disk is failing?")
    entry = BackupEntry(
        path=path,
        run=run,
        time=clock.timestamp(),
        card=card.bus_id,
        subsystem=card.subsystem,
        device_id=card.device_id,
        version=rom.version,
        board_id=block.board_id,
        nvflash_version=tool.version,
        **rom.model_dump(include={"size", "sha256", "md5", "chain_sha256"}),
    )
    try:
        manifest = load_manifest(host)
        manifest.backups.append(entry)
        save_manifest(host, manifest)
    except (OSError, HostChangeError, ParseError) as e:
        host.unlink(path)  # an unrecorded file would not count as a backup; do not leave it behind
        message = e.strerror if isinstance(e, (OSError, HostChangeError)) else e.message
        raise BackupError(f"cannot record the backup of {card.bus_id} in {paths.BACKUPS_MANIFEST}: {message}") from e
    return entry


def verify_entry(host: Host, entry: BackupEntry, card: Card | None = None) -> list[Finding]:
    """Return findings re-checking one stored backup (hash, parse, identity); ``ok`` when all is well."""
    fid = f"backup.verify.{entry.card}"
    try:
        data = host.read_bytes(entry.path)
    except MissingError:
        return [Topic(fid).block(f"backup missing: {entry.path}")]
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        evidence = {"manifest sha256": entry.sha256, "file sha256": digest}
        return [Topic(fid, evidence).block(f"backup changed on disk: {entry.path}")]
    try:
        rom = parse_rom(data)
    except ParseError as e:
        return [Topic(fid).block(f"backup does not parse: {e.message}")]
    problems = []
    if rom.kind not in BACKUP_KINDS:
        problems.append(f"not a full dump ({rom.kind.value})")
    if rom.subsystem != entry.subsystem:
        problems.append(f"subsystem {rom.subsystem} is not {entry.subsystem}")
    if rom.version != entry.version:
        problems.append(f"version {rom.version} is not {entry.version}")
    if card is not None and (card.subsystem != entry.subsystem or card.device_id != entry.device_id):
        problems.append(f"card {card.bus_id} is now {card.subsystem}, the backup is of {entry.subsystem}")
    if problems:
        return [Topic(fid).block(f"{entry.path}: " + "; ".join(problems))]
    return [Topic(fid).ok(f"{entry.path} verifies (sha256 {digest[:16]}…)")]


def stray_files(host: Host, manifest: Manifest) -> list[str]:
    """Return ``.rom`` files under the backup folder that the manifest does not know (warned by verify)."""
    known = {b.path for b in manifest.backups}
    found: list[str] = []
    try:
        subsystems = host.listdir(paths.BACKUPS_DIR)
    except MissingError:
        return found
    for sub in subsystems:
        base = f"{paths.BACKUPS_DIR}/{sub}"
        if not host.is_dir(base):
            continue
        for cid in host.listdir(base):
            if not host.is_dir(f"{base}/{cid}"):
                continue
            for name in host.listdir(f"{base}/{cid}"):
                path = f"{base}/{cid}/{name}"
                if name.endswith(".rom") and not name.startswith(".") and path not in known:
                    found.append(path)
    return found


def backup_all(
    host: Host,
    tool: NvflashTool,
    cards: list[Card],
    run: str | None = None,
    on_card: Callable[[Card, BackupEntry | None, FwmanError | None], None] | None = None,
) -> tuple[str, dict[str, BackupEntry], dict[str, FwmanError]]:
    """Back up every card in one run. Returns (run id, entries by bus, errors by bus); never stops early."""
    if run is None:
        try:
            taken = {b.run for b in load_manifest(host).backups}
        except ParseError:  # each card's backup then says the manifest cannot take it
            taken = set()
        run = run_stamp(taken)
    done: dict[str, BackupEntry] = {}
    failed: dict[str, FwmanError] = {}
    for card in cards:
        entry, error = None, None
        try:
            entry = done[card.bus_id] = take_backup(host, tool, card, run)
        except BlockedError:
            raise
        except FwmanError as e:
            error = failed[card.bus_id] = e
        if on_card:
            on_card(card, entry, error)
    return run, done, failed


def reuse_backups(host: Host, cards: list[Card], run: str) -> tuple[dict[str, BackupEntry], list[Finding]]:
    """Return the backups of run ``run`` for every card and the findings re-verifying them."""
    manifest = load_manifest(host)
    entries: dict[str, BackupEntry] = {}
    findings: list[Finding] = []
    for card in cards:
        match = [b for b in manifest.for_card(card.bus_id) if b.run == run]
        if not match:
            fix = "run `fwman backup --all` (or flash without --reuse-backups-from to back up now)"
            findings.append(
                Topic(f"backup.verify.{card.bus_id}").block(f"no backup of {card.bus_id} from run {run}", fix)
            )
            continue
        entries[card.bus_id] = match[0]
        findings.extend(verify_entry(host, match[0], card))
    return entries, findings
