"""The bundle file format of `fwman modules export` (pure parts): pack, unpack, the document, the checks."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError, VerificationError
from fwman.driver.bundle import SCHEMA, Bundle, BundleDoc, BundleModule, pack, unpack, verify_contents


def _doc(files: dict[str, bytes], kernel: str = "6.1.0-50-amd64") -> BundleDoc:
    return BundleDoc(
        kernel=kernel,
        vermagic=f"{kernel} SMP preempt mod_unload modversions",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
        commit="0" * 40,
    )


def test_pack_then_unpack_gives_the_same_bundle_and_the_same_bytes_twice() -> None:
    files = {"nvidia": b"\x7fELF one", "nvidia-uvm": b"\x7fELF two"}
    doc = _doc(files)
    data = pack(doc.to_json(), files, b'{"sig": 1}')
    assert pack(doc.to_json(), files, b'{"sig": 1}') == data  # deterministic: same modules, same file
    bundle = unpack(data)
    assert bundle.doc == doc and bundle.files == files and bundle.signature == b'{"sig": 1}'
    assert bundle.sha256 == hashlib.sha256(doc.to_json()).hexdigest()
    assert json.loads(bundle.doc_bytes)["schema"] == SCHEMA


def test_a_changed_module_is_refused_before_it_is_parsed() -> None:
    files = {"nvidia": b"\x7fELF one"}
    bundle = Bundle(_doc(files), b"", None, {"nvidia": b"\x7fELF 0ne"})
    with pytest.raises(VerificationError, match=r"nvidia\.ko does not match the SHA-256"):
        verify_contents(bundle)


def _tar(members: dict[str, bytes], link: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.TarFile(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return out.getvalue()


@pytest.mark.parametrize(
    ("members", "link", "message"),
    [
        ({"modules/nvidia.ko": b"x"}, None, "bundle.json: missing"),
        ({"bundle.json": b"{}"}, None, "schema: expected fwman.modules-bundle/1"),
        ({"bundle.json": _doc({"nvidia": b"x"}).to_json()}, None, "listed in bundle.json but not in the file"),
        (
            {"bundle.json": _doc({"nvidia": b"x"}).to_json(), "modules/nvidia.ko": b"x", "extra": b"y"},
            None,
            "extra: not listed in bundle.json",
        ),
        ({"bundle.json": _doc({"nvidia": b"x"}).to_json(), "modules/nvidia.ko": b"x"}, "modules/evil", "not a regular"),
    ],
)
def test_what_is_not_a_bundle(members: dict[str, bytes], link: str | None, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        unpack(_tar(members, link))


@settings(max_examples=200)
@given(st.binary(max_size=4096))
def test_any_bytes_are_a_bundle_or_a_parse_error(data: bytes) -> None:
    try:
        unpack(data)
    except ParseError:
        pass


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.sampled_from(["bundle.json", "bundle.json.sig", "modules/nvidia.ko", "modules/x.ko", "other"]),
        st.one_of(
            st.binary(max_size=64),
            st.builds(
                lambda doc: json.dumps(doc).encode(),
                st.dictionaries(
                    st.sampled_from(["schema", "kernel", "vermagic", "modules", "commit"]),
                    st.one_of(st.none(), st.text(max_size=8), st.integers(), st.just(SCHEMA), st.just({"nvidia": {}})),
                ),
            ),
        ),
    )
)
def test_any_tar_is_a_bundle_or_a_parse_error(members: dict[str, bytes]) -> None:
    try:
        unpack(_tar(members))
    except ParseError:
        pass
