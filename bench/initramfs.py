"""The bounded initramfs reader (fwman.core.bounded) against the reader it replaced, on real Debian initramfs
images, measured side by side in one run.

The images are made by Debian's own ``mkinitramfs`` (initramfs-tools) for an installed kernel version, once per
compressor (zstd, Debian's default; gzip; xz), or given with ``--image FILE`` (``/boot/initrd.img-*``). The
reader before issue 25 ("today's") is reproduced here as it was: ``gzip.decompress`` / ``lzma.decompress`` on
the whole stream and the zstd tool without a size limit, recursing into nested streams without a bound. Both
readers return the same members (checked). Target: the bounded one no slower than 1.2x.

Run: ``.venv/bin/python bench/initramfs.py [--rounds N] [--kver KVER] [--image FILE ...]``. Making the images
needs root (``unshare -m`` puts the kernel's config from its headers package at ``/boot/config-KVER`` in a
private mount namespace: mkinitramfs reads it to check the compressor; the machine's /boot is not touched).
Prints medians and ratios; exits 0 always (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_image(kver: str, compress: str, out: Path) -> Path | None:
    """Return a fresh initramfs of ``kver`` made by mkinitramfs with ``compress``, or None when it cannot."""
    config = Path(f"/usr/src/linux-headers-{kver}/.config")
    script = (
        f"mount -t tmpfs tmpfs /boot && cp {config} /boot/config-{kver} && mkinitramfs -c {compress} -o {out} {kver}"
    )
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not out.exists() or out.stat().st_size == 0:
        print(f"  could not make a {compress} image: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        return None
    return out


def old_reader(host: object) -> object:
    """Return today's read_archives (before the bounds), with its decompressor, as it was."""
    from fwman.core import paths
    from fwman.core.errors import MissingError, ParseError
    from fwman.driver.boot.initramfs import NEWC_MAGICS, CpioMember, compression_of, parse_cpio

    def decompress(kind: str, data: bytes) -> bytes:
        if kind == "gzip":
            return gzip.decompress(data)
        if kind in ("xz", "lzma"):
            return lzma.decompress(data)
        scratch = f"{paths.CACHE_DIR}/initramfs"
        host.mkdir(scratch)  # type: ignore[attr-defined]
        src, dst = f"{scratch}/stream.{kind}", f"{scratch}/stream"
        host.write_bytes(src, data, 0o600)  # type: ignore[attr-defined]
        try:
            result = host.run(  # type: ignore[attr-defined]
                [kind, "-dqf", host.local_path(src), "-o", host.local_path(dst)],
                timeout=300,  # type: ignore[attr-defined]
            )
            if not result.ok:
                raise ParseError("initramfs", kind, result.stderr)
            return host.read_bytes(dst)  # type: ignore[attr-defined,no-any-return]
        finally:
            host.unlink(src)  # type: ignore[attr-defined]
            host.unlink(dst)  # type: ignore[attr-defined]

    def read_archives(data: bytes) -> list[CpioMember]:
        members: list[CpioMember] = []
        pos = 0
        while pos < len(data):
            while pos < len(data) and data[pos] == 0:
                pos += 1
            if pos >= len(data):
                break
            if data[pos : pos + 6] in NEWC_MAGICS:
                found, pos = parse_cpio(data, pos)
                members += found
                continue
            kind = compression_of(data, pos)
            if kind is None:
                raise MissingError("not an initramfs")
            inner = decompress(kind, data[pos:])
            members += read_archives(inner) if inner else []
            break
        return members

    return read_archives


def median_time(fn: object, data: bytes, rounds: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        result = fn(data)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> int:
    """Measure and print the ratios."""
    from fwman.driver.boot.initramfs import host_decompressor, read_archives
    from fwman.host.live import LiveHost

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kver", default="6.1.0-50-amd64")
    parser.add_argument("--image", action="append", type=Path, default=[])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        images = list(args.image)
        if not images:
            for compress in ("zstd", "gzip", "xz"):
                made = make_image(args.kver, compress, root / f"initrd.img-{args.kver}.{compress}")
                if made:
                    images.append(made)
        host = LiveHost(str(root / "host"))
        (root / "host").mkdir()
        old, new_decompress = old_reader(host), host_decompressor(host)
        print(f"bounded initramfs reader vs today's, median of {args.rounds} rounds")
        for image in images:
            data = image.read_bytes()
            t_old, m_old = median_time(old, data, args.rounds)
            t_new, m_new = median_time(lambda d: read_archives(d, new_decompress), data, args.rounds)
            same = [(m.name, m.data) for m in m_old] == [(m.name, m.data) for m in m_new]  # type: ignore[attr-defined]
            unpacked = sum(len(m.data) for m in m_new)  # type: ignore[attr-defined]
            print(
                f"  {image.name}: {len(data) / 2**20:.1f} MiB -> {unpacked / 2**20:.1f} MiB in "
                f"{len(m_new)} files ({'same members' if same else 'MEMBERS DIFFER'}): "  # type: ignore[arg-type]
                f"today's {t_old * 1000:.0f} ms, bounded {t_new * 1000:.0f} ms, ratio {t_new / t_old:.2f}x "
                "(target <= 1.2x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
