"""Catalog, fetch and upgrade-plan costs against their floors, measured side by side in one run.

1. ``fwman --snapshot rig-4x3090 upgrade --dry-run`` vs ``python -c "import click; from pydantic import BaseModel"``
   (process start with the libraries a pydantic-model command cannot avoid)
2. ``fetch_image`` of a 2 MiB image from a local HTTP server (stream to .part, MD5 + SHA-256, ROM parse, cache
   write) vs a bare ``requests.get(url).content`` plus MD5 + SHA-256 of the body

Run: ``.venv/bin/python bench/catalog.py [--runs N]``. Prints medians and ratios; exits 0 always (a benchmark,
not a test).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _median(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _serve(body: bytes) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/image.rom"


def main() -> None:
    """Run the measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    fwman = str(Path(sys.executable).parent / "fwman")
    host = str(REPO / "fixtures/hosts/rig-4x3090")
    plan_argv = [fwman, "--snapshot", host, "upgrade", "--dry-run"]
    floor_argv = [sys.executable, "-c", "import click; from pydantic import BaseModel"]
    plan = _median(lambda: subprocess.run(plan_argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO), args.runs)
    floor = _median(lambda: subprocess.run(floor_argv, check=True, cwd=REPO), args.runs)
    print(f"upgrade --dry-run (example host)  {plan * 1000:7.1f} ms")
    print(f"import click + BaseModel (floor)  {floor * 1000:7.1f} ms   ratio {plan / floor:.2f}x")

    import requests

    from fixtures.romgen import RomSpec, build_rom
    from fwman.firmware.catalog.load import CatalogEntry
    from fwman.firmware.catalog.schema import parse_board
    from fwman.firmware.ops.fetch import HttpOptions, fetch_image
    from fwman.host.live import LiveHost

    image = build_rom(RomSpec(version="94.02.42.80.27", dump_size=2 * 1024 * 1024))
    md5, sha = hashlib.md5(image, usedforsecurity=False).hexdigest(), hashlib.sha256(image).hexdigest()
    board = parse_board(
        (
            'format = 1\n[pci]\nvendor = "10de"\ndevice = "2204"\nsubsystem_vendor = "3842"\n'
            'subsystem_device = "3987"\n[board]\nname = "bench"\nmaker = "bench"\n[[images]]\n'
            f'version = "94.02.42.80.27"\nstatus = "current"\nmd5 = "{md5}"\nsha256 = "{sha}"\nsize = {len(image)}\n'
        ).encode(),
        "bench.toml",
    )
    entry = CatalogEntry(board, board.images[0])
    httpd, url = _serve(image)
    root = Path(tempfile.mkdtemp(prefix="fwman-bench-"))
    try:

        def fetch() -> None:
            shutil.rmtree(root / "var", ignore_errors=True)
            fetch_image(LiveHost(str(root)), entry, urls=[url], options=HttpOptions(retries=0))

        def bare() -> None:
            body = requests.get(url, timeout=10).content
            hashlib.md5(body, usedforsecurity=False).hexdigest()
            hashlib.sha256(body).hexdigest()

        fetch()  # warm up (imports)
        bare()
        fetched = _median(fetch, args.runs)
        floor_dl = _median(bare, args.runs)
        print(f"fetch_image 2 MiB (verified)      {fetched * 1000:7.1f} ms")
        print(f"requests.get + MD5 + SHA-256      {floor_dl * 1000:7.1f} ms   ratio {fetched / floor_dl:.2f}x")
    finally:
        httpd.shutdown()
        httpd.server_close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
