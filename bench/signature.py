"""The signed-package check against its floor: ``osslsigncode verify`` of the same file, run alone.

A 1 MiB synthetic update program (``fixtures.packages``: a PE with a ROM inside) is signed with the real
``osslsigncode`` and a throwaway chain made here. Then, interleaved round by round on the same bytes:

* floor: ``osslsigncode verify -CAfile ROOT -TSA-CAfile ROOT -ignore-cdp -in FILE`` (what anyone would run);
* fwman: :func:`fwman.firmware.ops.authenticode.verify_package`: the same verify on a private copy in a scratch
  directory, ``osslsigncode extract-signature``, the signer's certificate read with ``cryptography`` and compared
  with the catalog's subject, the scratch directory removed.

Run: ``.venv/bin/python bench/signature.py [--rounds N]``. Prints medians and the ratio; exits 0 always (a
benchmark, not a test); exits 0 with a note when osslsigncode is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    exe = shutil.which("osslsigncode")
    if exe is None:
        print("osslsigncode is not installed (Debian package osslsigncode): nothing to measure")
        return 0

    from fixtures.packages import build_pe
    from fixtures.packages.authenticode import MAKER_SUBJECT, make_root, make_signer, sign_pe
    from fixtures.romgen import RomSpec, build_rom
    from fwman.firmware.catalog.schema import Board
    from fwman.firmware.ops.authenticode import verify_package
    from fwman.host.live import LiveHost

    rom = build_rom(RomSpec(version="94.02.42.80.27", kind="option_rom")).ljust(1 << 20, b"\xff")
    board = Board.model_validate(
        {
            "pci": {"vendor": "10de", "device": "2204", "subsystem_vendor": "3842", "subsystem_device": "3987"},
            "board": {"name": "bench board", "maker": "Bench", "package_signers": [MAKER_SUBJECT]},
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = make_root(work / "keys")
        package = sign_pe(build_pe([rom]), make_signer(work / "keys", root), work / "keys")
        target = work / "update.exe"
        target.write_bytes(package)
        host_root = work / "root"
        (host_root / "etc/fwman").mkdir(parents=True)
        (host_root / "etc/fwman/authenticode-roots.pem").write_bytes(root.cert.read_bytes())
        host, runner = LiveHost(str(host_root)), LiveHost("/")
        floor_argv = [exe, "verify", "-CAfile", str(root.cert), "-TSA-CAfile", str(root.cert), "-ignore-cdp"]

        def floor() -> None:
            subprocess.run([*floor_argv, "-in", str(target)], check=True, capture_output=True)

        def fwman() -> None:
            verify_package(host, runner, package, board, "bench")

        times: dict[str, list[float]] = {"fwman": [], "floor": []}
        for _ in range(args.rounds):
            for name, fn in (("fwman", fwman), ("floor", floor)):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["floor"])
    print(f"signed package: {len(package):,} bytes, {args.rounds} rounds, interleaved")
    for name, label in (("fwman", "fwman verify_package"), ("floor", "osslsigncode verify alone")):
        median = statistics.median(times[name])
        print(f"  {label:<28} median {median * 1000:8.1f} ms   ratio {median / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
