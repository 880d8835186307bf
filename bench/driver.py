"""Audit's two heavy readers against the kmod tools they stand in for, measured side by side in one run.

1. Which file depmod picks, for every module of a kernel: ``fwman.driver.kmod.depmod.resolve_all`` (walk + config,
   no file read) vs the real ``depmod -n -b ROOT KVER`` (which reads every module) on the same tree of 3,000
   generated modules with a ``/etc/depmod.d`` override. Target: ratio <= 1.0x (fwman must not cost more than
   running depmod itself).
2. What audit does per module file: read it, parse ``.modinfo`` and the signature, and sha256 it (for the
   manifest) vs what a person runs for the same answer: ``modinfo FILE`` then ``sha256sum FILE``, on a signed
   64 MiB module (a large one: the size of a real ``nvidia.ko`` depends on its build). Target: <= 1.5x.
3. For information: the parse alone (bytes already in memory) vs ``modinfo FILE``. ``modinfo`` maps only the
   pages it needs, fwman reads the whole file through the Host (it hashes it anyway).

Run: ``.venv/bin/python bench/driver.py [--rounds N]``. Prints medians and ratios; exits 0 always (a benchmark,
not a test). Needs kmod (depmod, modinfo).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KVER = "6.1.0-50-amd64"


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def main() -> int:
    """Measure and print the ratios."""
    from fixtures.tinymod.elfgen import build_elf, make_signing_key, modinfo_blob, nvidia_tags, sign_module
    from fwman.driver.kmod.depmod import resolve_all
    from fwman.driver.kmod.kofile import read_module
    from fwman.host.live import LiveHost

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = root / "lib/modules" / KVER
        for i in range(3000):
            d = base / "kernel/drivers" / f"sub{i % 60}"
            d.mkdir(parents=True, exist_ok=True)
            name = f"mod{i}"
            (d / f"{name}.ko").write_bytes(build_elf(modinfo_blob(nvidia_tags("570.86.16", KVER, name=name))))
        for sub in ("updates/dkms", "updates/fwman"):
            (base / sub).mkdir(parents=True)
            (base / sub / "mod7.ko").write_bytes((base / "kernel/drivers/sub7/mod7.ko").read_bytes())
        (root / "etc/depmod.d").mkdir(parents=True)
        (root / "etc/depmod.d/fwman.conf").write_text("override mod7 * updates/fwman\n")
        host = LiveHost(str(root))

        big = root / "big/nvidia.ko"
        big.parent.mkdir()
        body = build_elf(modinfo_blob(nvidia_tags("570.86.16", KVER)))
        # 64 MiB: the generated ELF followed by zero bytes (code and data of a real nvidia.ko, for size only)
        body = body + bytes(64 * (1 << 20) - len(body))
        big.write_bytes(sign_module(body, *make_signing_key()))

        def t_resolve() -> None:
            assert resolve_all(host, KVER)["mod7"].endswith("updates/fwman/mod7.ko")

        def t_depmod() -> None:
            subprocess.run(
                [_tool("depmod"), "-n", "-b", str(root), "-C", str(root / "etc/depmod.d"), KVER],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        def t_audit_one() -> None:
            raw = host.read_bytes("/big/nvidia.ko")
            assert read_module(raw).signature is not None
            hashlib.sha256(raw).hexdigest()

        def t_tools() -> None:
            subprocess.run([_tool("modinfo"), str(big)], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["sha256sum", str(big)], check=True, stdout=subprocess.DEVNULL)

        in_memory = big.read_bytes()

        def t_parse() -> None:
            assert read_module(in_memory).signature is not None

        def t_modinfo() -> None:
            subprocess.run([_tool("modinfo"), str(big)], check=True, stdout=subprocess.DEVNULL)

        pairs = [
            ("resolve_all vs depmod -n", t_resolve, t_depmod, "<= 1.0x"),
            ("read+parse+sha256 vs modinfo+sha256sum", t_audit_one, t_tools, "<= 1.5x"),
            ("parse in memory vs modinfo", t_parse, t_modinfo, "information"),
        ]
        for label, ours, floor, target in pairs:
            a: list[float] = []
            b: list[float] = []
            for _ in range(args.rounds):  # interleaved, so both see the same machine state
                s = time.perf_counter()
                ours()
                a.append(time.perf_counter() - s)
                s = time.perf_counter()
                floor()
                b.append(time.perf_counter() - s)
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{label}: {ma * 1000:.1f} ms vs {mb * 1000:.1f} ms -> ratio {ma / mb:.2f}x (target {target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
