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
    REBAR,
    board_toml,
    install_local,
    rom,
    seed_catalog,
    seed_images,
    sha256,
    trust,
    write_catalog,
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
    assert installed_serial(fwman, root) == ("bundled", 1)


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


def test_update_needs_a_url(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "update", "--root", str(tmp_path))
    assert r.code == 2 and "/etc/fwman/catalog-url" in r.stderr


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
