"""Issue 37, row 4: a mirror that serves no ``keys.json`` cannot make fwman trust an expired keys document.

A real HTTP server on 127.0.0.1 (http.server in a thread), no request mocking."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fwman.core.clock import FixedClock
from tests.support.catalog import board_toml, install_local, rom, seed_images, trust_root, write_catalog, write_keys
from tests.support.counting import CountingEnv

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
EXPIRED = "2026-12-04T00:00:00Z"  # two days before NOW


@pytest.fixture
def mirror() -> Iterator[tuple[dict[str, bytes], str]]:
    """Yield (the files the mirror serves by path, its base URL); any other path is a 404."""
    files: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield files, f"http://127.0.0.1:{server.server_address[1]}/cat/"
    finally:
        server.shutdown()
        server.server_close()


def _catalog(tmp_path: Path, name: str, key: Ed25519PrivateKey, serial: int) -> Path:
    return write_catalog(tmp_path / name, {"10de-2204-3842-3987": board_toml(seed_images(rom()))}, key, serial=serial)


@pytest.mark.parametrize("served", ["none", "only keys.json.sig"])
def test_an_expired_installed_keys_document_is_not_the_fallback(
    tmp_path: Path, mirror: tuple[dict[str, bytes], str], served: str
) -> None:
    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    installed = write_keys(_catalog(tmp_path, "installed", catalog_key, 3), root_key, [catalog_key], expires=EXPIRED)
    install_local(root, installed)
    files, url = mirror
    new = _catalog(tmp_path, "new", catalog_key, 4)  # signed by the catalog key the expired document names
    files.update({f"/cat/{p.relative_to(new)}": p.read_bytes() for p in new.rglob("*") if p.is_file()})
    if served != "none":
        files["/cat/keys.json.sig"] = (installed / "keys.json.sig").read_bytes()
    run = CountingEnv(clock=FixedClock(at=NOW))
    r = run("catalog", "update", "--url", url, "--timeout", "2", "--retries", "0", "--root", str(root))
    # it was: exit 0, "installed catalog serial 4", checked against a keys document that expired two days ago
    assert r.code == 4, r.stdout + r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("fwman: error:")]  # a note on plain http too
    assert f"keys document installed here (/var/lib/fwman/catalog/keys.json, serial 2) expired on {EXPIRED}" in line
    assert "no catalog key is trusted, nothing was installed" in line
    assert "only the keys in /etc/fwman/keys.d/" in r.stderr  # what is trusted instead, and why
    listed = run("catalog", "list", "--json", "--root", str(root)).json()["catalog"]
    assert listed["serial"] == 3


def test_a_current_installed_keys_document_still_decides_and_says_so(
    tmp_path: Path, mirror: tuple[dict[str, bytes], str]
) -> None:
    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    install_local(root, write_keys(_catalog(tmp_path, "installed", catalog_key, 3), root_key, [catalog_key]))
    files, url = mirror
    new = _catalog(tmp_path, "new", catalog_key, 4)
    files.update({f"/cat/{p.relative_to(new)}": p.read_bytes() for p in new.rglob("*") if p.is_file()})
    r = CountingEnv(clock=FixedClock(at=NOW))("catalog", "update", "--url", url, "--retries", "0", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "keys document: serial 2 (the one installed here: the publisher serves none)" in r.stdout
