"""`fwman modules check-boot --pin` on a temp root with systemd-boot: the final check the hooks run after the boot
loader's own hook. 6.1.0-50 has fwman's modules (installed by fwman's own actions, real depmod), 6.1.0-53 has none;
loader.conf's `default` glob makes the newest entry the next boot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.env import FwmanEnv
from tests.support.modules import install_tiny_modules
from tests.support.tools import require_tools

OK, BAD = "6.1.0-50-amd64", "6.1.0-53-amd64"
MARKER = "var/lib/fwman/boot-check.pending"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    require_tools("depmod")
    base = tmp_path / "root"
    install_tiny_modules(base, OK)
    (base / f"lib/modules/{BAD}").mkdir(parents=True)
    loader = base / "boot/loader"
    (loader / "entries").mkdir(parents=True)
    (loader / "loader.conf").write_text("timeout 3\ndefault debian-*\n")
    for kver in (OK, BAD):
        (loader / f"entries/debian-{kver}.conf").write_text(f"title Debian\nversion {kver}\nlinux /vmlinuz-{kver}\n")
    return base


def test_without_pin_it_only_reads(root: Path) -> None:
    r = FwmanEnv()("modules", "check-boot", "--json", "--root", str(root))
    assert r.code == 4 and r.json()["kernel"] == BAD and r.json()["pinned"] is None
    assert "default debian-*" in (root / "boot/loader/loader.conf").read_text()
    assert not (root / MARKER).exists()


def test_pin_from_a_kernel_hook_then_apt(root: Path) -> None:
    run = FwmanEnv()
    r = run("modules", "check-boot", "--pin", "--origin", "postinst", "--json", "--root", str(root))
    doc = r.json()
    assert r.code == 0, r.stderr
    assert (doc["kernel"], doc["safe"], doc["pinned"]["kernel"]) == (OK, True, OK)
    assert doc["pinned"]["method"] == "systemd-boot"
    assert doc["changed"] is True and doc["actions"] == [f"pin the boot default to {OK} instead of {BAD}"]
    assert f"default debian-{OK}.conf" in (root / "boot/loader/loader.conf").read_text()
    assert (root / MARKER).exists()  # a kernel hook ran: apt's Post-Invoke hook checks again

    again = run("modules", "check-boot", "--pin", "--origin", "apt", "--json", "--root", str(root)).json()
    assert again["changed"] is False and again["actions"] == [] and again["safe"] is True and again["pinned"] is None
    assert not (root / MARKER).exists()  # consumed


def test_removal_leaves_the_removed_kernel_out(root: Path) -> None:
    """postrm's check: the pinned kernel is being removed (its directory is still there), and none is left."""
    run = FwmanEnv()
    assert run("modules", "check-boot", "--pin", "--root", str(root)).code == 0
    (root / f"boot/loader/entries/debian-{OK}.conf").unlink()  # what 90-loaderentry's remove did
    r = run("modules", "check-boot", "--pin", "--origin", "postrm", "--removed", OK, "--root", str(root))
    assert r.code == 4
    assert "no working patched modules" in r.stderr and "no other kernel has them" in r.stderr
    assert run("modules", "check-boot", "--pin", "--removed", "../x", "--root", str(root)).code == 2


def test_nothing_to_pin_is_said_once_per_apt_run_at_its_end(tmp_path: Path) -> None:
    """Issue 39, row 7: no kernel has working modules (the fork failed for want of g++), so nothing can be pinned.
    Inside an apt run (apt sets DPKG_FRONTEND_LOCKED for dpkg, dpkg(1)) the kernel hooks say nothing of the next
    boot; apt's Post-Invoke check says it in one line, with the command that fixes it."""
    root = tmp_path / "root"
    (root / f"lib/modules/{BAD}").mkdir(parents=True)
    loader = root / "boot/loader"
    (loader / "entries").mkdir(parents=True)
    (loader / "loader.conf").write_text("timeout 3\ndefault debian-*\n")
    (loader / f"entries/debian-{BAD}.conf").write_text(f"title Debian\nversion {BAD}\nlinux /vmlinuz-{BAD}\n")
    state = root / "var/lib/fwman/modules"
    state.mkdir(parents=True)
    (state / f"{BAD}.failed").write_text(
        f'{{"kernel": "{BAD}", "reason": "g++: command not found", "detail": {{"missing_tool": "g++"}}}}'
    )
    apt = FwmanEnv(variables={"PATH": "/usr/bin:/bin", "DPKG_FRONTEND_LOCKED": "true"})
    said = []
    for origin in ("postinst", "postinst", "postrm"):  # image, headers, a second kernel's hooks
        r = apt("modules", "check-boot", "--pin", "--origin", origin, "--root", str(root))
        assert r.code == 0, r.stderr
        said.append(r.stdout + r.stderr)
    assert said == ["", "", ""]
    end = apt("modules", "check-boot", "--pin", "--origin", "apt", "--root", str(root))
    assert end.code == 4 and end.stdout == ""
    assert end.stderr.splitlines() == [
        f"fwman: error: the next boot ({BAD}) has NO working patched NVIDIA modules and no kernel with them can be "
        f"pinned instead: build failed: g++: command not found; fix: apt install g++, then fwman modules build "
        f"--kernel {BAD}"
    ]
    # outside apt (dpkg -i, a person) each check says it itself, with the fix
    alone = FwmanEnv(variables={"PATH": "/usr/bin:/bin"})("modules", "check-boot", "--pin", "--root", str(root))
    assert alone.code == 4 and f"fix: apt install g++, then fwman modules build --kernel {BAD}" in alone.stderr
