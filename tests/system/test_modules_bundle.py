"""`fwman modules export` / `fwman modules import`: build once on one root, import on another (real depmod).

The bundle is made from a real build of the stand-in tree for 6.1.0-50-amd64 (root A) and imported into
root B, which has the kernel's module directory but no headers and no source: nothing is compiled there.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from fwman.core.signing import public_pem
from fwman.gpu.kernel_modules import MODULE_NAMES
from tests.support.modules import (
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    add_kernel,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)
from tests.support.tree import tree_digest

pytestmark = pytest.mark.system


@pytest.fixture
def built(tmp_path: Path, object_cache: Path) -> Path:  # noqa: F811
    """Return root A with the stand-in modules built and installed for KERNEL_OK."""
    require_build_env(KERNEL_OK)
    root = build_root(tmp_path / "a", (KERNEL_OK,), object_cache)
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)
    assert code == 0, out + err
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/hostname").write_text("rig-a\n")  # the name an imported manifest cites
    return root


def test_export_then_import_installs_the_same_modules_without_building(built: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "p2p.fwbundle"
    code, out, err = run_fwman(built, "modules", "export", "--kernel", KERNEL_OK, "-o", str(bundle), "--json")
    assert code == 0, out + err
    exported = json.loads(out)
    assert exported["schema"] == "fwman.modules-export/1" and exported["kernel"] == KERNEL_OK
    assert exported["vermagic"].startswith(f"{KERNEL_OK} SMP") and exported["source"] == SOURCE
    assert exported["compiler"] and exported["compiler"].startswith(("cc", "gcc"))
    with tarfile.open(bundle) as tar:
        names = sorted(tar.getnames())
    assert names == sorted(["bundle.json", *(f"modules/{n}.ko" for n in MODULE_NAMES)])

    other = tmp_path / "b"
    add_kernel(other, KERNEL_OK, headers=False)
    before = tree_digest(other)
    code, out, err = run_fwman(other, "modules", "import", str(bundle), "--dry-run", "--json")
    assert code == 0, out + err
    assert json.loads(out)["status"] == "would-import"
    assert tree_digest(other) == before  # a dry run writes nothing

    code, out, err = run_fwman(other, "modules", "import", str(bundle))
    assert code == 0, out + err
    assert f"imported and verified for {KERNEL_OK}" in out
    for name in MODULE_NAMES:
        ours = (other / "lib/modules" / KERNEL_OK / "updates/fwman" / f"{name}.ko").read_bytes()
        assert ours == (built / "lib/modules" / KERNEL_OK / "updates/fwman" / f"{name}.ko").read_bytes()
    manifest = json.loads((other / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["source"].startswith(f"imported from {bundle}")
    assert f"built on rig-a from {SOURCE}" in manifest["source"]  # the host's name, as docs/fleet.md says
    assert manifest["commit"] == exported["commit"] and manifest["compiler"] == exported["compiler"]
    assert not (other / "var/cache/fwman/build").exists()  # nothing was compiled here
    code, out, _ = run_fwman(other, "modules", "status", "--json")
    row = json.loads(out)["kernels"][0]
    assert row["kernel"] == KERNEL_OK and row["safe_to_boot"] is True, row

    # the same bundle again: nothing changes
    settled = tree_digest(other)
    code, out, err = run_fwman(other, "modules", "import", str(bundle), "--json")
    assert code == 0 and json.loads(out)["status"] == "current", out + err
    assert tree_digest(other) == settled


def test_import_refuses_altered_bundles_other_kernels_and_untrusted_signatures(built: Path, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "fleet.pem"
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    bundle = tmp_path / "signed.fwbundle"
    argv = ("modules", "export", "--kernel", KERNEL_OK, "-o", str(bundle), "--key", str(pem))
    code, out, err = run_fwman(built, *argv)
    assert code == 0, out + err

    other = tmp_path / "b"
    add_kernel(other, KERNEL_OK, headers=False)
    keys = other / "etc/fwman/bundle-keys.d"
    keys.mkdir(parents=True)
    (keys / "someone-else.pub").write_bytes(public_pem(Ed25519PrivateKey.generate()))
    code, _, err = run_fwman(other, "modules", "import", str(bundle))
    assert code == 4 and "which this host does not trust" in err
    (keys / "fleet.pub").write_bytes(public_pem(key))

    # one byte of nvidia.ko changed: the hash in bundle.json no longer matches
    members = {}
    with tarfile.open(bundle) as tar:
        for info in tar:
            handle = tar.extractfile(info)
            assert handle is not None
            members[info.name] = handle.read()
    ko = bytearray(members["modules/nvidia.ko"])
    ko[-100] ^= 0xFF
    members["modules/nvidia.ko"] = bytes(ko)
    altered = tmp_path / "altered.fwbundle"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    altered.write_bytes(buf.getvalue())
    code, _, err = run_fwman(other, "modules", "import", str(altered))
    assert code == 4 and "nvidia.ko does not match the SHA-256" in err
    assert not (other / "lib/modules" / KERNEL_OK / "updates").exists()

    # a kernel this root does not have
    third = tmp_path / "c"
    add_kernel(third, KERNEL_BAD, headers=False)
    code, _, err = run_fwman(third, "modules", "import", str(bundle))
    assert code == 5 and f"for kernel {KERNEL_OK}, which is not installed here" in err

    # Secure Boot on (the EFI variable: 4 attribute bytes, then 1) and no signing key: unsigned modules refused
    secure = tmp_path / "d"
    add_kernel(secure, KERNEL_OK, headers=False)
    efivar = secure / "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    efivar.parent.mkdir(parents=True)
    efivar.write_bytes(b"\x06\x00\x00\x00\x01")
    code, _, err = run_fwman(secure, "modules", "import", str(bundle))
    assert code == 3 and "Secure Boot is on and the bundle's modules are unsigned" in err
    assert not (secure / "lib/modules" / KERNEL_OK / "updates").exists()

    code, out, err = run_fwman(other, "modules", "import", str(bundle), "--json")
    assert code == 0, out + err
    assert json.loads(out)["signature"].startswith("signed by trusted key")
