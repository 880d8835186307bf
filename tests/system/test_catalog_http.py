"""Downloads and catalog updates against a real HTTP server on 127.0.0.1 (http.server in a thread, with Range).

No request mocking: fwman's requests session talks to a real socket. The server can cut a body short, stall
in the middle of one, ignore Range, lie about nothing (sizes are honest) or send more than the catalog allows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.catalog import (
    FAR_FUTURE,
    REBAR,
    board_toml,
    install_local,
    key_id_of,
    rom,
    seed_catalog,
    seed_images,
    sha256,
    trust,
    trust_root,
    write_catalog,
    write_keys,
)
from tests.support.env import FwmanEnv

CACHE = "var/cache/fwman/images/10de-2204-3842-3987"
REF = f"3842:3987/{REBAR}"


@dataclass
class Route:
    """What the server does for one path."""

    body: bytes
    cut_after: int | None = None  # first request only: send this many bytes, then drop the connection
    stall_after: int | None = None  # send this many bytes, then go silent
    send_length: bool = True  # False: no Content-Length, the body ends when the connection closes
    ranges: bool = True  # False: ignore Range, always send the whole body
    served: int = 0


@dataclass
class Server:
    """A real HTTP server on 127.0.0.1 serving ``routes``; ``log`` records (path, Range header) per request."""

    routes: dict[str, Route] = field(default_factory=dict)
    log: list[tuple[str, str | None]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            server.log.append((self.path, self.headers.get("Range")))
            route = server.routes.get(self.path)
            if route is None:
                self.send_error(404, "Not Found")
                return
            route.served += 1
            body, start = route.body, 0
            wanted = self.headers.get("Range")
            if wanted and route.ranges and wanted.startswith("bytes=") and wanted.endswith("-"):
                start = int(wanted[len("bytes=") : -1])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            if route.send_length:
                self.send_header("Content-Length", str(len(part)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            if route.cut_after is not None and route.served == 1:
                self.wfile.write(part[: route.cut_after])
                self.wfile.flush()
                self.close_connection = True
                return
            if route.stall_after is not None:
                self.wfile.write(part[: route.stall_after])
                self.wfile.flush()
                server.release.wait(10)
                return
            self.wfile.write(part)

    return Handler


@pytest.fixture
def http() -> Iterator[Server]:
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def fetch(fwman: FwmanEnv, root: Path, url: str, *extra: str) -> tuple[int, str]:
    r = fwman("fetch", REF, "--url", url, "--timeout", "1", "--retries", "1", "--root", str(root), *extra)
    return r.code, r.stderr


def resume_offset(header: str | None) -> int:
    """Return N of a ``bytes=N-`` Range header."""
    assert header is not None and header.startswith("bytes=") and header.endswith("-")
    return int(header[len("bytes=") : -1])


def leftovers(root: Path) -> list[str]:
    d = root / CACHE
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


# -- fetch --------------------------------------------------------------------------------------------------


def test_good_download(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/img.rom"] = Route(image)
    code, err = fetch(fwman, tmp_path, http.url("/img.rom"))
    assert code == 0, err
    assert (tmp_path / CACHE / f"{REBAR}.rom").read_bytes() == image
    assert leftovers(tmp_path) == [f"{REBAR}.rom", f"{REBAR}.rom.json"]
    assert http.log == [("/img.rom", None)]


def test_resume_after_a_cut_in_the_same_run(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/img.rom"] = Route(image, cut_after=300_000)
    code, err = fetch(fwman, tmp_path, http.url("/img.rom"))
    assert code == 0, err
    assert [p for p, _ in http.log] == ["/img.rom", "/img.rom"]
    # resumed where the received data ended (the chunk in flight when the connection broke is lost)
    start = resume_offset(http.log[1][1])
    assert 0 < start <= 300_000
    assert (tmp_path / CACHE / f"{REBAR}.rom").read_bytes() == image
    assert not (tmp_path / CACHE / f"{REBAR}.rom.part").exists()


def test_resume_from_the_part_file_of_an_earlier_run(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/img.rom"] = Route(image, cut_after=400_000)
    r = fwman("fetch", REF, "--url", http.url("/img.rom"), "--retries", "0", "--root", str(tmp_path))
    part = (tmp_path / CACHE / f"{REBAR}.rom.part").read_bytes()
    assert r.code == 5 and f"run the command again to resume ({len(part)} bytes kept)" in r.stderr
    assert 0 < len(part) <= 400_000 and part == image[: len(part)]
    code, err = fetch(fwman, tmp_path, http.url("/img.rom"))
    assert code == 0, err
    assert http.log[-1] == ("/img.rom", f"bytes={len(part)}-")
    assert leftovers(tmp_path) == [f"{REBAR}.rom", f"{REBAR}.rom.json"]


def test_a_server_that_ignores_range_restarts_cleanly(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/img.rom"] = Route(image, cut_after=100_000, ranges=False)
    code, err = fetch(fwman, tmp_path, http.url("/img.rom"))
    assert code == 0, err
    assert (tmp_path / CACHE / f"{REBAR}.rom").read_bytes() == image  # not the first 100 kB twice


def test_404(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    seed_catalog(tmp_path, rom())
    code, err = fetch(fwman, tmp_path, http.url("/missing.rom"))
    assert code == 5 and "HTTP 404" in err
    assert len(http.log) == 1  # a 404 is not retried
    assert leftovers(tmp_path) == []


def test_wrong_hash_leaves_nothing(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/img.rom"] = Route(rom(filler_seed=9))  # same size and version, other bytes
    code, err = fetch(fwman, tmp_path, http.url("/img.rom"))
    assert code == 4 and "MD5 mismatch" in err
    assert leftovers(tmp_path) == []


def test_body_larger_than_the_cap(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/big.rom"] = Route(image + b"\0" * 4096)
    code, err = fetch(fwman, tmp_path, http.url("/big.rom"))
    assert code == 4 and f"more than the {len(image)}-byte limit" in err
    http.routes["/stream.rom"] = Route(image + b"\0" * 200_000, send_length=False)
    code, err = fetch(fwman, tmp_path, http.url("/stream.rom"))
    assert code == 4 and f"grew past the {len(image)}-byte limit" in err
    assert leftovers(tmp_path) == []


def test_a_stalled_server_times_out_and_keeps_the_part(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    http.routes["/slow.rom"] = Route(image, stall_after=300_000)
    r = fwman("fetch", REF, "--url", http.url("/slow.rom"), "--timeout", "0.3", "--retries", "1",
              "--root", str(tmp_path))  # fmt: skip
    assert r.code == 5
    assert "timed out" in r.stderr and "resume" in r.stderr
    # the retry resumed after the first stall; what both attempts received is kept for the next run
    assert len(http.log) == 2 and 0 < resume_offset(http.log[1][1]) <= 300_000
    part = (tmp_path / CACHE / f"{REBAR}.rom.part").read_bytes()
    assert resume_offset(http.log[1][1]) < len(part) < len(image) and part == image[: len(part)]
    assert not (tmp_path / CACHE / f"{REBAR}.rom").exists()


# -- catalog update -----------------------------------------------------------------------------------------


def publish(http: Server, directory: Path, prefix: str = "/cat") -> str:
    for path in directory.rglob("*"):
        if path.is_file():
            http.routes[f"{prefix}/{path.relative_to(directory)}"] = Route(path.read_bytes())
    return http.url(prefix + "/")


def signed(tmp_path: Path, key: Ed25519PrivateKey, serial: int, name: str = "pub") -> Path:
    return write_catalog(tmp_path / name, {"10de-2204-3842-3987": board_toml(seed_images(rom()))}, key, serial=serial)


def update(fwman: FwmanEnv, root: Path, url: str) -> tuple[int, str, str]:
    r = fwman("catalog", "update", "--url", url, "--timeout", "2", "--retries", "0", "--root", str(root))
    return r.code, r.stdout, r.stderr


def installed_serial(fwman: FwmanEnv, root: Path) -> tuple[str, int]:
    doc = fwman("catalog", "list", "--json", "--root", str(root)).json()["catalog"]
    return doc["source"], doc["serial"]


def test_update_installs_a_verified_catalog_atomically(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    url = publish(http, signed(tmp_path, key, serial=3))
    code, out, err = update(fwman, root, url)
    assert code == 0, err
    assert "installed catalog serial 3" in out
    link = root / "var/lib/fwman/catalog"
    assert link.is_symlink() and str(link.readlink()) == "catalogs/3"
    assert installed_serial(fwman, root) == ("local", 3)
    entry = fwman("catalog", "show", "3842:3987", "--json", "--root", str(root)).json()
    by_version = {i["version"]: i for i in entry["images"]}
    assert by_version[REBAR]["sha256"] == sha256(rom())
    code, out, _ = update(fwman, root, url)
    assert code == 0 and "already up to date" in out


def test_update_refuses_a_tampered_file(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    url = publish(http, signed(tmp_path, key, serial=3))
    route = http.routes["/cat/boards/10de-2204-3842-3987.toml"]
    route.body = route.body.replace(b'status = "withdrawn"', b'status = "current"  ')
    code, _, err = update(fwman, root, url)
    assert code == 4 and "does not match the signed index" in err
    assert not (root / "var/lib/fwman/catalog").exists()
    assert installed_serial(fwman, root) == ("bundled", 2)


def test_update_refuses_a_bad_signature(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    url = publish(http, signed(tmp_path, key, serial=3))
    route = http.routes["/cat/index.json"]
    route.body = route.body.replace(b'"serial": 3', b'"serial": 4')
    code, _, err = update(fwman, root, url)
    assert code == 4 and "signature does not verify" in err
    assert not (root / "var/lib/fwman/catalog").exists()


def test_update_refuses_an_unknown_key(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    root = tmp_path / "root"
    trust(root, Ed25519PrivateKey.generate())
    url = publish(http, signed(tmp_path, Ed25519PrivateKey.generate(), serial=3))
    code, _, err = update(fwman, root, url)
    assert code == 4 and "signed by an unknown key" in err
    # the hint names what would be accepted: the bundled keys document's catalog key, and this host's own key
    assert "catalog keys of the keys document (serial 1): " in err and "keys trusted on this host only: " in err
    assert not (root / "var/lib/fwman/catalog").exists()


def test_update_refuses_an_older_serial(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    install_local(root, signed(tmp_path, key, serial=5, name="installed"))
    url = publish(http, signed(tmp_path, key, serial=4))
    code, _, err = update(fwman, root, url)
    assert code == 4 and "older than the installed 5: rollback refused" in err
    assert installed_serial(fwman, root) == ("local", 5)


def test_update_refuses_a_reused_serial_with_other_content(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    install_local(root, signed(tmp_path, key, serial=5, name="installed"))
    other = write_catalog(tmp_path / "other", {"10de-2204-3842-3987": board_toml(seed_images())}, key, serial=5)
    code, _, err = update(fwman, root, publish(http, other))
    assert code == 4 and "reuses serial 5" in err


def test_update_with_a_missing_index_is_a_download_error(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    code, _, err = update(fwman, tmp_path, http.url("/nothing/"))
    assert code == 5 and "HTTP 404" in err


def test_update_without_a_url_checks_the_bundled_catalog(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "update", "--root", str(tmp_path))
    assert r.code == 0 and "no catalog URL configured: checking the catalog bundled with fwman" in r.stderr


# -- https: the catalog's own URL (https only) ---------------------------------------------------------------


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """Write a certificate for 127.0.0.1 and its key; return (cert, key). The cert is its own CA."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_download_from_the_catalogs_https_url(tmp_path: Path) -> None:
    import ssl

    from fwman.firmware.catalog.load import load_catalog
    from fwman.firmware.ops.fetch import HttpOptions, fetch_image
    from fwman.host.live import LiveHost

    cert, key = _self_signed(tmp_path)
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        image = rom()
        state.routes["/evga/3987.rom"] = Route(image)
        images = seed_images(image)
        images[0]["urls"] = [f"https://127.0.0.1:{port}/missing.rom", f"https://127.0.0.1:{port}/evga/3987.rom"]
        root = tmp_path / "root"
        install_local(root, write_catalog(tmp_path / "cat", {"10de-2204-3842-3987": board_toml(images)}))
        host = LiveHost(str(root))
        entry = load_catalog(host).entry(REF)
        result = fetch_image(host, entry, options=HttpOptions(verify_tls=str(cert), retries=0))
        # the first catalog URL answers 404: the next one is tried
        assert [p for p, _ in state.log] == ["/missing.rom", "/evga/3987.rom"]
        assert result.source == f"https://127.0.0.1:{port}/evga/3987.rom" and result.verified_by == "catalog"
        assert (root / CACHE / f"{REBAR}.rom").read_bytes() == image
    finally:
        httpd.shutdown()
        httpd.server_close()


# -- trust that survives a lost key: root, keys document, expiry, rotation (issue 29, docs/signing.md) ----------


def publisher(
    tmp_path: Path,
    name: str,
    root_key: Ed25519PrivateKey,
    catalog_key: Ed25519PrivateKey,
    serial: int,
    keys_serial: int,
    named: list[Ed25519PrivateKey] | None = None,
    retired: dict[str, str] | None = None,
    expires: str = FAR_FUTURE,
) -> Path:
    """A publisher's directory: keys.json (``named``, default the catalog key) by ``root_key``, the index by
    ``catalog_key``."""
    directory = write_catalog(
        tmp_path / name,
        {"10de-2204-3842-3987": board_toml(seed_images(rom()))},
        catalog_key,
        serial=serial,
        expires=expires,
    )
    write_keys(directory, root_key, named or [catalog_key], serial=keys_serial, retired=retired)
    return directory


def installed_keys_serial(root: Path) -> int:
    import json

    return int(json.loads((root / "var/lib/fwman/catalog/keys.json").read_text())["serial"])


def test_rotation_to_a_third_key_through_update(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    # the root names catalog key 1, then (a new keys document, no package update) key 2 and retires key 1
    root_key, first, second = (Ed25519PrivateKey.generate() for _ in range(3))
    root = tmp_path / "root"
    trust_root(root, root_key)
    url = publish(http, publisher(tmp_path, "v1", root_key, first, serial=3, keys_serial=2), "/one")
    code, out, err = update(fwman, root, url)
    assert code == 0, err
    assert f"signature: key {key_id_of(first)}" in out
    assert f"keys document: serial 2 (new), root key {key_id_of(root_key)}" in out
    assert installed_keys_serial(root) == 2

    rotated = publisher(
        tmp_path, "v2", root_key, second, serial=4, keys_serial=3, retired={key_id_of(first): "rotated to key 2"}
    )
    code, out, err = update(fwman, root, publish(http, rotated, "/two"))
    assert code == 0, err
    assert f"signature: key {key_id_of(second)}" in out and "keys document: serial 3 (new)" in out
    assert installed_serial(fwman, root) == ("local", 4) and installed_keys_serial(root) == 3
    shown = fwman("catalog", "keys", "show", "--json", "--root", str(root)).json()
    assert [k["key_id"] for k in shown["keys"]] == [key_id_of(second)]
    assert shown["retired"][0]["key_id"] == key_id_of(first) and shown["signature"]["good"] is True

    # key 1 is retired now: a catalog it signs is refused, whatever keys document the mirror serves with it
    stale = publisher(tmp_path, "stale", root_key, first, serial=5, keys_serial=2)
    code, _, err = update(fwman, root, publish(http, stale, "/stale"))
    assert code == 4 and "keys.json has serial 2, older than the installed keys document's 3: rollback" in err
    (stale / "keys.json.sig").unlink()
    (stale / "keys.json").unlink()
    code, _, err = update(fwman, root, publish(http, stale, "/stale-no-keys"))
    assert code == 4
    assert f"signed by key {key_id_of(first)}, retired on 2026-01-01: rotated to key 2" in err
    assert "a retired key is never trusted again" in err
    assert installed_serial(fwman, root) == ("local", 4)


def test_an_expired_index_is_refused(tmp_path: Path, http: Server) -> None:
    from datetime import UTC, datetime

    from fwman.core.clock import FixedClock

    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    url = publish(
        http, publisher(tmp_path, "pub", root_key, catalog_key, serial=3, keys_serial=2, expires="2026-06-01T00:00:00Z")
    )
    after = FwmanEnv(clock=FixedClock(at=datetime(2026, 6, 1, tzinfo=UTC)))
    code, _, err = update(after, root, url)
    assert code == 4 and "the index (serial 3) expired on 2026-06-01T00:00:00Z" in err
    assert "a mirror may be serving an old catalog" in err
    assert not (root / "var/lib/fwman/catalog").exists()
    # the same index one second before its expiry is installed: the clock, not the bytes, made the difference
    before = FwmanEnv(clock=FixedClock(at=datetime(2026, 5, 31, 23, 59, 59, tzinfo=UTC)))
    code, _, err = update(before, root, url)
    assert code == 0, err


def test_a_keys_document_signed_by_a_non_root_key_is_refused(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    # the catalog key names itself: it is a key the root never named, and only a root may name catalog keys
    url = publish(http, publisher(tmp_path, "pub", catalog_key, catalog_key, serial=3, keys_serial=2))
    code, _, err = update(fwman, root, url)
    assert code == 4
    assert f"the keys document is signed by key {key_id_of(catalog_key)}, which is not a root key" in err
    assert key_id_of(root_key) in err and "23cb724582f7654c" in err  # the roots it would accept
    assert not (root / "var/lib/fwman/catalog").exists()


def test_a_rolled_back_index_serial_is_refused_under_the_keys_document(
    tmp_path: Path, fwman: FwmanEnv, http: Server
) -> None:
    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    code, _, err = update(fwman, root, publish(http, publisher(tmp_path, "new", root_key, catalog_key, 6, 2), "/new"))
    assert code == 0, err
    old = publisher(tmp_path, "old", root_key, catalog_key, serial=5, keys_serial=2)
    code, _, err = update(fwman, root, publish(http, old, "/old"))
    assert code == 4 and "has serial 5, older than the installed 6: rollback refused" in err
    assert installed_serial(fwman, root) == ("local", 6)


def test_the_lost_key_33d1_is_refused_as_retired(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    # an old mirror still serving a catalog under the lost key: the bundled keys document retired it
    import base64
    import json

    directory = write_catalog(tmp_path / "old", {"10de-2204-3842-3987": board_toml(seed_images(rom()))}, serial=7)
    claimed = {
        "format": "fwman-signature",
        "version": 1,
        "algorithm": "ed25519",
        "key_id": "33d1cd9eab9b080a",
        "signature": base64.b64encode(bytes(64)).decode(),
    }
    (directory / "index.json.sig").write_text(json.dumps(claimed))
    (tmp_path / "root").mkdir()
    code, _, err = update(fwman, tmp_path / "root", publish(http, directory))
    assert code == 4
    assert "signed by key 33d1cd9eab9b080a, retired on 2026-12-01: its private half was never kept anywhere" in err
    assert "re-sign the index with a current catalog key" in err


def test_a_catalog_key_past_its_window_says_so(tmp_path: Path, http: Server) -> None:
    from datetime import UTC, datetime

    from fwman.core.clock import FixedClock

    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust_root(root, root_key)
    directory = publisher(tmp_path, "pub", root_key, catalog_key, serial=3, keys_serial=2)
    write_keys(directory, root_key, [catalog_key], serial=2, not_after="2026-03-01T00:00:00Z")
    later = FwmanEnv(clock=FixedClock(at=datetime(2026, 4, 1, tzinfo=UTC)))
    code, _, err = update(later, root, publish(http, directory))
    assert code == 4
    assert f"key {key_id_of(catalog_key)}, which is valid only from 2020-01-01T00:00:00Z to 2026-03-01" in err
    assert "fwman catalog keys sign --key ROOT --add PUB --not-after DATE" in err


def test_a_newer_keys_document_for_the_same_catalog_is_recorded(tmp_path: Path, fwman: FwmanEnv, http: Server) -> None:
    root_key, first, second = (Ed25519PrivateKey.generate() for _ in range(3))
    root = tmp_path / "root"
    trust_root(root, root_key)
    directory = publisher(tmp_path, "pub", root_key, first, serial=3, keys_serial=2)
    assert update(fwman, root, publish(http, directory, "/a"))[0] == 0
    # the root names a second key beside the first; the index is the same bytes
    write_keys(directory, root_key, [first, second], serial=3)
    code, out, err = update(fwman, root, publish(http, directory, "/b"))
    assert code == 0, err
    assert "catalog already up to date (serial 3" in out and "keys document: serial 3 (new)" in out
    assert installed_keys_serial(root) == 3
    write_keys(directory, root_key, [first], serial=2)  # a mirror still serving the older document
    code, _, err = update(fwman, root, publish(http, directory, "/c"))
    assert code == 4 and "older than the installed keys document's 3: rollback refused" in err
