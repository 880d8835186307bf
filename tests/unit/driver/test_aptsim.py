"""The pre-flight's parsers: ``apt-get -s`` lines, ``Depends`` fields, control data, kernel package names."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver import aptsim

#: apt 2.6.1's own output on this machine (Debian 12): `apt-get -s install linux-headers-6.1.0-57-amd64` and
#: lines of `apt-get -s dist-upgrade`, with the kept-back list as apt prints it
SIMULATION = """\
Reading package lists...
Building dependency tree...
Reading state information...
Calculating upgrade...
The following packages have been kept back:
  story-kernel-broken
  linux-image-amd64:amd64
The following NEW packages will be installed:
  linux-headers-6.1.0-57-amd64 linux-headers-6.1.0-57-common
1 upgraded, 2 newly installed, 0 to remove and 2 not upgraded.
Inst linux-headers-6.1.0-57-common (6.1.192-3 Debian-Security:12/oldstable-security [all])
Inst linux-headers-6.1.0-57-amd64 (6.1.192-3 Debian-Security:12/oldstable-security [amd64])
Inst bash [5.2.15-2+b8] (5.2.15-2+b13 Debian:12.15/oldstable [amd64])
Inst libgcrypt20-dev [1.10.1-3] (1.10.1-3+deb12u1 Debian:12.15/oldstable, Debian-Security:12/o-s [amd64]) []
Remv oldpkg [1.0-1]
Conf linux-headers-6.1.0-57-common (6.1.192-3 Debian-Security:12/oldstable-security [all])
Conf bash (5.2.15-2+b13 Debian:12.15/oldstable [amd64])
"""


def test_the_simulation_of_apt_2_6_reads_as_its_operations() -> None:
    sim = aptsim.parse_simulation(SIMULATION)
    assert [(c.op, c.package, c.installed, c.version) for c in sim.changes] == [
        ("Inst", "linux-headers-6.1.0-57-common", None, "6.1.192-3"),
        ("Inst", "linux-headers-6.1.0-57-amd64", None, "6.1.192-3"),
        ("Inst", "bash", "5.2.15-2+b8", "5.2.15-2+b13"),
        ("Inst", "libgcrypt20-dev", "1.10.1-3", "1.10.1-3+deb12u1"),
        ("Remv", "oldpkg", "1.0-1", None),
        ("Conf", "linux-headers-6.1.0-57-common", None, "6.1.192-3"),
        ("Conf", "bash", None, "5.2.15-2+b13"),
    ]
    assert sim.changes[3].releases == ("Debian:12.15/oldstable", "Debian-Security:12/o-s")
    assert sim.changes[0].arch == "all" and sim.changes[0].new_install and not sim.changes[2].new_install
    assert sim.kept_back == ["story-kernel-broken", "linux-image-amd64"]
    assert [c.package for c in sim.installs()][:2] == ["linux-headers-6.1.0-57-common", "linux-headers-6.1.0-57-amd64"]


@pytest.mark.parametrize(
    "line",
    [
        "Inst linux-image-6.1.0-57-amd64",  # no version part
        "Inst bash [5.2] (5.3 Debian:12/stable)",  # no architecture
        "Remv foo [1.0] (2.0 Debian:12/stable [amd64])",  # a removal with a new version
        "Inst Bad_Name (1.0 x [amd64])",
    ],
)
def test_an_operation_line_that_is_not_in_apts_form_is_a_parse_error_naming_the_line(line: str) -> None:
    with pytest.raises(ParseError) as info:
        aptsim.parse_simulation(f"Reading package lists...\n{line}\n")
    assert info.value.offset == 2


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("Inst Conf Remv[]():,.-+~ abz019\n")), max_size=200) | st.text(max_size=200)
)
def test_the_simulation_parser_gives_operations_or_a_parse_error(text: str) -> None:
    try:
        sim = aptsim.parse_simulation(text)
    except ParseError as e:
        assert e.offset is not None and e.offset >= 1
        return
    assert all(c.package and c.op in ("Inst", "Conf", "Remv") for c in sim.changes)
    assert all((c.version is None) == (c.op == "Remv") for c in sim.changes)


@pytest.mark.parametrize(
    ("name", "kernel"),
    [
        ("linux-image-6.1.0-57-amd64", ("image", "6.1.0-57-amd64")),
        ("linux-image-6.1.0-57-amd64-unsigned", ("image", "6.1.0-57-amd64")),
        ("linux-headers-6.1.0-57-amd64", ("headers", "6.1.0-57-amd64")),
        ("linux-image-6.1.0-57-cloud-amd64", ("image", "6.1.0-57-cloud-amd64")),
        ("proxmox-kernel-6.8.12-4-pve-signed", ("image", "6.8.12-4-pve")),
        ("proxmox-headers-6.8.12-4-pve", ("headers", "6.8.12-4-pve")),
        ("pve-kernel-5.15.108-1-pve", ("image", "5.15.108-1-pve")),
        # Debian 13 has no ABI number: the release and +deb13 (trixie, and trixie-backports' newer series)
        ("linux-image-6.12.118+deb13-amd64", ("image", "6.12.118+deb13-amd64")),
        ("linux-image-6.12.118+deb13-amd64-unsigned", ("image", "6.12.118+deb13-amd64")),
        ("linux-headers-6.12.118+deb13-amd64", ("headers", "6.12.118+deb13-amd64")),
        ("linux-image-7.3.4+deb13-cloud-amd64", ("image", "7.3.4+deb13-cloud-amd64")),
        ("linux-headers-6.12.118+deb13-common", None),
        ("linux-kbuild-6.12.118+deb13", None),
        ("linux-image-6.12.118+deb13-amd64-dbg", None),
        ("linux-image-amd64", None),  # the metapackage
        ("linux-headers-6.1.0-57-common", None),  # the common headers: no kernel of that release
        ("proxmox-kernel-6.8", None),
        ("linux-image-6.1.0-57-amd64-dbg", None),
        ("linux-kbuild-6.1", None),
        ("bash", None),
    ],
)
def test_kernel_packages_name_their_release(name: str, kernel: tuple[str, str] | None) -> None:
    assert aptsim.kernel_of_package(name) == kernel


def test_the_headers_depends_of_debian_12_read_as_groups() -> None:
    field = "linux-headers-6.1.0-57-common (= 6.1.192-3), linux-kbuild-6.1 (>= 6.1.192-3), linux-compiler-gcc-12-x86"
    groups = aptsim.parse_depends(field)
    assert groups == [
        [aptsim.Relation("linux-headers-6.1.0-57-common", "=", "6.1.192-3")],
        [aptsim.Relation("linux-kbuild-6.1", ">=", "6.1.192-3")],
        [aptsim.Relation("linux-compiler-gcc-12-x86")],
    ]
    assert [aptsim.is_build_dependency(g[0].package) for g in groups] == [True, True, False]
    alt = aptsim.parse_depends("libc6 (>= 2.34) [amd64] | libc6.1:any,\n foo <!nocheck>")
    assert [[r.package for r in g] for g in alt] == [["libc6", "libc6.1"], ["foo"]]
    with pytest.raises(ParseError):
        aptsim.parse_depends("linux-kbuild-6.1 (>= )")
    assert aptsim.parse_depends("  ") == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_depends_parser_gives_relations_or_a_parse_error(text: str) -> None:
    try:
        groups = aptsim.parse_depends(text)
    except ParseError:
        return
    assert all(group and all(r.package for r in group) for group in groups)


def test_control_data_folds_continuations_and_stops_at_the_first_stanza() -> None:
    text = "Package: linux-headers-6.1.0-57-amd64\nVersion: 6.1.192-3\nDepends: a,\n b (= 1)\n\nPackage: other\n"
    assert aptsim.parse_control(text) == {
        "Package": "linux-headers-6.1.0-57-amd64",
        "Version": "6.1.192-3",
        "Depends": "a,\nb (= 1)",
    }
    with pytest.raises(ParseError) as info:
        aptsim.parse_control("Package: x\nnot a field\n")
    assert info.value.offset == 2


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_control_parser_gives_fields_or_a_parse_error(text: str) -> None:
    try:
        fields = aptsim.parse_control(text)
    except ParseError as e:
        assert e.offset is not None
        return
    assert all(key and ":" not in key for key in fields)


def test_apt_is_pointed_at_a_temp_root_only_when_there_is_one() -> None:
    assert aptsim.apt_root_options(None) == []
    assert aptsim.apt_root_options("/tmp/r") == [
        "-o",
        "Dir=/tmp/r/",
        "-o",
        "Dir::State::status=/tmp/r/var/lib/dpkg/status",
    ]
