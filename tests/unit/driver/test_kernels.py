"""The one kernel listing: which kernels are installed (version order) and which have headers."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.driver.kernels import headers_present, installed_kernels, version_key
from fwman.host.live import LiveHost


def test_installed_kernels_are_directories_in_version_order(tmp_path: Path) -> None:
    for k in ("6.1.0-9-amd64", "6.10.1-1-pve", "6.1.0-50-amd64"):
        (tmp_path / "lib/modules" / k).mkdir(parents=True)
    (tmp_path / "lib/modules/README").write_text("not a kernel\n")
    host = LiveHost(str(tmp_path))
    # lexical order would put 6.1.0-50 before 6.1.0-9 and 6.10 before 6.1.0-9
    assert installed_kernels(host) == ["6.1.0-9-amd64", "6.1.0-50-amd64", "6.10.1-1-pve"]


def test_no_module_directory_means_no_kernel(tmp_path: Path) -> None:
    assert installed_kernels(LiveHost(str(tmp_path))) == []


def test_headers_are_the_include_directory_of_build(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    (tmp_path / "lib/modules/6.1.0-50-amd64/build").mkdir(parents=True)
    assert not headers_present(host, "6.1.0-50-amd64")  # a dangling or empty build/ is not headers
    (tmp_path / "lib/modules/6.1.0-50-amd64/build/include").mkdir()
    assert headers_present(host, "6.1.0-50-amd64")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=6))
def test_version_key_orders_any_names(names: list[str]) -> None:
    # any directory names sort without an exception (numbers and text never meet in one comparison)
    ordered = sorted(names, key=version_key)
    assert sorted(ordered, key=version_key) == ordered
