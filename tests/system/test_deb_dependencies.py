"""Issue 23 row 5: installing fwman's package never installs a kernel (image or headers), by any dependency.

`apt install ./fwman_*.deb` with `Recommends: dkms` pulled in dkms, whose Recommends (`linux-headers-generic |
linux-headers-686-pae | linux-headers-amd64 | linux-headers`, `apt-cache show dkms` on Debian 12) installed
`linux-headers-amd64`: a kernel series fwman then tracked and could not build for. apt installs Depends,
Pre-Depends and, by default (APT::Install-Recommends), Recommends, and theirs in turn: `apt-cache depends
--recurse` over the package's own fields lists that whole closure (every alternative of an or-group, so it
over-approximates what apt picks), and no line of it may name a linux-image-* or linux-headers-* package.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support.env import REPO
from tests.support.tools import require_tools

pytestmark = pytest.mark.system

KERNEL_PACKAGE = re.compile(r"\blinux-(image|headers)-[a-z0-9.+-]+|<linux-(image|headers)[a-z0-9.+-]*>")


def _binary_fields(control: str, package: str) -> dict[str, str]:
    """Return the fields of ``package``'s paragraph of a debian/control text (continuation lines joined)."""
    for paragraph in control.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in paragraph.splitlines():
            if line.startswith((" ", "\t")) and key is not None:
                fields[key] += " " + line.strip()
            elif ":" in line and not line.startswith("#"):
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") == package:
            return fields
    raise AssertionError(f"no paragraph for {package} in debian/control")


def _installed_with(fields: dict[str, str]) -> list[str]:
    """Return the package names apt installs for these fields (every alternative; substvars made concrete)."""
    names: list[str] = []
    for field in ("Pre-Depends", "Depends", "Recommends"):
        value = fields.get(field, "")
        # ${fwman:Python} is the interpreter (debian/rules); ${misc:*} and ${shlibs:Depends} are debhelper's
        value = value.replace("${fwman:Python}", "python3")
        for item in re.split(r"[,|]", value):
            name = re.sub(r"\(.*?\)|\[.*?\]|\$\{[^}]*\}", "", item).strip()
            if name:
                names.append(name)
    return names


def test_no_dependency_installs_a_kernel() -> None:
    require_tools("apt-cache")
    fields = _binary_fields((REPO / "debian/control").read_text(), "fwman")
    names = _installed_with(fields)
    assert "kmod" in names and "git" in names  # the parse found the fields
    proc = subprocess.run(
        [
            "apt-cache",
            "depends",
            "--recurse",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            *names,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    closure = proc.stdout
    if "Depends:" not in closure:
        pytest.skip("apt knows no packages here (no `apt-get update`): the closure would say nothing")
    kernels = sorted({m.group(0) for m in KERNEL_PACKAGE.finditer(closure)})
    assert kernels == [], f"installing fwman would install a kernel package: {kernels}"
    for name in _installed_with({"Suggests": fields.get("Suggests", "")}):
        assert not KERNEL_PACKAGE.search(name), f"Suggests {name}: a kernel the hooks would then track"
