"""The README's set-up from zero: a fresh Debian 12 machine, `git clone`, then `make system-deps` and `make check`.

The machine is a root made with mmdebstrap (tests/support/debroot.py ``fresh_tarball``): apt and the essential
packages plus git, make and python3-venv, from the point release alone, so that it is behind the archive as most
installed machines are (upgrades the install needs are taken; which, depends on the day's archive: the rule itself
is driven by tests/system/test_system_deps.py). The root is given the archive's full sources (updates and
security too) and this machine's trust for HTTPS (its CA bundle, named in the root's pip.conf: where a proxy
checks the traffic, as here, pip cannot reach PyPI without it, as on the machine itself; an owner's machine has
its own), the repository is cloned into it with its own git, and the README's set-up runs there as root. It must
pass, and leave no unit enabled and no process running that was not there before.

This is the test of the install step that a CI machine which already has every package cannot be: it starts from
nothing. It clones the committed HEAD of this checkout (uncommitted changes are not in it).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.debroot import DebRoot, debian_sources, fresh_tarball
from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

pytestmark = pytest.mark.system

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

#: every enabling link in the root with its target (systemd's under /etc/systemd, SysV start links), one a line
LINKS = (
    "find /etc/systemd -type l ! -lname /dev/null -printf '%p -> %l\\n'; "
    "find /etc/rc0.d /etc/rc1.d /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d /etc/rc6.d /etc/rcS.d "
    "-name 'S*' -printf '%p\\n' 2>/dev/null; true"
)
#: the processes of the root's PID namespace other than the one asking, as JSON {pid: command line}
PROCS = (
    'python3 -c \'import json, os; me = os.getpid(); print(json.dumps({p: open(f"/proc/{p}/cmdline", "rb")'
    '.read().replace(b"\\0", b" ").decode(errors="replace") for p in os.listdir("/proc") '
    "if p.isdigit() and int(p) != me}))'"
)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebRoot]:
    """A fresh Debian 12 machine (point release, full sources) holding a clone of this repository in /root/fwman."""
    if not is_root():
        pytest.skip("mmdebstrap roots, chroot and loop devices need root")
    require_tools("mmdebstrap", "unshare", "mkfs.ext4", "git", package="mmdebstrap")
    work = tmp_path_factory.mktemp("fresh")
    bare = work / "fwman.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(REPO), str(bare)], check=True)
    root = DebRoot.create(work / "root", fresh_tarball(), size_gb=16)
    try:
        root.sh("rm -f /etc/apt/sources.list && rm -rf /etc/apt/sources.list.d && mkdir /etc/apt/sources.list.d")
        root.write_text("/etc/apt/sources.list.d/debian.sources", debian_sources())
        if CA_BUNDLE.is_file():  # this machine's HTTPS trust, as the apt sources are this machine's
            root.put(CA_BUNDLE, str(CA_BUNDLE))
            root.write_text("/etc/pip.conf", f"[global]\ncert = {CA_BUNDLE}\n")
        root.put(bare, "/srv/fwman.git")
        root.sh("git clone --quiet /srv/fwman.git /root/fwman")
        yield root
    finally:
        root.close()


def test_the_readme_set_up_passes_on_a_fresh_machine_and_leaves_nothing_enabled_or_running(fresh: DebRoot) -> None:
    links_before = set(fresh.sh(LINKS).stdout.splitlines())
    script = (
        f"{PROCS} > /root/procs-before.json; "
        "cd /root/fwman && make system-deps > /root/system-deps.log 2>&1 && make check > /root/check.log 2>&1; "
        f"echo rc=$?; cd /; {PROCS}"
    )
    r = fresh.sh(script, check=False, timeout=3600)
    logs = {
        name: fresh.sh(f"cat /root/{name}.log 2>/dev/null", check=False).stdout for name in ("system-deps", "check")
    }
    tail = "\n".join(f"--- {n}\n{text[-5000:]}" for n, text in logs.items())
    status, _, after = r.stdout.partition("\n")
    assert status == "rc=0", f"{r.stdout[-2000:]}{r.stderr[-2000:]}\n{tail}"
    # the install step said what it upgraded (the root is behind the archive), and the tests ran and passed
    assert re.search(r"^kernels for the module tests: \S+ \(3 arguments\), \S+ \(4 arguments\)$", logs["system-deps"],
                     re.MULTILINE), tail  # fmt: skip
    assert "refused" not in logs["system-deps"], tail
    assert re.search(r"^\d+ passed", logs["check"].splitlines()[-1]), tail
    # nothing the set-up installed is left enabled or running
    assert set(fresh.sh(LINKS).stdout.splitlines()) - links_before == set(), tail
    before = json.loads(fresh.read_text("/root/procs-before.json"))
    left = {pid: cmd for pid, cmd in json.loads(after).items() if pid not in before}
    assert left == {}, f"left running: {left}"


def test_the_readme_names_the_set_up_and_its_cost() -> None:
    readme = (REPO / "README.md").read_text()
    first = readme.split("\n\n", 2)[1]
    assert "make demo" in first and "make test" in first
    section = readme[readme.index("## Development") :]
    assert "tests/support/system_deps.py" in section and "fresh machine" in section
    assert shlex.split("make system-deps")[1] in Path(REPO / "Makefile").read_text()
