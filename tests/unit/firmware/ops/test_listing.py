"""What 7zz and bsdtar list of an archive: the parsers (any text: members, never an exception)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.firmware.ops.listing import parse_7zz_listing, parse_bsdtar_listing

BSDTAR_LISTING = """\
drw-r--r--  0 0      0           0 Jan  1  1970 dir/
-rw-r--r--  0 0      0           5 Jan  1  1970 dir/a.rom
prw-r--r--  0 0      0           0 Jan  1  1970 fifo
crw-r--r--  0 0      0         1,5 Jan  1  1970 chr
lrw-r--r--  0 0      0           0 Jan  1  1970 sl x -> y -> ../up
hrw-r--r--  0 0      0           0 Jan  1  1970 hl link to dir/a.rom
-rw-r--r--  0 0      0           1 Jan  1  1970 weird\\nname
"""


def test_bsdtar_listing_gives_every_reading_of_a_link_line() -> None:
    got = [(m.kind, m.size, m.name, m.targets) for m in parse_bsdtar_listing(BSDTAR_LISTING)]
    assert got == [
        ("d", 0, "dir/", ()),
        ("-", 5, "dir/a.rom", ()),
        ("p", 0, "fifo", ()),
        ("c", 0, "chr", ()),
        ("l", 0, "sl x -> y -> ../up", ("y -> ../up", "../up")),
        ("h", 0, "hl link to dir/a.rom", ("dir/a.rom",)),
        ("-", 1, "weird\\nname", ()),
    ]


SEVENZ_LISTING = """\
Path = a
Folder = +
Size = 0
Attributes = D drwxr-xr-x

Path = a/AS02.rom
Size = 100
Attributes = A -rw-r--r--

Path = fifo
Size = 0
Mode = prw-r--r--
Symbolic Link =\x20
Hard Link =\x20

Path = sl_out
Size = 11
Mode = lrw-r--r--
Symbolic Link = /etc/shadow

Path = b.rom
Folder = -
Size = 1
Attributes = V 01800000 0rw-------
"""


def test_7zz_listing_gives_types_sizes_and_link_targets() -> None:
    got = [(m.kind, m.size, m.name, m.targets) for m in parse_7zz_listing(SEVENZ_LISTING)]
    assert got == [
        ("d", 0, "a", ()),
        ("-", 100, "a/AS02.rom", ()),
        ("p", 0, "fifo", ()),
        ("l", 11, "sl_out", ("/etc/shadow",)),
        ("-", 1, "b.rom", ()),
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600), st.sampled_from([BSDTAR_LISTING, SEVENZ_LISTING]), st.integers(0, 600))
def test_the_listing_parsers_take_any_text(text: str, real: str, cut: int) -> None:
    for blob in (text, real[:cut] + text, real.replace(" = ", text[:3]) + text):
        for member in [*parse_7zz_listing(blob), *parse_bsdtar_listing(blob)]:
            assert member.size >= 0 and len(member.kind) == 1 and isinstance(member.targets, tuple)
