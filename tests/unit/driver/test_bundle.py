"""The bundle file format of `fwman modules export` (pure parts): pack, unpack, the document, the checks."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError, VerificationError
from fwman.driver.bundle.format import SCHEMA, Bundle, BundleDoc, BundleModule, pack, unpack, verify_contents


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


def sparse_member(name: str, expanded: int) -> bytes:
    """Return the header of a GNU sparse member (type ``S``) that stores nothing and expands to ``expanded``."""
    info = tarfile.TarInfo(name)
    buf = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    buf[156:157] = b"S"
    buf[386:398] = b"%011o\0" % expanded  # one map entry: no data at the very end
    buf[398:410] = b"%011o\0" % 0
    buf[483:495] = b"%011o\0" % expanded  # the real (expanded) size
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf[:512])
    return bytes(buf[:512])


def test_sparse_members_are_refused_unread() -> None:
    # a 10 KB bundle whose six sparse members each expand to 100 MiB (the reviewer's was 6 x 500 MiB: 3 GiB of
    # memory before bundle.json was even looked at)
    doc = tarfile.TarInfo("bundle.json")
    doc.size = 2
    head = doc.tobuf(tarfile.GNU_FORMAT) + b"{}".ljust(512, b"\0")
    data = head + b"".join(sparse_member(f"m{i}", 100 << 20) for i in range(6)) + bytes(1024)
    assert len(data) < 16 * 1024
    with tarfile.TarFile(fileobj=io.BytesIO(data)) as tar:
        assert [m.size for m in tar.getmembers()][1:] == [100 << 20] * 6  # what a reader would expand
    tracemalloc.start()
    try:
        with pytest.raises(ParseError, match="m0: a sparse member"):
            unpack(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_members_are_checked_against_bundle_json_before_any_module_is_read() -> None:
    files = {"nvidia": b"\x7fELF one"}
    doc = _doc(files).to_json()
    with pytest.raises(ParseError, match=r"modules/nvidia\.ko: 5 bytes, but bundle.json says 8"):
        unpack(_tar({"bundle.json": doc, "modules/nvidia.ko": b"short"}))
    # bundle.json after a module, or an unlisted member first: the order in the file does not matter
    assert unpack(_tar({"modules/nvidia.ko": files["nvidia"], "bundle.json": doc})).files == files
    with pytest.raises(ParseError, match=r"other: not listed in bundle\.json"):
        unpack(_tar({"other": b"x" * 100, "bundle.json": doc, "modules/nvidia.ko": files["nvidia"]}))
    with pytest.raises(ParseError, match="more than 64 members"):
        unpack(_tar({f"m{i}": b"" for i in range(65)}))


def test_a_member_whose_data_is_not_in_the_file_is_refused() -> None:
    files = {"nvidia": b"\x7fELF one" * 100}
    data = _tar({"bundle.json": _doc(files).to_json(), "modules/nvidia.ko": files["nvidia"]})
    cut = data.index(b"\x7fELF one") + 10  # the module's header states 800 bytes; the file ends 10 bytes in
    with pytest.raises(ParseError, match=r"modules/nvidia\.ko: states 800 bytes, but the file ends before them"):
        unpack(data[:cut])


@pytest.mark.parametrize("kernel", ["../../../etc", "6.1/../../x", "", "-rf", "a b", "x" * 65, "6.1\n0"])
def test_a_kernel_release_that_is_not_one_is_refused_where_the_bundle_is_parsed(kernel: str) -> None:
    doc = json.loads(_doc({"nvidia": b"x"}).to_json())
    doc["kernel"] = kernel
    with pytest.raises(ParseError, match=r"module bundle: kernel: .*(is not a kernel release|missing)"):
        BundleDoc.from_json(json.dumps(doc).encode())


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "nv\nidia", "x" * 56])
def test_a_module_name_that_is_not_one_is_refused(name: str) -> None:
    doc = json.loads(_doc({"nvidia": b"x"}).to_json())
    doc["modules"] = {name: doc["modules"]["nvidia"]}
    with pytest.raises(ParseError, match="bad module name"):
        BundleDoc.from_json(json.dumps(doc).encode())


def test_a_bundle_names_the_host_it_was_built_on(tmp_path: Path) -> None:
    """docs/fleet.md: `built on HOST`: the host's name, never fwman's description of its Host ("live host /")."""
    from fwman.driver.bundle.export import host_name
    from fwman.host.live import LiveHost

    host = LiveHost(str(tmp_path))
    assert host_name(host) == "an unnamed host"
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hostname").write_text("rig-a\n")
    assert host_name(host) == "rig-a"
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/hostname").write_text("rig-a.lab\n")  # what `hostname` prints wins
    assert host_name(host) == "rig-a.lab"
    (tmp_path / "proc/sys/kernel/hostname").write_text("\n")
    assert host_name(host) == "rig-a"


def test_a_bundle_carries_the_manifests_build_record_and_an_import_records_it_again() -> None:
    from dataclasses import fields

    from fwman.driver.build.manifest import BuildRecord, Manifest, ModuleEntry

    built = Manifest(
        kernel="6.1.0-50-amd64",
        fork="p2p",
        branch="570.86.16-p2p",
        commit="a" * 40,
        modules={"nvidia": ModuleEntry("/lib/modules/6.1.0-50-amd64/updates/fwman/nvidia.ko", "0" * 64, 9)},
        built_at="2026-11-29T08:30:00+00:00",
        source="https://example.invalid/fork.git",
        compiler="gcc (Debian 12.2.0-14) 12.2.0",
        signed="sha256",
    )
    doc = BuildRecord.of(built).onto(_doc({"nvidia": b"\x7fELF"}))
    # the file stays flat (the signature covers these bytes): the record's fields sit beside the bundle's own
    assert sorted(json.loads(doc.to_json())) == sorted(
        ["branch", "built_at", "commit", "compiler", "exported_at", "exported_from", "fork", "kernel", "modules",
         "schema", "signed", "signer", "source", "vermagic"]
    )  # fmt: skip
    assert BundleDoc.from_json(doc.to_json()) == doc
    again = Manifest.from_record(built.kernel, built.modules, BuildRecord.of(doc))
    assert BuildRecord.of(again) == BuildRecord.of(built) and again.modules == built.modules
    # every field of the record is a manifest field (a renamed manifest field fails here, not on a fleet)
    assert {f.name for f in fields(BuildRecord)} <= {f.name for f in fields(Manifest)}
