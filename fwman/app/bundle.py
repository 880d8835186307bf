"""``fwman modules export`` / ``import`` as use cases: the bundle file (a user file) and its Ed25519 signature.

:mod:`fwman.driver.bundle` makes and installs bundles; the signature is the catalog's format
(:mod:`fwman.firmware.catalog.signing`), which driver/ may not import (a sibling), so it is joined here. Trusted
bundle keys are ``/etc/fwman/bundle-keys.d/*.pub`` on the host, deliberately not the catalog's keys: a fleet
owner signs their own bundles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fwman.app.change import free
from fwman.app.text import Out, Result, say
from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, VerificationError
from fwman.driver.bundle import Bundle, ImportOutcome, export_bundle, import_bundle, plan_import, unpack
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file, write_user_file

if TYPE_CHECKING:
    from fwman.firmware.catalog.signing import TrustedKey

#: a bundle of the real driver is ~100 MiB; refuse to read anything far beyond that into memory
MAX_BUNDLE_BYTES = 2 * 1024 * 1024 * 1024


def trusted_bundle_keys(host: Host) -> list[TrustedKey]:
    """Return the keys bundles are accepted from ([] when the host trusts none).

    Raises VerificationError for a key file that is not an Ed25519 public key (a broken trust store is reported).
    """
    from fwman.firmware.catalog.signing import load_public_key

    try:
        names = host.listdir(paths.BUNDLE_KEYS_DIR) if host.is_dir(paths.BUNDLE_KEYS_DIR) else []
    except (MissingError, NotRecordedError):
        names = []
    keys = []
    for name in sorted(names):
        if name.endswith(".pub"):
            path = f"{paths.BUNDLE_KEYS_DIR}/{name}"
            keys.append(load_public_key(host.read_bytes(path, limit=64 * 1024), path))
    return keys


def signature_check(host: Host) -> Callable[[Bundle], str]:
    """Return the check :func:`fwman.driver.bundle.plan_import` runs on a bundle's signature for ``host``.

    With trusted keys the bundle must be signed by one of them; without any, a signature is reported but not
    checked (nothing to check it against). The check raises VerificationError for an unsigned bundle when keys
    are trusted, a signature by an unknown key, or one that does not verify.
    """
    from fwman.firmware.catalog.signing import signature_key_id, verify_index

    keys = trusted_bundle_keys(host)

    def check(bundle: Bundle) -> str:
        if not keys:
            if bundle.signature is None:
                return f"unsigned bundle (no trusted bundle key in {paths.BUNDLE_KEYS_DIR}/)"
            return f"signature not checked: no trusted bundle key in {paths.BUNDLE_KEYS_DIR}/"
        if bundle.signature is None:
            raise VerificationError(
                f"the bundle is not signed, and this host trusts only signed bundles ({paths.BUNDLE_KEYS_DIR}/)",
                hint="export it with --sign-key KEY.pem on the build host",
            )
        claimed = signature_key_id(bundle.signature)
        if claimed not in {k.key_id for k in keys}:
            trusted = ", ".join(sorted(k.key_id for k in keys))
            raise VerificationError(
                f"the bundle is signed by key {claimed}, which this host does not trust",
                hint=f"trusted: {trusted}; add the fleet's public key to {paths.BUNDLE_KEYS_DIR}/",
            )
        try:
            key = verify_index(bundle.doc_bytes, bundle.signature, keys)
        except VerificationError as e:
            raise VerificationError(
                f"the bundle's signature does not verify with key {claimed}: bundle.json or its signature was altered",
                hint="nothing was installed; export the bundle again on the build host",
            ) from e
        return f"signed by trusted key {key.key_id} ({key.origin})"

    return check


def bundle_json(bundle: Bundle) -> dict[str, Any]:
    """Return what ``modules export`` and ``import`` show of a bundle: its bundle.json, hash and signature."""
    from fwman.firmware.catalog.signing import signature_key_id

    doc = bundle.doc
    key = None
    if bundle.signature is not None:
        try:
            key = signature_key_id(bundle.signature)
        except VerificationError:  # not a signature document: there is no key to name
            key = None
    return {
        "kernel": doc.kernel, "vermagic": doc.vermagic, "fork": doc.fork, "branch": doc.branch,
        "commit": doc.commit, "source": doc.source, "compiler": doc.compiler, "signed": doc.signed,
        "signer": doc.signer, "built_at": doc.built_at, "exported_from": doc.exported_from,
        "modules": {name: {"sha256": m.sha256, "size": m.size} for name, m in doc.modules.items()},
        "bundle_sha256": bundle.sha256, "signature": bundle.signature is not None, "signature_key": key,
    }  # fmt: skip


@dataclass
class Export(Result):
    """``modules export``: the bundle written to ``file`` (``size`` bytes)."""

    file: str
    size: int
    bundle: Bundle

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-export/1`` (without the schema key)."""
        return {"file": self.file, "size": self.size, **bundle_json(self.bundle)}

    def text(self, verbose: int = 0) -> Out:
        """Return where the bundle went and what it holds."""
        doc, b = self.bundle.doc, self.bundle
        return [
            say(f"exported the modules of {doc.kernel} to {self.file} ({self.size} bytes)"),
            say(f"  source:    {doc.source} (commit {doc.commit})"),
            say(f"  compiler:  {doc.compiler}"),
            say(f"  modules:   {'signed ' + (doc.signed or '') if doc.signer else 'unsigned'}"),
            say(f"  bundle:    sha256 {b.sha256} {'(signed)' if b.signature else '(not signed)'}"),
        ]


@dataclass
class Import(Result):
    """``modules import``: the bundle and what importing it did (or, in a dry run, would do)."""

    bundle: Bundle
    outcome: ImportOutcome

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.modules-import/1`` (without the schema key)."""
        o, boot = self.outcome, self.outcome.boot
        return {
            "kernel": o.kernel, "status": o.status, "changed": o.status == "imported", "message": o.message,
            "checks": o.checks, "signature": o.signature, "signed": o.signed, "bundle": bundle_json(self.bundle),
            "boot": None if boot is None else {"next_boot": boot.default.kver,
                                               "safe": boot.safety.safe if boot.safety else None,
                                               "problem": boot.problem},
        }  # fmt: skip

    def text(self, verbose: int = 0) -> Out:
        """Return each check passed, the outcome, and a boot problem."""
        o = self.outcome
        out: Out = [*(say(f"  ok: {check}") for check in o.checks), say(o.message)]
        if o.boot is not None and o.boot.problem:
            out.append(say(f"WARNING: {o.boot.problem}", "bad"))
        return out


def export_file(host: Host, kver: str, output: str, sign_key: str | None = None) -> Export:
    """Export the modules of ``kver`` into the user file ``output``; return what was written. Raises as
    :func:`export_to_file`."""
    size, bundle = export_to_file(host, kver, output, sign_key)
    return Export(output, size, bundle)


def export_to_file(host: Host, kver: str, output: str, sign_key: str | None = None) -> tuple[int, Bundle]:
    """Export the modules of ``kver`` into the user file ``output``; return (its size, the bundle).

    ``sign_key`` names an Ed25519 private key (PEM, a user file). Raises as
    :func:`fwman.driver.bundle.export_bundle`, UsageError for a bad key or an unwritable output.
    """
    from fwman.firmware.catalog.signing import load_private_key, sign_index

    sign = None
    if sign_key:
        key = load_private_key(read_user_file(sign_key, max_bytes=64 * 1024), sign_key)

        def sign(doc: bytes) -> bytes:
            return sign_index(doc, key)

    data, bundle = export_bundle(host, kver, sign)
    write_user_file(output, data)
    return len(data), bundle


def read_bundle(path: str) -> Bundle:
    """Return the bundle in the user file ``path``. Raises MissingError when absent, ParseError when not one."""
    return unpack(read_user_file(path, max_bytes=MAX_BUNDLE_BYTES))


def import_file(
    host: Host, path: str, *, dry_run: bool, report: Callable[[str], None], permit: Callable[[], None] = free
) -> Import:
    """Check (``dry_run``) or import the bundle in the user file ``path`` on ``host``; return it and the outcome.

    Raises what ``permit`` raises (first, unless a dry run), then as :func:`fwman.driver.bundle.import_bundle`.
    """
    if not dry_run:
        permit()
    bundle = read_bundle(path)
    check = signature_check(host)
    if dry_run:
        return Import(bundle, plan_import(host, bundle, path, check))
    return Import(bundle, import_bundle(host, bundle, path, check, report))
