"""``fwman audit`` on a Podman host with 10 containers, against the engine's own listing of them.

The floor is what any tool must do to know the containers: ``podman ps -a --format json`` and one ``podman
inspect`` of every container (the engine's own commands, run here as two processes). fwman does those two and
everything else audit does (the host's modules and libraries, the CDI spec, each GPU container's layers).
Target: at most 1.5x.

Needs root and Debian's podman (storage, configuration and CDI specs private to a temp directory, as in
tests/system/test_containers_podman.py). Run: ``.venv/bin/python bench/containers.py [--runs N]``. Prints
medians and the ratio; exits 0 always (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _time(argvs: list[list[str]], env: dict[str, str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for argv in argvs:
            subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _in_process(root: Path, env: dict[str, str], runs: int) -> float:
    """Return the median time of audit_host on the root, in this process (imports already done)."""
    from fwman.host.live import LiveHost
    from fwman.reports.audit.report import audit_host

    host = LiveHost(str(root), env=env)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        audit_host(host, offline=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def compile_fwman() -> None:
    """Byte-compile fwman's modules, as every installed copy is (pip and Debian's dh_python3 compile at install).

    Without it an editable checkout run where PYTHONDONTWRITEBYTECODE is set (this workplace sets it) compiles
    every module it imports from source on every run, which the floor (installed, compiled packages) never
    does: that is not fwman's start, and it made up a large part of what the first measurements blamed on it.
    """
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "fwman")], check=True, stdout=subprocess.DEVNULL
    )


def main() -> int:
    """Build the host, measure both sides, print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    if shutil.which("podman") is None:
        print("needs podman (apt-get install --no-install-recommends podman crun)")
        return 0
    from tests.support.engines import DRIVER, LIBDIR, OLD_DRIVER, Podman, gpu_host, nvidia_cdi_spec

    py = sys.executable
    script = Path(py).with_name("fwman")
    fwman = [str(script)] if script.exists() else [py, "-m", "fwman"]
    compile_fwman()
    with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        gpu_host(root)
        pm = Podman(root)
        try:
            (root / "etc/cdi/nvidia.yaml").write_text(nvidia_cdi_spec(DRIVER))
            good = pm.image("localhost/serve:good", {f"{LIBDIR}/libnccl.so.2.27.5": b"nccl"})
            own = pm.image("localhost/serve:own", {f"{LIBDIR}/libcuda.so.{OLD_DRIVER}": b"\x7fELF"})
            kinds = [
                ("--runtime", "nvidia", good),
                ("--device", "nvidia.com/gpu=all", good),
                ("--runtime", "nvidia", own),
                ("--label", "gpu=none", good),
            ]
            for i in range(10):
                flag, value, image = kinds[i % len(kinds)]
                pm("create", "--name", f"c{i}", flag, value, image, "/bin/true")
            env = {**os.environ, **pm.env()}
            ids = json.loads(pm("ps", "-a", "--format", "json"))
            floor_argv = [
                ["podman", "ps", "-a", "--format", "json"],
                ["podman", "inspect", *(c["Id"] for c in ids)],
            ]
            audit_argv = [[*fwman, "--root", str(root), "audit", "--offline", "--json"]]
            check = subprocess.run(audit_argv[0], capture_output=True, text=True, env=env, cwd=REPO)
            rows = [r for r in json.loads(check.stdout)["rows"] if r["component"].startswith("podman container")]
            print(f"audit sees {len(rows)} podman containers: " + ", ".join(sorted({r["status"] for r in rows})))
            _time(floor_argv + audit_argv, env, 1)  # warm the caches once
            floor = _time(floor_argv, env, args.runs)
            audit = _time(audit_argv, env, args.runs)
            inproc = _in_process(root, pm.env(), args.runs)
            # what comes before fwman can ask the engines anything: the interpreter, click, fwman's command line
            bare = _time([[py, "-c", "pass"]], env, args.runs)
            version = _time([[*fwman, "--version"]], env, args.runs)
        finally:
            pm("rm", "-a", "-f")
            pm("rmi", "-a", "-f")
    print(f"podman ps -a + inspect of 10: {floor * 1000:7.1f} ms (median of {args.runs})")
    print(f"fwman audit --json:           {audit * 1000:7.1f} ms")
    print(f"ratio: {audit / floor:.2f}x (target <= 1.5x)")
    print(f"audit_host in process:        {inproc * 1000:7.1f} ms ({inproc / floor:.2f}x: the work without the")
    print("  interpreter's start and fwman's imports, which `fwman --version` and bench/startup.py measure)")
    print(f"python -c pass:               {bare * 1000:7.1f} ms; fwman --version: {version * 1000:.1f} ms")
    print(
        f"  the engines' two commands follow one another, and fwman cannot ask before it has started: "
        f"(fwman --version + floor) / floor = {(version + floor) / floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
