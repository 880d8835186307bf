"""``fwman modules export`` / ``import`` as use cases: the bundle file (a user file) and its signing key.
:mod:`fwman.driver.bundle` makes, checks and installs bundles (its :mod:`~fwman.driver.bundle.trust` says which
signatures a host accepts); this module reads and writes the files the user names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fwman.app.change import free
from fwman.app.text import Out, Result, say
from fwman.core.signing import load_private_key
from fwman.driver.bundle.export import export_bundle
from fwman.driver.bundle.format import Bundle, unpack
from fwman.driver.bundle.install import ImportOutcome, import_bundle, plan_import
from fwman.driver.bundle.trust import signature_check, signature_key, signer
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file, write_user_file

#: a bundle of the real driver is ~100 MiB; refuse to read anything far beyond that into memory
MAX_BUNDLE_BYTES = 2 * 1024 * 1024 * 1024


def bundle_json(bundle: Bundle) -> dict[str, Any]:
    """Return what ``modules export`` and ``import`` show of a bundle: its bundle.json, hash and signature."""
    doc, key = bundle.doc, signature_key(bundle)
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
    """Export the modules of ``kver`` into the user file ``output``; return what was written. ``sign_key`` names an
    Ed25519 private key (PEM, a user file). Raises as :func:`fwman.driver.bundle.export.export_bundle`, UsageError for
    a bad key or an unwritable output."""
    sign = signer(load_private_key(read_user_file(sign_key, max_bytes=64 * 1024), sign_key)) if sign_key else None
    data, bundle = export_bundle(host, kver, sign)
    write_user_file(output, data)
    return Export(output, len(data), bundle)


def import_file(
    host: Host, path: str, *, dry_run: bool, tell: Callable[[str], None], permit: Callable[[], None] = free
) -> Import:
    """Check (``dry_run``) or import the bundle in the user file ``path`` on ``host``; return it and the outcome. Raises
    what ``permit`` raises (first, unless a dry run), MissingError when the file is absent, ParseError when it is not a
    bundle, then as :func:`fwman.driver.bundle.import_bundle`."""
    if not dry_run:
        permit()
    bundle = unpack(read_user_file(path, max_bytes=MAX_BUNDLE_BYTES))
    check = signature_check(host)
    if dry_run:
        return Import(bundle, plan_import(host, bundle, path, check))
    return Import(bundle, import_bundle(host, bundle, path, check, tell))
