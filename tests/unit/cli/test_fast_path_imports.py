"""The fast paths import no more than they do today (issue 34).

``fwman --version``, ``scan --json``, ``doctor``, ``audit`` and ``upgrade --dry-run`` are the commands whose start
is benchmarked (bench/startup.py, bench/containers.py, bench/catalog.py). Start-up is kept fast by keeping those
paths in small modules, so a module-level import added anywhere they pass pulls its whole subtree into every run.
Each run here is a fresh interpreter on a recorded host; it counts the fwman modules loaded and names the
third-party packages. A ceiling that fails means a fast path grew: move the new import off the path (or into the
one function that needs it, with a comment saying why), or raise the ceiling on purpose and say so in the commit.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HOSTS = REPO / "fixtures" / "hosts"

#: what a fresh interpreter prints: the exit code, then every module loaded once the command returned
PROBE = (
    "import io, json, sys, contextlib\n"
    "from fwman.cli.app import run\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    rc = run(sys.argv[1:])\n"
    "print(json.dumps([rc, sorted(sys.modules)]))\n"
)
#: third-party packages pydantic brings (the doctor's findings are pydantic models)
PYDANTIC = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"}
#: never on a fast path: each costs tens of milliseconds and none of these commands needs it
HEAVY = {"cryptography", "requests", "urllib3", "yaml"}


@functools.cache
def interpreter_start() -> frozenset[str]:
    """Return the top-level modules a bare interpreter here loads before any code runs: ``site``'s hooks (Debian's
    python3 loads ``sitecustomize`` from /etc/python3.X), which no fwman import brings and no command can avoid."""
    probe = "import json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return frozenset(m.split(".")[0] for m in json.loads(out.stdout))


def loaded(argv: list[str]) -> tuple[int, set[str], set[str]]:
    """Return (exit code, fwman modules, third-party top-level packages) of ``fwman ARGV`` in a fresh Python."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120, check=True, cwd=REPO
    )
    rc, modules = json.loads(out.stdout.splitlines()[-1])
    own = {m for m in modules if m == "fwman" or m.startswith("fwman.")}
    tops = {m.split(".")[0] for m in modules}
    third = {t for t in tops if t not in sys.stdlib_module_names and not t.startswith("_") and t != "fwman"}
    third -= interpreter_start()
    return rc, own, third


@pytest.mark.parametrize(
    ("argv", "rc", "ceiling", "third_party"),
    # the --json commands load core/jsonout (the one encoder of the payloads: small, standard library only)
    [
        (["--version"], 0, 9, {"click"}),
        (["--snapshot", str(HOSTS / "h200-1gpu"), "scan", "--json"], 0, 30, {"click"}),
        (["--snapshot", str(HOSTS / "rig-4x3090"), "scan", "--json"], 0, 30, {"click"}),
        (["--snapshot", str(HOSTS / "h200-1gpu"), "audit", "--json"], 0, 75, {"click"}),
        (["--snapshot", str(HOSTS / "rig-4x3090"), "audit", "--json"], 0, 75, {"click", "elftools"}),
        (["--snapshot", str(HOSTS / "h200-1gpu"), "doctor", "--json"], 0, 129, {"click"} | PYDANTIC),
        (["--snapshot", str(HOSTS / "rig-4x3090"), "doctor", "--json"], 4, 142, {"click", "elftools"} | PYDANTIC),
        # bench/catalog.py: the plan reads the catalog, never opens a package nor checks a signature
        (["--snapshot", str(HOSTS / "rig-4x3090"), "upgrade", "--dry-run"], 0, 79, {"click"} | PYDANTIC),
    ],
    ids=["version", "scan-h200", "scan-rig", "audit-h200", "audit-rig", "doctor-h200", "doctor-rig", "upgrade-plan"],
)
def test_fast_path_imports_do_not_grow(argv: list[str], rc: int, ceiling: int, third_party: set[str]) -> None:
    # the command ran to its own answer (the rig's doctor finds a blocker: 4), never an unexpected error
    code, own, third = loaded(argv)
    assert code == rc, f"fwman {' '.join(argv)} exited {code}"
    assert not third & HEAVY, f"a fast path loads {sorted(third & HEAVY)}"
    assert third <= third_party, f"new third-party packages on this path: {sorted(third - third_party)}"
    assert len(own) <= ceiling, f"{len(own)} fwman modules (ceiling {ceiling}): {sorted(own)}"


def test_version_and_scan_stay_in_their_floors() -> None:
    # `--version` is the CLI's door and nothing else; `scan --json` reads the GPUs and prints them: neither
    # reaches firmware, the driver, P2P, the platform probes or the reports
    _, version, _ = loaded(["--version"])
    assert {m.split(".")[1] for m in version if "." in m} <= {"cli", "core", "host"}, sorted(version)
    _, scan, _ = loaded(["--snapshot", str(HOSTS / "h200-1gpu"), "scan", "--json"])
    floors = {m.split(".")[1] for m in scan if "." in m}
    assert floors <= {"cli", "app", "core", "gpu", "host"}, sorted(scan)


#: what a fresh interpreter prints for ``fwman audit``: the fwman modules loaded when the container engines
#: were asked (``ps`` started), then the exit code
ENGINES_PROBE = (
    "import io, json, sys, contextlib\n"
    "import fwman.app.audit as audit\n"
    "asked = []\n"
    "real = audit.start_engine_reads\n"
    "def spy(host):\n"
    "    asked.append(sorted(m for m in sys.modules if m.startswith('fwman.')))\n"
    "    return real(host)\n"
    "audit.start_engine_reads = spy\n"
    "from fwman.cli.app import run\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    rc = run(sys.argv[1:])\n"
    "print(json.dumps([rc, asked]))\n"
)


def test_audit_asks_the_container_engines_before_it_imports_the_rest() -> None:
    """bench/containers.py: the engines' ``ps``/``inspect`` run in their own processes while the rest of audit
    (the report's readers: forks, modules, DKMS, the hold, about 40 modules) is imported and the host read; a
    module-level import of those in app/audit.py would load them before the engines are asked."""
    argv = ["--snapshot", str(HOSTS / "rig-4x3090"), "audit", "--json"]
    out = subprocess.run(
        [sys.executable, "-c", ENGINES_PROBE, *argv], capture_output=True, text=True, timeout=120, check=True, cwd=REPO
    )
    rc, asked = json.loads(out.stdout.splitlines()[-1])
    assert rc == 0 and len(asked) == 1, out.stdout
    later = {"fwman.reports.audit.report", "fwman.reports.audit.rows", "fwman.driver.forks.config",
             "fwman.driver.forks.forge", "fwman.driver.dkms", "fwman.driver.userspace_hold"}  # fmt: skip
    assert not later & set(asked[0]), sorted(later & set(asked[0]))
