"""``fwman modules export`` / ``import`` as use cases: the bundle file (a user file) and its signing key.

:mod:`fwman.driver.bundle` makes, checks and installs bundles (its :mod:`~fwman.driver.bundle.trust` says which
signatures a host accepts); this module reads and writes the files the user names.
"""

from __future__ import annotations

from collections.abc import Callable

from fwman.core.signing import load_private_key
from fwman.driver.bundle.export import export_bundle
from fwman.driver.bundle.format import Bundle, unpack
from fwman.driver.bundle.install import ImportOutcome, import_bundle, plan_import
from fwman.driver.bundle.trust import signature_check, signer
from fwman.host.base import Host
from fwman.host.userfiles import read_user_file, write_user_file

#: a bundle of the real driver is ~100 MiB; refuse to read anything far beyond that into memory
MAX_BUNDLE_BYTES = 2 * 1024 * 1024 * 1024


def export_to_file(host: Host, kver: str, output: str, sign_key: str | None = None) -> tuple[int, Bundle]:
    """Export the modules of ``kver`` into the user file ``output``; return (its size, the bundle).

    ``sign_key`` names an Ed25519 private key (PEM, a user file). Raises as
    :func:`fwman.driver.bundle.export.export_bundle`, UsageError for a bad key or an unwritable output.
    """
    sign = signer(load_private_key(read_user_file(sign_key, max_bytes=64 * 1024), sign_key)) if sign_key else None
    data, bundle = export_bundle(host, kver, sign)
    write_user_file(output, data)
    return len(data), bundle


def read_bundle(path: str) -> Bundle:
    """Return the bundle in the user file ``path``. Raises MissingError when absent, ParseError when not one."""
    return unpack(read_user_file(path, max_bytes=MAX_BUNDLE_BYTES))


def import_file(host: Host, path: str, *, dry_run: bool, report: Callable[[str], None]) -> tuple[Bundle, ImportOutcome]:
    """Check (``dry_run``) or import the bundle in the user file ``path`` on ``host``; return it and the outcome."""
    bundle = read_bundle(path)
    check = signature_check(host)
    if dry_run:
        return bundle, plan_import(host, bundle, path, check)
    return bundle, import_bundle(host, bundle, path, check, report)
