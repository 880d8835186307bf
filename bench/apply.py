"""``fwman apply`` on a host already at its target, against ``fwman doctor`` on the same host.

A converged apply must cost about what reading the host costs: it gathers doctor's facts once (the owner's
steps come from doctor's chain), then asks each part's planner whether anything is still needed. Target (issue
35): at most 1.5x ``fwman doctor``.

The host is the bundled 4x3090 example host's tree (``fixtures/hosts/rig-4x3090`` materialized) under
``--root``, brought to its target by one ``fwman apply`` first. Both commands run as processes, the way an owner
runs them. Run: ``.venv/bin/python bench/apply.py [--runs N]``. Prints medians and the ratio; exits 0 always
(a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _time(argv: list[str], runs: int) -> float:
    """Return the median wall time of ``argv`` over ``runs`` runs (its exit status is not judged)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    """Measure both commands side by side in one run and print the ratio."""
    from bench.containers import compile_fwman
    from fixtures.hostgen.materialize import materialize
    from tests.support.env import EXAMPLE_HOST

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    compile_fwman()
    script = Path(sys.executable).parent / "fwman"  # the console script; `python -m fwman` where not installed
    fwman = [str(script)] if script.exists() else [sys.executable, "-m", "fwman"]
    with tempfile.TemporaryDirectory() as tmp:
        root = materialize(EXAMPLE_HOST, Path(tmp) / "root")
        where = ["--root", str(root)]
        first = subprocess.run([*fwman, "apply", *where], capture_output=True, text=True, check=False)
        again = subprocess.run([*fwman, "apply", "--json", *where], capture_output=True, text=True, check=False)
        if first.returncode != 0 or '"changed": false' not in again.stdout:
            print(f"the host did not converge: {first.stderr[-2000:]}{again.stdout[-2000:]}")
            return
        doctor = _time([*fwman, "doctor", *where], runs)
        apply = _time([*fwman, "apply", *where], runs)
    print(f"fwman doctor (converged host, --root):  {doctor * 1000:8.1f} ms (median of {runs})")
    print(f"fwman apply  (converged host, --root):  {apply * 1000:8.1f} ms (median of {runs})")
    print(f"ratio apply / doctor: {apply / doctor:.2f}x (target: at most 1.5x)")
    print(f"(machine: {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
