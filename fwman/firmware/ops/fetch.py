"""Downloading (through the HTTP door, :mod:`fwman.host.http`) and importing firmware images into the cache.

An image reaches ``/var/cache/fwman/images/<board>/<file>`` only after its size, MD5 and SHA-256 (whichever the
catalog, or the owner's ``--expect-md5``, knows) and, where the ROM parser can read it, its header (subsystem,
version, catalog status) have been checked. A download that fails or is interrupted keeps what arrived in
``<file>.part`` next to it, so a cut connection or Ctrl-C resumes with an HTTP Range request on the next attempt;
a hash mismatch or an oversized body leaves nothing behind.

"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fwman.core import clock, paths
from fwman.core.errors import BlockedError, FwmanError, MissingError, UsageError, VerificationError
from fwman.core.findings import Finding, Severity, Topic, blocking
from fwman.core.jsonout import OMIT, encode, fields_of, meta
from fwman.firmware.catalog.load import CatalogEntry
from fwman.firmware.catalog.overrides import HashOverride, find_override, load_overrides, record_override
from fwman.firmware.catalog.schema import ImageStatus
from fwman.firmware.rom.model import RomKind
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import check_compatible
from fwman.host.base import Host
from fwman.host.http import DownloadError, HttpOptions, Progress, http_get
from fwman.host.userfiles import read_user_file, user_path

if TYPE_CHECKING:
    from fwman.firmware.ops.authenticode import SignedPackage

#: cap for an image whose size the catalog does not know (the largest NVIDIA images are ~2 MB)
DEFAULT_IMAGE_CAP = 4 * 1024 * 1024
_MD5 = re.compile(r"^[0-9a-fA-F]{32}$")

# -- the image cache -----------------------------------------------------------------------------------------


def cache_path(entry: CatalogEntry) -> str:
    """Return where the verified image of ``entry`` lives: ``/var/cache/fwman/images/<board>/<file>``."""
    return f"{paths.IMAGE_CACHE_DIR}/{entry.board.pci.file_stem}/{entry.image.file_name}"


@dataclass(frozen=True)
class Expected:
    """The hashes an image must have, and where each came from."""

    md5: str = ""
    sha256: str = ""
    size: int | None = None
    origin: str = ""  # "catalog", "local override (<source>)", "--expect-md5"

    @property
    def any(self) -> bool:
        """Return True when at least one hash is known."""
        return bool(self.md5 or self.sha256)


def expected_hashes(entry: CatalogEntry, override: HashOverride | None, expect_md5: str | None) -> Expected:
    """Return the hashes ``entry``'s file must match: the catalog's, else a recorded override, else ``expect_md5``.

    Raises UsageError for a malformed ``expect_md5``, VerificationError when it contradicts the catalog or a
    recorded override (one of the two is wrong: fwman does not pick).
    """
    image = entry.image
    given = expect_md5.lower() if expect_md5 else None
    if given is not None and not _MD5.match(given):
        raise UsageError(f"--expect-md5 {expect_md5}: not an MD5 (32 hex digits)")
    if image.md5 and given and given != image.md5:
        raise VerificationError(
            f"--expect-md5 {given} contradicts the catalog's MD5 {image.md5} for {entry.ref}",
            hint="check where you copied the hash from; the catalog's hash is used without --expect-md5",
        )
    if image.has_hash:
        return Expected(image.md5, image.sha256, image.size, entry.hash_origin)
    if override is not None:
        if given and given != override.md5:
            raise VerificationError(
                f"--expect-md5 {given} contradicts the MD5 {override.md5} recorded for {entry.ref} "
                f"(source: {override.source})",
                hint="remove the wrong entry from /var/lib/fwman/overrides.toml if the recorded one is wrong",
            )
        return Expected(override.md5, override.sha256, override.size, f"local override ({override.source})")
    if given:
        return Expected(given, "", image.size, "--expect-md5")
    return Expected(size=image.size)


def check_hashes(data: bytes, expected: Expected, what: str) -> tuple[str, str]:
    """Return (md5, sha256) of ``data`` after checking them and the size against ``expected``.

    Raises VerificationError naming the first mismatch.
    """
    md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
    sha256 = hashlib.sha256(data).hexdigest()
    if expected.size is not None and len(data) != expected.size:
        raise VerificationError(f"{what}: size {len(data)} bytes, expected {expected.size} ({expected.origin})")
    if expected.md5 and md5 != expected.md5:
        raise VerificationError(
            f"{what}: MD5 mismatch: got {md5}, expected {expected.md5} ({expected.origin})",
            hint="the file is not the published image (corrupted or different); nothing was kept",
        )
    if expected.sha256 and sha256 != expected.sha256:
        raise VerificationError(
            f"{what}: SHA-256 mismatch: got {sha256}, expected {expected.sha256} ({expected.origin})",
            hint="the file is not the published image (corrupted or different); nothing was kept",
        )
    return md5, sha256


def rom_findings(data: bytes, entry: CatalogEntry, override_md5: str | None) -> list[Finding]:
    """Return the compatibility findings for ``data`` parsed as a ROM, before any card is known.

    The image kind, then the catalog's checks (subsystem, version, hash, status): see
    :func:`fwman.firmware.verify.compatible.check_compatible`. Raises ParseError (a VerificationError) when the
    bytes are not a VBIOS image.
    """
    return check_compatible(parse_rom(data), None, entry, override_md5=override_md5)


@dataclass
class FetchResult:
    """What ``fetch_image`` put in the cache."""

    entry: CatalogEntry = field(metadata=OMIT)  # in JSON: the board's key and subsystem, the image's version, status
    path: str
    size: int
    md5: str
    sha256: str
    source: str  # the URL, or "file <path>"
    verified_by: str  # where the expected hash came from
    cached_before: bool = False
    override_recorded: bool = False
    findings: list[Finding] = field(default_factory=list)
    #: the verified signer of the update package the image came from (None when a hash vouched for it)
    signed: SignedPackage | None = field(default=None, metadata=meta(key="signed_package"))

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form (``fwman.fetch/2``; the cache's record of the file keeps ``board``): the entry's
        board and image, then the fields (:func:`fwman.core.jsonout.fields_of`)."""
        board, image = self.entry.board, self.entry.image
        return {"pci_key": board.key, "subsystem": board.subsystem, "version": image.version,
                "status": image.status.value, **fields_of(self)}  # fmt: skip


def refuse_withdrawn(entry: CatalogEntry, doing: str) -> None:
    """Raise BlockedError when ``entry``'s image is withdrawn; the hint names the image to use instead.

    ``doing`` is the command refused (``fetch``, ``flash --card 41:00.0``): the hint gives that command for the
    board's recommended image (the newest neither withdrawn nor superseded), which is never refused for this
    reason. Returns None for any other status.
    """
    image = entry.image
    if image.status is not ImageStatus.WITHDRAWN:
        return
    instead = f"; use {image.superseded_by}" if image.superseded_by else ""
    better = entry.board.recommended()
    if better is None:
        board = entry.board.subsystem
        hint = f"the catalog recommends no other image for {board}: see fwman catalog show {board}"
    else:
        ref = f"{entry.board.subsystem}/{better.version}"
        hint = f"withdrawn images are never fetched or flashed; the board's recommended image is {better.version}: " + (
            f"fwman fetch {ref}" if doing == "fetch" else f"fwman fetch {ref}, then fwman {doing} --image {ref}"
        )
    raise BlockedError(f"{entry.ref} was withdrawn: {image.status_reason or 'no reason recorded'}{instead}", hint=hint)


def fetch_image(
    host: Host,
    entry: CatalogEntry,
    *,
    urls: Sequence[str] = (),
    from_file: str | None = None,
    expect_md5: str | None = None,
    md5_source: str | None = None,
    options: HttpOptions | None = None,
    progress: Progress | None = None,
    now: datetime | None = None,
) -> FetchResult:
    """Download (from ``urls``, else the catalog's) or import (``from_file``) ``entry``'s image into the cache.

    ``from_file`` is read through the user-file door (:func:`fwman.host.userfiles.read_user_file`): a
    hand-downloaded file is on the machine the user sits at, relative to the real working directory, even with
    ``--root``.

    Order: gates (withdrawn, no known hash) before any byte moves; the body into ``<file>.part``; size, MD5 and
    SHA-256; the ROM header and catalog findings; only then the atomic write into the cache, a ``<file>.json``
    record beside it, and, for ``--expect-md5``, the local override. Raises BlockedError (withdrawn, or no hash
    to check against), VerificationError (mismatch; nothing is left behind), DownloadError, UsageError.
    """
    image = entry.image
    refuse_withdrawn(entry, "fetch")
    override = find_override(load_overrides(host), entry.board.key, image.version)
    expected = expected_hashes(entry, override, expect_md5)
    signers = entry.board.board.package_signers
    if not expected.any and not (from_file is not None and signers):
        raise _unverified(entry)
    cap = expected.size or DEFAULT_IMAGE_CAP
    final = cache_path(entry)
    part = final + ".part"
    # a cached file counts only against a known hash: with none yet (a signed package to vouch), it is replaced
    cached = _already_cached(host, final, expected) if expected.any else None
    if cached is not None:
        md5, sha256, size = cached
        return FetchResult(entry, final, size, md5, sha256, "cache", expected.origin, cached_before=True)

    signed: SignedPackage | None = None
    if from_file is not None:
        source = f"file {from_file}"
        data, expected, member, signed = _from_file(host, from_file, entry, expected, cap)
        if member:
            source = f"file {from_file}, {member}"
    else:
        candidates = list(urls) or list(image.urls)
        if not candidates:
            raise MissingError(
                f"no download URL is known for {entry.ref}",
                hint=f"download it from the card maker's site in a browser, then: fwman fetch {entry.ref} --image FILE",
            )
        data, source = _download_any(host, candidates, part, cap, options or HttpOptions(), progress)

    try:
        md5, sha256 = check_hashes(data, expected, source)
        packaged = expected.origin.endswith("of the package")
        vouched = expected.origin not in ("catalog", "local entry") and not packaged and signed is None
        findings = rom_findings(data, entry, expected.md5 if vouched else None)
        if packaged or signed is not None:
            why = signed.provenance if signed is not None else None
            findings = [
                _package_hash_finding(f, expected.origin, why) if f.id == "catalog.hash" else f for f in findings
            ]
        blocks = blocking(findings)
        if blocks:
            raise VerificationError(
                f"{source}: {blocks[0].message}", hint=blocks[0].fix or "nothing was kept in the cache"
            )
    except FwmanError:
        host.unlink(part)  # a mismatch leaves nothing behind
        raise

    stamp = clock.format_timestamp(now or clock.now_utc())
    host.mkdir(final.rsplit("/", 1)[0])
    host.write_bytes(final, data)
    ids: dict[str, Any] = {"board": entry.board.key, "version": image.version}
    own: dict[str, Any] = {"size": len(data), "md5": md5, "sha256": sha256}  # the image's own hashes
    record = {**ids, **own, "source": source, "verified_by": expected.origin, "fetched_at": stamp}
    if signed is not None:
        record["signed_package"] = encode(signed)
    host.write_bytes(final + ".json", (json.dumps(record, indent=2) + "\n").encode())
    host.unlink(part)
    recorded = False
    if expected.origin.startswith("--expect-md5"):
        packaged = expected.origin.endswith("of the package")
        # from a package, the vendor MD5 is of the package: recorded as such (the image's hashes are in the record)
        hashes = {"md5": (expect_md5 or "").lower(), "sha256": "", "size": None} if packaged else own
        typed = md5_source or "typed by the owner (fwman fetch --expect-md5)"
        typed += " (MD5 of the update package)" if packaged else ""
        record_override(host, HashOverride(**ids, **hashes, source=typed, recorded_at=stamp))
        recorded = True
    if signed is not None:
        # the image's own hashes, vouched for by the verified signature: a later flash (or fetch) checks the image
        # against them, and `fwman flash report` carries them so the catalog can learn them
        signer = {"signer": signed.subject, "package_sha256": signed.package_sha256}
        record_override(host, HashOverride(**ids, **own, **signer, source=signed.provenance, recorded_at=stamp))
        recorded = True
    return FetchResult(entry, final, len(data), md5, sha256, source, expected.origin, False, recorded, findings, signed)


def _unverified(entry: CatalogEntry) -> BlockedError:
    """Return the refusal of an image nothing can vouch for: no published hash, no signer the catalog records."""
    maker = entry.board.board.maker
    if entry.board.board.package_signers:
        how = (
            f"import {maker}'s signed update program (fwman fetch {entry.ref} --image PROGRAM.exe), or "
            f"supply the vendor-published MD5 (fwman fetch {entry.ref} --image FILE --expect-md5 HEX)"
        )
    else:
        how = (
            f"find the MD5 on the card maker's download page and run again with --expect-md5 HEX "
            f"(e.g. fwman fetch {entry.ref} --image FILE --expect-md5 HEX); the catalog records no signer of "
            f"{maker}'s update programs, so a signed package cannot vouch for it either"
        )
    return BlockedError(
        f"{entry.ref} is unverified: no published hash is known, so the image could not be checked", hint=how
    )


def _package_hash_finding(finding: Finding, origin: str, signed: str | None = None) -> Finding:
    """Return the hash finding for an image unpacked from a package whose MD5 matched the vendor's, or (``signed``:
    its provenance words) whose Authenticode signature verified with a signer the catalog records.

    Only the "no hash known" block is replaced: a mismatch with a hash the catalog does know stays a block.
    """
    if finding.severity is not Severity.BLOCK or "unverified" not in finding.message:
        return finding
    vendor_md5 = (
        f"unpacked from an update package whose MD5 matches the vendor's ({origin.removesuffix(' of the package')})"
    )
    return Topic("catalog.hash", finding.evidence).ok(signed if signed is not None else vendor_md5)


def _from_file(
    host: Host, path: str, entry: CatalogEntry, expected: Expected, cap: int
) -> tuple[bytes, Expected, str, SignedPackage | None]:
    """Return (image bytes, what they must still match, the package member, the verified signer) for the
    hand-downloaded ``path``.

    ``path`` comes through the user-file door (a file on this machine, relative to the real working directory,
    also with ``--root``). A plain ROM is the image. Anything else is taken as a vendor update package: its
    VBIOS images are found by structure (:mod:`fwman.firmware.rom.package`; unpacked with 7zz on this machine
    by :mod:`fwman.firmware.ops.unpack`) and the one for ``entry`` (subsystem, device, version) is taken,
    refusing none or several. An MD5 typed by the owner (or recorded for them) is the vendor's MD5 of the file
    they downloaded, so it is checked against the package; the catalog's (or local entry's) hashes are of the
    image and are checked against the image. With no hash known at all, the package's Authenticode signature
    must verify with a signer the catalog records for the board (:mod:`fwman.firmware.ops.authenticode`,
    trusted roots read through ``host``), before it is unpacked. Raises MissingError, VerificationError,
    BlockedError.
    """
    # a package's unpacking and signature check (7zz, cryptography) stay here: `upgrade --dry-run` loads this
    # module for the cache's paths and never opens a package
    from fwman.firmware.ops.authenticode import verify_package
    from fwman.firmware.ops.unpack import MAX_PACKAGE, scan_package
    from fwman.firmware.rom.package import select_image
    from fwman.host.live import LiveHost

    try:
        raw = read_user_file(path, max_bytes=max(cap, MAX_PACKAGE))
    except MissingError as e:
        raise MissingError(e.message, hint="give the path of the image or update package you downloaded") from e
    except UsageError as e:
        raise VerificationError(e.message, hint=f"not an image or update package for {entry.ref}") from e
    # the package is unpacked from ``raw`` itself (a private copy), never from the file again: the MD5 checked
    # below then covers exactly the bytes the image comes from, even if the file changes meanwhile
    _refuse_truncated(path, raw)
    runner = LiveHost("/")
    signed: SignedPackage | None = None
    if not expected.any:
        # nothing published to compare with: only the maker's signature can vouch, and it is checked before the
        # package is unpacked or searched (a plain ROM carries no signature and is refused here too)
        if not raw.startswith(b"MZ"):
            raise _unverified(entry)
        signed = verify_package(host, runner, raw, entry.board, f"file {path}")
    scan = scan_package(runner, user_path(path), raw)
    if scan.images and scan.images[0].extent == "file" and scan.images[0].data == raw:
        if len(raw) > cap:
            # larger than the catalog's size (or the default cap): not the published image
            raise VerificationError(f"{path}: larger than the {cap}-byte limit for {entry.ref}")
        return raw, expected, "", None  # a plain ROM
    board = entry.board
    hit = select_image(scan, board.subsystem, board.pci.device, entry.image.version)
    member = f"image {hit.describe()}"
    if signed is not None:
        return hit.data, Expected(size=None, origin=f"package signed by {board.board.maker}"), member, signed
    if expected.origin in ("catalog", "local entry"):
        return hit.data, expected, member, None
    # the owner's vendor MD5 covers the download (the package); once it matches, the image inside is vouched for
    check_hashes(raw, Expected(md5=expected.md5, origin=expected.origin), f"file {path}")
    return hit.data, Expected(size=None, origin=f"{expected.origin} of the package"), member, None


def _refuse_truncated(path: str, raw: bytes) -> None:
    """Raise VerificationError when ``raw`` is a VBIOS image cut short (it starts as one, ends inside an image).

    Said as ``fwman rom inspect`` says it, never as "no image found": the package search does not take a cut
    file as an image, so without this the owner heard about unpackers instead. Returns None for anything else.
    """
    try:
        rom = parse_rom(raw)
    except VerificationError:
        return  # not a VBIOS image as a whole: a package, searched as one
    if rom.kind is not RomKind.TRUNCATED:
        return
    declared = f"{rom.declared_size:,}" if rom.declared_size is not None else "more"
    raise VerificationError(
        f"{path}: truncated: the header says {declared} bytes, the file has {len(raw):,}: "
        "not a whole image, never a flash source",
        hint=f"download the image again; fwman rom inspect {path} shows where it ends",
    )


def _already_cached(host: Host, path: str, expected: Expected) -> tuple[str, str, int] | None:
    """Return (md5, sha256, size) when ``path`` already holds a file matching ``expected``, else None."""
    try:
        if not host.exists(path):
            return None
        data = host.read_bytes(path)
    except MissingError:
        return None
    try:
        md5, sha256 = check_hashes(data, expected, path)
    except VerificationError:
        return None  # a stale or damaged cache entry is replaced by a fresh, verified one
    return md5, sha256, len(data)


def _download_any(
    host: Host, urls: Sequence[str], part: str, cap: int, options: HttpOptions, progress: Progress | None
) -> tuple[bytes, str]:
    """Return (body, url) from the first URL that works; keeps ``part`` updated for resuming."""
    for url in urls:
        if not url.startswith(("https://", "http://")):
            raise UsageError(f"{url}: only http(s) URLs can be downloaded")
    host.mkdir(part.rsplit("/", 1)[0])
    try:
        resume = host.read_bytes(part) if host.exists(part) else b""
    except MissingError:
        resume = b""

    def save(data: bytes) -> None:
        host.write_bytes(part, data)

    last: DownloadError | None = None
    for url in urls:
        try:
            return http_get(host, url, cap=cap, options=options, progress=progress, resume=resume, save=save), url
        except VerificationError:
            host.unlink(part)
            raise
        except DownloadError as e:
            last = e
            resume = host.read_bytes(part) if host.exists(part) else b""
    assert last is not None
    if len(urls) > 1:
        raise DownloadError(f"every source failed; last: {last.message}", hint=last.hint)
    raise last
