"""Rows 5, 6 and 7: a module bundle is held to the CLI's rules. Only the NVIDIA modules fwman builds may be in
it (``modules/ext4.ko`` would have depmod resolve ``ext4`` to fwman's copy); every text field passes the check
the CLI gives the same field (a fork, a branch, a commit; one line without control characters for the rest);
an older bundle replayed over newer modules is refused (docs/fleet.md); the Ansible ``module_bundle`` module
tells a bundle on disk from the one asked for by its signature too."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.tinymod.elfgen import build_elf, modinfo_blob, nvidia_tags
from fwman.core.errors import BlockedError, ParseError
from fwman.driver.build.manifest import Manifest, ModuleEntry, manifest_path
from fwman.driver.bundle.format import BundleDoc, BundleModule, pack, unpack
from fwman.driver.bundle.install import plan_import
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.live import LiveHost
from tests.support.counting import CountingEnv, tried
from tests.support.env import REPO

KVER = "6.1.0-50-amd64"
GOOD = {
    "fork": "p2p",
    "branch": "570.86.16-p2p",
    "commit": "a" * 40,
    "source": "https://github.com/example/open-gpu-kernel-modules",
    "compiler": "gcc (Debian 12.2.0-14) 12.2.0",
    "signer": "fwman module signing",
    "built_at": "2026-11-29T08:30:00+00:00",
    "exported_at": "2026-11-29T09:00:00+00:00",
    "exported_from": "live host",
}
#: values the CLI refuses for the same field, or that a terminal would obey
HOSTILE = ["\x1b]0;pwned\x07", "ok\x1b[2K", "two\nlines", "tab\there", "\x9b2J", "del\x7f"]
REFUSED_BY_FIELD = {
    "fork": ["--upload-pack=touch /tmp/x", "ext::sh -c x", "a b"],
    "branch": ["../x", "-rf", "a..b", "x.lock"],
    "commit": ["HEAD", "zz" * 20, "a" * 65, "tree:"],
}


def modules(version: str = "570.86.16") -> dict[str, bytes]:
    return {n: build_elf(modinfo_blob(nvidia_tags(version, KVER, name=n))) for n in MODULE_NAMES}


def doc_for(files: dict[str, bytes], **fields: str) -> BundleDoc:
    return BundleDoc(
        kernel=KVER,
        vermagic=f"{KVER} SMP preempt mod_unload modversions",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
        **{**GOOD, **fields},  # type: ignore[arg-type]
    )


def with_field(key: str, value: str) -> bytes:
    files = {"nvidia": b"\x7fELF"}
    doc = json.loads(doc_for(files).to_json())
    doc[key] = value
    return pack((json.dumps(doc) + "\n").encode(), files)


@pytest.mark.parametrize("name", ["ext4", "nvidia_uvm", "i915", "nvidiafb", "kvm"])
def test_only_the_modules_fwman_builds_may_be_in_a_bundle(name: str) -> None:
    tried()
    files = {**modules(), name: b"\x7fELF other"}
    data = pack(doc_for(files).to_json(), files)
    with pytest.raises(ParseError, match=f"'{name}' is not one of the NVIDIA modules fwman builds"):
        unpack(data)


def test_an_ext4_bundle_is_refused_by_modules_import_and_nothing_is_written(
    attack: CountingEnv, tmp_path: Path
) -> None:
    files = {**modules(), "ext4": b"\x7fELF other"}
    bundle = tmp_path / "evil.fwbundle"
    bundle.write_bytes(pack(doc_for(files).to_json(), files))
    root = tmp_path / "root"
    (root / f"lib/modules/{KVER}").mkdir(parents=True)
    r = attack("--root", str(root), "modules", "import", str(bundle))
    assert r.code == 4, r.stdout + r.stderr
    assert "'ext4' is not one of the NVIDIA modules fwman builds" in r.stderr
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "lib",
        "lib/modules",
        f"lib/modules/{KVER}",
    ]


@pytest.mark.parametrize("key", sorted(GOOD))
@pytest.mark.parametrize("value", HOSTILE)
def test_a_text_field_with_control_characters_is_refused(key: str, value: str) -> None:
    tried()
    with pytest.raises(ParseError, match=f"module bundle: {key}: "):
        unpack(with_field(key, value))


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in REFUSED_BY_FIELD.items() for v in vs])
def test_a_field_the_cli_would_refuse_is_refused(key: str, value: str) -> None:
    tried()
    with pytest.raises(ParseError, match=f"module bundle: {key}: "):
        unpack(with_field(key, value))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(GOOD)), value=st.text(max_size=80))
def test_any_field_value_is_accepted_only_when_safe_to_print(key: str, value: str) -> None:
    tried()
    from fwman.core.termtext import has_unsafe

    try:
        bundle = unpack(with_field(key, value))
    except ParseError:
        return
    shown = getattr(bundle.doc, key) or ""
    assert not has_unsafe(shown) and "\n" not in shown and "\t" not in shown


def _host_with_modules(tmp_path: Path, built_at: str) -> LiveHost:
    """Return a root where fwman's modules for KVER (other bytes than the bundle's) were built at ``built_at``."""
    root = tmp_path / "root"
    (root / f"lib/modules/{KVER}/updates/fwman").mkdir(parents=True)
    host = LiveHost(str(root))
    entries = {}
    for name, data in modules("570.86.15").items():
        path = f"/lib/modules/{KVER}/updates/fwman/{name}.ko"
        host.write_bytes(path, data)
        entries[name] = ModuleEntry(path, hashlib.sha256(data).hexdigest(), len(data))
    manifest = Manifest(kernel=KVER, fork="p2p", branch="b", commit="b" * 40, modules=entries, built_at=built_at)
    host.write_bytes(manifest_path(KVER), manifest.to_json())
    return host


def _accept(bundle: object) -> str:
    return "signature not checked"


def test_an_older_bundle_replayed_over_newer_modules_is_refused(tmp_path: Path) -> None:
    tried(2)
    host = _host_with_modules(tmp_path, "2026-11-30T10:00:00+00:00")
    files = modules()
    old = unpack(pack(doc_for(files, built_at="2026-11-29T08:30:00+00:00").to_json(), files))
    with pytest.raises(BlockedError, match=r"built at 2026-11-29T08:30:00\+00:00, before the modules in place"):
        plan_import(host, old, "old.fwbundle", _accept)
    new = unpack(pack(doc_for(files, built_at="2026-12-01T08:30:00+00:00").to_json(), files))
    outcome = plan_import(host, new, "new.fwbundle", _accept)
    assert outcome.status == "would-import"
    assert any("newer than the modules in place" in c for c in outcome.checks)


def _ansible_module() -> object:
    pytest.importorskip("ansible")
    path = REPO / "collections/ansible_collections/fwman/p2p/plugins/modules/module_bundle.py"
    import sys

    sys.path.insert(0, str(REPO / "collections"))
    spec = importlib.util.spec_from_file_location("fwman_module_bundle", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ansible_module_sees_a_signature_added_or_changed(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from fwman.app.modules.bundle import bundle_json
    from fwman.core.signing import load_private_key, sign_document

    ansible = _ansible_module()
    files = modules()
    doc_bytes = doc_for(files).to_json()
    paths = {}
    for label in ("unsigned", "key-a", "key-b"):
        sig = None
        if label != "unsigned":
            pem = Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            sig = sign_document(doc_bytes, load_private_key(pem, label))
        paths[label] = tmp_path / f"{label}.fwbundle"
        paths[label].write_bytes(pack(doc_bytes, files, sig))
    tried(3)
    ids = {label: ansible.identity_of_file(str(p)) for label, p in paths.items()}  # type: ignore[attr-defined]
    assert ids["unsigned"] != ids["key-a"] != ids["key-b"] != ids["unsigned"]  # row 7: was equal: changed=false
    for label, p in paths.items():  # what export --json says of a bundle is what the module reads back from it
        fresh = bundle_json(unpack(p.read_bytes()))
        assert {**{k: fresh.get(k) for k in ansible.IDENTITY}, "signature_key": fresh["signature_key"]} == ids[label]  # type: ignore[attr-defined]
