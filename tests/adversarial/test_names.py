"""Names validated at the edge (rows 1, 4, 6, 13, 14, 16): a bad one is exit 2 with one line, nothing written."""

from __future__ import annotations

import hashlib
import os
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core import names
from fwman.core.errors import UsageError
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST
from tests.support.errors import one_error_line


def tree(path: Path) -> list[str]:
    """Return every path under ``path`` (relative), sorted: what a command wrote."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# -- row 1: a fork URL never becomes a git option ------------------------------------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        "evil=--upload-pack=touch {pwned}",
        "evil=-u touch {pwned}",
        "evil=--config=core.sshCommand=touch {pwned}",
        "evil=ext::sh -c touch% {pwned}",
        "-x=https://example.org/r",
        "evil=https://example.org/r\nx",
    ],
)
def test_a_fork_that_would_be_a_git_option_is_refused(attack: CountingEnv, tmp_path: Path, spec: str) -> None:
    pwned = tmp_path / "PWNED"
    root = tmp_path / "root"
    root.mkdir()
    fork = spec.format(pwned=pwned)
    r = attack("driver", "branches", "--root", str(root), "--fork", fork, "--driver-version", "570.86.16")
    assert r.code == 2, r.stderr
    line = one_error_line(r)
    assert "--fork" in line
    assert not pwned.exists()
    assert tree(root) == []


def test_a_fork_in_config_toml_is_checked_the_same_way(tmp_path: Path) -> None:
    from tests.support.counting import CountingEnv

    pwned = tmp_path / "PWNED"
    root = tmp_path / "root"
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text(f'[forks]\nevil = "--upload-pack=touch {pwned}"\n')
    r = CountingEnv()("driver", "branches", "--root", str(root), "--driver-version", "570.86.16")
    assert r.code == 2, r.stderr
    assert "[forks] evil URL" in one_error_line(r)
    assert not pwned.exists()


def test_git_gets_double_dash_before_the_url(tmp_path: Path) -> None:
    # the second rail: even a URL that passed the check reaches git after `--`
    from fwman.driver.forks.lsremote import list_via_git
    from fwman.host.base import CommandResult

    class Spy:
        def __init__(self) -> None:
            self.argv: list[str] = []

        def run(self, argv: list[str], **kw: object) -> CommandResult:
            self.argv = list(argv)
            return CommandResult(tuple(argv), 0, "", "")

        def local_path(self, path: str) -> str:
            return path

    tried()
    spy = Spy()
    list_via_git(spy, "https://example.org/r")  # type: ignore[arg-type]
    assert spy.argv == ["git", "ls-remote", "--heads", "--", "https://example.org/r"]


# -- row 4: kernel releases never become paths ---------------------------------------------------------------
@pytest.mark.parametrize("kver", ["../../../tmp/evil", "a/b", "", "x" * 5000, "-rf", ".hidden", "6.1 0", "6.1\n0"])
def test_a_bad_kernel_release_writes_nothing(attack: CountingEnv, tmp_path: Path, kver: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    r = attack("modules", "build", "--root", str(root), "--kernel", kver, "--source", "/src")
    assert r.code == 2, r.stderr
    assert "not a kernel release" in one_error_line(r)
    assert tree(root) == []
    assert not (tmp_path / "tmp").exists()


@pytest.mark.parametrize("kver", ["../../../etc", "6.1.0-50-amd64/../../../../tmp/evil", "-rf", "6.1\n0"])
def test_a_bundles_kernel_release_never_becomes_a_path(attack: CountingEnv, tmp_path: Path, kver: str) -> None:
    # the bundle's kernel becomes /lib/modules/<kver>/updates/fwman and /var/lib/fwman/modules/<kver>.d, as
    # --kernel does: an unsigned bundle (accepted when no bundle key is configured) with a climbing release
    # wrote modules into /etc and deleted directories by name; its modules' vermagic names the same release
    from fixtures.tinymod.elfgen import build_module, nvidia_tags
    from fwman.driver.bundle.format import BundleDoc, BundleModule, pack
    from fwman.gpu.kernel_modules import MODULE_NAMES

    files = {n: build_module(nvidia_tags("570.86.16", kver, name=n)) for n in MODULE_NAMES}
    doc = BundleDoc(
        kernel=kver,
        vermagic=f"{kver} SMP mod_unload",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
    )
    bundle = tmp_path / "evil.fwbundle"
    bundle.write_bytes(pack(doc.to_json(), files))
    root = tmp_path / "root"
    (root / "lib/modules/6.1.0-50-amd64").mkdir(parents=True)
    (root / "etc").mkdir()
    before = tree(root)
    for extra in (("--dry-run",), ()):
        r = attack("--root", str(root), "modules", "import", str(bundle), *extra)
        assert r.code == 4, r.stderr
        assert "module bundle: kernel: " in one_error_line(r) and "is not a kernel release" in r.stderr
        assert r.stdout == ""  # no "ok: kernel ... is installed", no "would install"
        assert tree(root) == before


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=string.printable + "\x00\u00e9/", max_size=80))
def test_kernel_release_property(text: str) -> None:
    tried()
    try:
        value = names.kernel_release(text)
    except UsageError as e:
        assert "\n" not in e.message and e.hint
        return
    assert value == text and "/" not in value and not value.startswith(("-", "."))
    assert len(value) <= names.MAX_KERNEL_RELEASE and value.isprintable() and " " not in value
    assert os.path.basename(value) == value and value not in (".", "..")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdefABCDEF:.xz-", max_size=20))
def test_bus_id_property(text: str) -> None:
    tried()
    try:
        value = names.bus_id(text)
    except UsageError:
        return
    domain, bus, rest = value.split(":")
    assert len(domain) == 4 and len(bus) == 2 and rest[2] == "." and rest[3] in "01234567"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_fork_url_and_board_id_property(text: str) -> None:
    tried(2)
    try:
        url = names.fork_url(text)
        assert not url.startswith("-") and not any(c.isspace() for c in url)
    except UsageError:
        pass
    try:
        board = names.board_id(text)
        assert board.startswith("0x") and len(board) == 6
    except UsageError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + "\x00\u00e9", max_size=60))
def test_host_path_property(text: str) -> None:
    # a host output path (metrics write -o) stays under --root and names a file: absolute, no '..', no control
    tried()
    try:
        value = names.host_path(text)
    except UsageError as e:
        assert "\n" not in e.message and e.hint
        return
    assert value.startswith("/") and value != "/" and ".." not in value.split("/")
    assert value == os.path.normpath(value) and value.isprintable()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.printable, max_size=60))
def test_branch_name_property(text: str) -> None:
    tried()
    try:
        value = names.branch_name(text)
    except UsageError:
        return
    assert not value.startswith(("-", ".")) and ".." not in value and ":" not in value and " " not in value


# -- rows 6, 13, 14 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("date", ["2026-13-45", "2026-02-30", "yesterday", "2026-1-1", "20261201", ""])
def test_catalog_sign_date(attack: CountingEnv, tmp_path: Path, date: str) -> None:
    key = tmp_path / "key.pem"
    key.write_text("not read: the date is checked first")
    r = attack("catalog", "sign", "--key", str(key), "--dir", str(tmp_path), "--date", date)
    assert r.code == 2, r.stderr
    line = one_error_line(r)
    assert "not a date" in line and "ValidationError" not in r.stderr and "pydantic" not in r.stderr
    assert "YYYY-MM-DD" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key.pem"]


@pytest.mark.parametrize("board", ["zz", "0x12345", "0x", "-1", "0240 1"])
def test_rom_verify_board_id(attack: CountingEnv, tmp_path: Path, board: str) -> None:
    from fixtures.romgen import RomSpec, build_rom

    image = tmp_path / "image.rom"
    image.write_bytes(build_rom(RomSpec()))
    r = attack("rom", "verify", str(image), "--card", "41:00.0", "--board-id", board, "--snapshot", str(EXAMPLE_HOST))
    assert r.code == 2
    assert "not a board ID" in one_error_line(r) and "0x0240" in r.stderr


@pytest.mark.parametrize("n", ["0", "-1", "-100"])
def test_flash_status_count(attack: CountingEnv, n: str) -> None:
    r = attack("flash", "status", "-n", n, "--snapshot", str(EXAMPLE_HOST))
    assert r.code == 2
    assert one_error_line(r) == f"fwman: error: -n {n}: must be at least 1"


@pytest.mark.parametrize("bus_id", ["41:00", "zz:00.0", "41:00.8", "../41:00.0", "41:00.0 x", "0" * 40])
def test_bad_bus_ids(attack: CountingEnv, bus_id: str) -> None:
    r = attack("flash", "history", "--card", bus_id, "--snapshot", str(EXAMPLE_HOST))
    assert r.code == 2
    assert "not a PCI bus id" in one_error_line(r)


# -- row 16: --root must exist -------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [("hooks", "install"), ("dkms", "block"), ("modules", "keygen"), ("scan",)])
def test_a_root_typo_makes_no_tree(attack: CountingEnv, tmp_path: Path, command: tuple[str, ...]) -> None:
    typo = tmp_path / "typo"
    r = attack("--root", str(typo), *command)
    assert r.code == 2
    assert one_error_line(r) == f"fwman: error: --root {typo}: does not exist"
    assert not typo.exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    r = attack("--root", str(afile), *command)
    assert r.code == 2 and "is a file" in r.stderr  # click's own check of a file_okay=False path
    r = CountingEnv(variables={"FWMAN_ROOT": str(typo)})(*command)
    assert r.code == 2 and "FWMAN_ROOT" in one_error_line(r)
    assert not typo.exists()


@pytest.mark.parametrize("value", ["abc", "", "570", "570.86.16-p2p", "--x", "570.86.16.1"])
def test_a_bad_driver_version_on_the_command_line_is_usage(attack: CountingEnv, value: str) -> None:
    r = attack("driver", "branches", "--snapshot", str(EXAMPLE_HOST), "--offline", "--driver-version", value)
    assert r.code == 2, r.stderr
    assert "--driver-version" in one_error_line(r) and "not an NVIDIA driver version" in r.stderr


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.digits + ".-p \n", max_size=16))
def test_driver_version_property(text: str) -> None:
    tried()
    try:
        version = names.driver_version(text)
    except UsageError as e:
        assert "\n" not in e.message and e.hint
        return
    assert str(version) == text.strip() and version.major >= 10
