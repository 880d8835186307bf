"""The install step's pure rules (tests/support/system_deps.py): apt's plan, the reasons for upgrades, the links.

The simulation below is apt 2.6's output on a Debian 12 machine a point release behind (this project's own CI
machine, 2026-12-06), cut to the lines that matter: ``Inst`` lines and the ``Debug::pkgDepCache::AutoInstall``
reasons.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.system_deps import Plan, Refused, Step, enabled_links, judge, parse_plan, unit_of

SIMULATION = """\
  Installing udev:amd64 as Depends of initramfs-tools-core:amd64
      Upgrading systemd:amd64 < 252.38-1~deb12u1 | 252.39-1~deb12u2 @ii uH > due to udev:amd64
      Upgrading libudev1:amd64 < 252.38-1~deb12u1 | 252.39-1~deb12u2 @ii uH > due to udev:amd64
    Installing initramfs-tools-core:amd64 as Depends of initramfs-tools:amd64
  Installing libsubid4:amd64 as Depends of podman:amd64
    Upgrading passwd:amd64 < 1:4.13+dfsg1-1+deb12u1 | 1:4.13+dfsg1-1+deb12u2 @ii uH > due to libsubid4:amd64
    Installing perl:amd64 as Depends of libcpanel-json-xs-perl:amd64
  Installing libcpanel-json-xs-perl:amd64 as Depends of lintian:amd64
Inst passwd [1:4.13+dfsg1-1+deb12u1] (1:4.13+dfsg1-1+deb12u2 Debian:12.15/oldstable [amd64])
Inst perl [5.36.0-7+deb12u2] (5.36.0-7+deb12u4 Debian:12.15/oldstable [amd64]) []
Inst systemd [252.38-1~deb12u1] (252.39-1~deb12u2 Debian:12.15/oldstable [amd64])
Inst libudev1 [252.38-1~deb12u1] (252.39-1~deb12u2 Debian:12.15/oldstable [amd64])
Inst udev (252.39-1~deb12u2 Debian:12.15/oldstable [amd64])
Inst libsubid4 (1:4.13+dfsg1-1+deb12u2 Debian:12.15/oldstable [amd64])
Inst podman (4.3.1+ds1-8+deb12u1+b3 Debian:12.15/oldstable [amd64])
Conf passwd (1:4.13+dfsg1-1+deb12u2 Debian:12.15/oldstable [amd64])
"""
ASKED = ["initramfs-tools", "podman", "lintian"]


def newer(new: str, old: str) -> bool:
    """A stand-in for dpkg's comparison good enough for these versions (the tests give only increasing pairs)."""
    return new != old


def test_apt_s_output_is_read_into_steps_and_reasons() -> None:
    plan = parse_plan(SIMULATION)
    assert Step("passwd", "1:4.13+dfsg1-1+deb12u2", "1:4.13+dfsg1-1+deb12u1") in plan.steps
    assert Step("udev", "252.39-1~deb12u2") in plan.steps
    assert [s.name for s in plan.upgrades] == ["passwd", "perl", "systemd", "libudev1"]
    assert plan.reasons["passwd"] == "libsubid4" and plan.reasons["systemd"] == "udev"
    assert plan.chain("systemd", ASKED) == ["systemd", "udev", "initramfs-tools-core", "initramfs-tools"]


def test_each_upgrade_is_said_once_with_the_chain_up_to_what_was_asked() -> None:
    lines = judge(parse_plan(SIMULATION), ASKED, newer)
    assert lines == [
        "upgrading passwd 1:4.13+dfsg1-1+deb12u1 -> 1:4.13+dfsg1-1+deb12u2: needed by libsubid4 <- podman",
        "upgrading perl 5.36.0-7+deb12u2 -> 5.36.0-7+deb12u4: needed by libcpanel-json-xs-perl <- lintian",
        "upgrading systemd 252.38-1~deb12u1 -> 252.39-1~deb12u2: needed by udev <- initramfs-tools-core"
        " <- initramfs-tools",
        "upgrading libudev1 252.38-1~deb12u1 -> 252.39-1~deb12u2: needed by udev <- initramfs-tools-core"
        " <- initramfs-tools",
    ]


def test_an_upgrade_no_asked_package_needs_is_refused_naming_it() -> None:
    plan = parse_plan(SIMULATION + "Inst openssh-server [1:9.2p1-2] (1:9.2p1-2+deb12u9 Debian:12.15 [amd64])\n")
    with pytest.raises(Refused, match=r"no package asked for needs: openssh-server \(nothing was installed"):
        judge(plan, ASKED, newer)


def test_a_reason_loop_does_not_tie_an_upgrade_to_the_request() -> None:
    plan = Plan((Step("a", "2", "1"),), reasons={"a": "b", "b": "a"})
    assert plan.chain("a", ["c"]) is None
    with pytest.raises(Refused, match="needs: a"):
        judge(plan, ["c"], newer)


def test_a_removal_or_a_downgrade_is_refused() -> None:
    with pytest.raises(Refused, match="would remove installed packages: exim4"):
        judge(parse_plan(SIMULATION + "Remv exim4 [4.96-15]\n"), ASKED, newer)
    with pytest.raises(Refused, match="would downgrade passwd"):
        judge(parse_plan(SIMULATION), ASKED, lambda new, old: False)


@given(st.text())
def test_any_text_gives_a_plan_and_every_chain_ends(text: str) -> None:
    plan = parse_plan(text)
    for step in plan.steps:
        chain = plan.chain(step.name, ["x"])
        assert chain is None or (chain[0] == step.name and chain[-1] == "x" and len(set(chain)) == len(chain))


@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True),
                          st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True)), max_size=20))  # fmt: skip
def test_reasons_are_read_back_from_the_lines_apt_prints(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"  Installing {a}:amd64 as Depends of {b}:amd64\n" for a, b in pairs)
    plan = parse_plan(text)
    expected: dict[str, str] = {}
    for a, b in pairs:
        if a != b:
            expected.setdefault(a, b)
    assert plan.reasons == expected


def test_links_that_enable_are_found_and_named_masks_are_not(tmp_path: Path) -> None:
    system = tmp_path / "etc/systemd/system"
    (system / "multi-user.target.wants").mkdir(parents=True)
    (system / "sockets.target.wants").mkdir()
    os.symlink("/lib/systemd/system/docker.service", system / "multi-user.target.wants/docker.service")
    os.symlink("/lib/systemd/system/docker.socket", system / "sockets.target.wants/docker.socket")
    os.symlink("/lib/systemd/system/foo.service", system / "dbus-org.foo.service")  # an alias
    os.symlink("/dev/null", system / "masked.service")
    (tmp_path / "etc/rc2.d").mkdir(parents=True)
    os.symlink("../init.d/docker", tmp_path / "etc/rc2.d/S01docker")
    os.symlink("../init.d/gone", tmp_path / "etc/rc2.d/K01gone")
    links = enabled_links(tmp_path)
    assert links == {
        "system/multi-user.target.wants/docker.service",
        "system/sockets.target.wants/docker.socket",
        "system/dbus-org.foo.service",
        "rc2.d/S01docker",
    }
    assert {unit_of(link, tmp_path) for link in links} == {
        ("system", "docker.service"),
        ("system", "docker.socket"),
        ("system", "foo.service"),
        ("sysv", "docker"),
    }
