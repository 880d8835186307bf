"""VBIOS version order (fwman.firmware.versions): four ordered fields, an unordered build code, the catalog's word."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from fwman.firmware.versions import Order, catalog_newer, compare, newest_first
from tests.support.env import FwmanEnv

SNAP = "fixtures/hosts/rig-4x3090"


@dataclass(frozen=True)
class Img:
    """A stand-in catalog image: just what the order reads."""

    version: str
    release_date: str = ""
    superseded_by: str = ""


def versions(images: list[Img]) -> list[str]:
    """Return the versions of ``images`` newest first."""
    return [i.version for i in newest_first(images)]


def test_supersession_beats_the_build_code() -> None:
    # the bundled 3842:3987 board: .AD was withdrawn and replaced by .27; as hex numbers AD > 27
    rebar, withdrawn = Img("94.02.42.80.27"), Img("94.02.42.80.AD", superseded_by="94.02.42.80.27")
    launch = Img("94.02.26.48.15", "2020-10", superseded_by="94.02.42.80.27")
    for order in ([withdrawn, rebar, launch], [launch, withdrawn, rebar], [rebar, launch, withdrawn]):
        assert versions(order)[0] == "94.02.42.80.27"
    assert catalog_newer(rebar, withdrawn, [rebar, withdrawn]) is True
    assert catalog_newer(withdrawn, rebar, [rebar, withdrawn]) is False


def test_supersession_follows_a_chain() -> None:
    a, b, c = (
        Img("94.02.42.80.01", superseded_by="94.02.42.80.02"),
        Img("94.02.42.80.02", superseded_by="94.02.42.80.03"),
        Img("94.02.42.80.03"),
    )
    assert versions([a, b, c]) == ["94.02.42.80.03", "94.02.42.80.02", "94.02.42.80.01"]
    assert catalog_newer(c, a, [a, b, c]) is True


def test_release_dates_decide_at_their_common_precision() -> None:
    older, newer = Img("94.02.42.80.BB", "2021-03"), Img("94.02.42.80.AA", "2021-04-02")
    assert versions([older, newer]) == ["94.02.42.80.AA", "94.02.42.80.BB"]
    same_month = [Img("94.02.42.80.BB", "2021-03"), Img("94.02.42.80.AA", "2021-03-30")]
    assert catalog_newer(same_month[0], same_month[1], same_month) is None


def test_build_codes_alone_are_unordered_and_keep_the_file_order() -> None:
    first, second = Img("94.02.42.80.27"), Img("94.02.42.80.AD")
    assert catalog_newer(first, second, [first, second]) is None
    assert versions([first, second]) == ["94.02.42.80.27", "94.02.42.80.AD"]
    assert versions([second, first]) == ["94.02.42.80.AD", "94.02.42.80.27"]


def test_first_four_fields_order_when_the_catalog_says_nothing() -> None:
    assert versions([Img("94.02.26.48.15"), Img("94.02.42.80.27")]) == ["94.02.42.80.27", "94.02.26.48.15"]


@given(st.text(max_size=20), st.text(max_size=20))
def test_compare_never_raises(a: str, b: str) -> None:
    assert compare(a, b) in (None, *Order)


@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), min_size=2, max_size=2))
def test_compare_is_antisymmetric_and_ignores_the_build_code(fields: list[tuple[int, int]]) -> None:
    (x, bx), (y, by) = fields
    a, b = f"94.02.42.{x:02X}.{bx:02X}", f"94.02.42.{y:02X}.{by:02X}"
    ab, ba = compare(a, b), compare(b, a)
    flip = {
        Order.OLDER: Order.NEWER,
        Order.NEWER: Order.OLDER,
        Order.SAME: Order.SAME,
        Order.SAME_BASE: Order.SAME_BASE,
    }
    assert ab is not None and ba is flip[ab]
    assert (ab in (Order.SAME, Order.SAME_BASE)) == (x == y)


def test_catalog_show_and_list_put_the_replacement_first(fwman: FwmanEnv) -> None:
    show = fwman("catalog", "show", "3842:3987", "--snapshot", SNAP)
    assert show.code == 0, show.stderr
    assert show.stdout.index("94.02.42.80.27") < show.stdout.index("94.02.42.80.AD")
    listed = fwman("catalog", "list", "--snapshot", SNAP)
    rows = [line.split()[-4] for line in listed.stdout.splitlines() if line.startswith("3842:3987")]
    assert rows == ["94.02.42.80.27", "94.02.42.80.AD", "94.02.26.48.15"]


def test_upgrade_dry_run_lists_the_replacement_before_the_withdrawn_image(fwman: FwmanEnv) -> None:
    r = fwman("upgrade", "--dry-run", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    block = r.stdout[r.stdout.index("Images for 3842:3987") :]
    lines = [line.split()[:2] for line in block.splitlines()[1:4]]
    assert lines == [["use", "94.02.42.80.27"], ["skip", "94.02.42.80.AD"], ["skip", "94.02.26.48.15"]]
