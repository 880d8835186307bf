"""``fwman catalog keys show`` and ``catalog keys sign``: the use cases (the keys document read and checked, or
written and signed), whose results own their JSON shapes (``fwman.catalog-keys/1``, ``catalog-keys-sign/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fwman.app.catalog.signed_files import Written, metadata_time, today, write_files
from fwman.app.text import Out, Result, say
from fwman.core import clock
from fwman.core.errors import FwmanError, MissingError, UsageError, VerificationError
from fwman.core.jsonout import OMIT
from fwman.core.names import iso_date
from fwman.core.resources import is_data_file, read_data
from fwman.core.signing import TrustedKey, load_private_key, load_public_key
from fwman.firmware.catalog.load import BUNDLED_CATALOG, installed_keys
from fwman.firmware.catalog.publish import KeysChange, sign_keys_directory
from fwman.firmware.catalog.signing import (
    KEYS_NAME,
    KEYS_SIG_NAME,
    MAX_KEYS_FILE,
    KeysDocument,
    parse_keys,
    root_keys,
    verify_keys_document,
)
from fwman.firmware.catalog.tree import user_tree
from fwman.host.base import Host
from fwman.host.userfiles import is_user_file, read_user_file, user_path


def key_state(key: TrustedKey, now: datetime) -> str:
    """Return ``"valid"``, ``"not yet valid"`` or ``"expired"``: a catalog key's window at ``now``."""
    if key.not_before is not None and now < key.not_before:
        return "not yet valid"
    if key.not_after is not None and now >= key.not_after:
        return "expired"
    return "valid"


@dataclass
class KeysView(Result):
    """The keys document in force (or of a directory): its keys with their state, and whether it verifies."""

    origin: str
    doc: KeysDocument
    named: list[TrustedKey]  # the document's catalog keys, as trusted keys (their windows parsed)
    now: datetime
    root_id: str | None  # the root key that signed it (None: it does not verify)
    problem: str | None  # why the signature does not verify (None: it does)

    @property
    def expired(self) -> bool:
        """Return True when the document's expiry has passed."""
        return self.now >= self.doc.expires_at

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-keys/1``."""
        doc, now = self.doc, self.now
        return {
            "origin": self.origin,
            "serial": doc.serial,
            "date": doc.date,
            "expires": doc.expires,
            "expired": self.expired,
            "signature": {"good": self.problem is None, "root_key_id": self.root_id, "problem": self.problem},
            "keys": [{**k.model_dump(), "state": key_state(t, now)} for k, t in zip(doc.keys, self.named, strict=True)],
            "retired": [r.model_dump() for r in doc.retired],
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: the document, who signed it, each key with its window and state, the retired."""
        doc = self.doc
        signed = f"signed by root key {self.root_id}" if self.problem is None else f"signature: {self.problem}"
        out = [
            f"keys document serial {doc.serial} ({doc.date}, expires {doc.expires}) at {self.origin}",
            f"  {signed}",
            "KEY               VALID FROM            VALID UNTIL           STATE",
        ]
        out += [f"{k.key_id}  {k.not_before}  {k.not_after}  {key_state(t, self.now)}"
                for k, t in zip(doc.keys, self.named, strict=True)]  # fmt: skip
        out += [f"{r.key_id}  retired {r.retired}: {r.reason}" for r in doc.retired]
        return [say(text) for text in out]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when the document does not verify or has expired; else None."""
        if self.problem is None and not self.expired:
            return None
        return VerificationError(
            f"{self.origin}: " + (self.problem or f"expired on {self.doc.expires}"),
            hint="a maintainer signs a new one with the root key: `fwman catalog keys sign --key ROOT.pem`",
        )


def show_keys(host: Host, directory: str | None = None) -> KeysView:
    """Return the keys document in force on ``host`` (installed or bundled), or the one in ``directory`` (a
    maintainer's copy named on the command line), checked against the root keys.

    Raises MissingError when none is installed, VerificationError when it cannot be parsed. A signature that
    does not verify is returned as ``problem`` (the CLI shows it, then ends with :meth:`KeysView.failure`).
    """
    now = clock.now_utc()
    if directory is None:
        current = installed_keys(host)
        if current.doc is None or current.data is None:
            raise MissingError("no keys document installed", hint="install a catalog with `fwman catalog update`")
        data, origin = current.data, current.origin
        sig_path = Path(origin).with_name(KEYS_SIG_NAME)
        sig = (
            current.local_pair[1]
            if current.local_pair is not None
            else (read_data(sig_path, MAX_KEYS_FILE) if is_data_file(sig_path) else b"")
        )
    else:
        # the maintainer's directory, named on the command line: the user-file door, not fwman's bundled data
        origin = f"{directory}/{KEYS_NAME}"
        data = read_user_file(origin, max_bytes=MAX_KEYS_FILE)
        sig_file = f"{directory}/{KEYS_SIG_NAME}"
        sig = read_user_file(sig_file, max_bytes=MAX_KEYS_FILE) if is_user_file(sig_file) else b""
    doc = parse_keys(data, origin)
    problem = root_id = None
    try:
        # the expiry is reported on its own: the signature is checked first
        _, root = verify_keys_document(data, sig, root_keys(host), None, origin)
        root_id = root.key_id
    except VerificationError as e:  # shown as the document's state, then exit 4
        problem = e.message
    return KeysView(origin, doc, doc.catalog_keys(origin), now, root_id, problem)


@dataclass
class KeysSigned(Written, Result):
    """What ``catalog keys sign`` wrote: the new keys document (``keys.json`` and its signature)."""

    doc: KeysDocument | None = field(default=None, metadata=OMIT)
    directory: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-keys-sign/1``: the fields (:class:`Written`'s, the directory),
        then the document's."""
        d = self.doc
        assert d is not None
        return {**super().to_json(), "serial": d.serial, "date": d.date, "expires": d.expires,
                "catalog_keys": [k.key_id for k in d.keys], "retired": [r.key_id for r in d.retired]}  # fmt: skip

    def text(self, verbose: int = 0) -> Out:
        """Return what people are told: the document written (or to write), its keys and the retired ones."""
        d = self.doc
        assert d is not None
        named = ", ".join(k.key_id for k in d.keys)
        gone = ", ".join(r.key_id for r in d.retired) or "none"
        verb = "would sign" if self.dry_run else "signed"
        return [say(f"{verb} {self.directory}/keys.json: serial {d.serial}, {d.date}, expires {d.expires}"),
                say(f"  catalog keys: {named}; retired: {gone}")]  # fmt: skip


@dataclass
class KeysRequest:
    """What ``catalog keys sign`` is asked to change (the option values, not yet checked)."""

    add: tuple[str, ...] = ()  # public key files (PEM) to name
    not_before: str | None = None
    not_after: str | None = None
    note: str = ""
    retire: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    reason: str = ""
    expires: str | None = None
    serial: int | None = None
    date: str | None = None


def sign_keys(host: Host, key_file: str, directory: str | None, request: KeysRequest, *,
              dry_run: bool = False) -> KeysSigned:  # fmt: skip
    """Write ``keys.json`` (the catalog keys and retired key ids, a new serial, an expiry) and its signature
    into the catalog ``directory`` (a directory the user names; None: the bundled catalog), signed with the
    root key in ``key_file``; with ``dry_run`` only check and say what would be written.

    Raises UsageError for a bad key id, date or key (one that is not a root key of ``host``), VerificationError
    when the current keys.json is malformed.
    """
    r = request
    path = user_path(directory or str(BUNDLED_CATALOG))
    stamp = iso_date(r.date) if r.date is not None else today()
    for kid in (*r.retire, *r.drop):
        if len(kid) != 16 or any(c not in "0123456789abcdef" for c in kid):
            raise UsageError(f"--retire/--drop {kid!r}: a key id is 16 lower-case hex digits")
    change = KeysChange(
        date=stamp,
        add=tuple(load_public_key(read_user_file(p), p) for p in r.add),
        not_before=metadata_time(r.not_before, "--not-before") if r.not_before else None,
        not_after=metadata_time(r.not_after, "--not-after") if r.not_after else None,
        note=r.note,
        retire=r.retire,
        drop=r.drop,
        reason=r.reason,
        expires=metadata_time(r.expires, "--expires") if r.expires else None,
        serial=r.serial,
    )
    root = load_private_key(read_user_file(key_file), key_file)
    doc, data, sig = sign_keys_directory(user_tree(path), root, root_keys(host), change)
    written = write_files(path, {KEYS_NAME: data, KEYS_SIG_NAME: sig}, dry_run)
    return KeysSigned(dry_run, written.files, doc, path)
