"""Story 3, the test of record: `fwman audit` on a real Debian 12 root and a container root beside it.

A root from the owner layer with fwman's .deb installed by apt builds the patched modules of the story's fork
(570.86.16) for its kernel; the host user space of that version is laid out as NVIDIA's installer leaves it
(versioned library names, the GSP firmware directory). A container root (an unpacked rootfs, as `--container-root`
takes it) holds the same user space, then another version: the audit matches, then names the mismatch and the
fix, with exit 0 and 4. `nvidia-smi` is the stand-in of tests/support/smi.py (no GPU here).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.debroot import DebRoot, Kernels, install_deb
from tests.support.forkrepo import BRANCH, VERSION, GitDaemon
from tests.support.smi import fake_nvidia_smi

CONTAINER = "/srv/containers/trainer"
OTHER = "565.77"  # another release the fork has a branch for (fixtures/forge/branches.json)
LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so")


def _user_space(root: DebRoot, prefix: str, version: str) -> None:
    """Lay out NVIDIA's user-space libraries of ``version`` under ``prefix`` as the .run installer names them."""
    libdir = f"{prefix}/usr/lib/x86_64-linux-gnu"
    cmds = [f"rm -f {libdir}/libcuda.so* {libdir}/libnvidia-*", f"mkdir -p {libdir}"]
    for lib in LIBS:
        cmds += [f"printf '\\177ELF' > {libdir}/{lib}.{version}", f"ln -sf {lib}.{version} {libdir}/{lib}.1"]
    root.sh(" && ".join(cmds))


@pytest.fixture(scope="module")
def machine(
    tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path, fork: GitDaemon
) -> Iterator[tuple[DebRoot, Kernels]]:
    """Return a root with fwman installed, the fork's modules built for its kernel, the host user space."""
    root = DebRoot.create(tmp_path_factory.mktemp("story3"), layer[0])
    try:
        install_deb(root, deb)
        kver = layer[1].first
        proc = root.sh(f"fwman modules build --kernel {kver} --fork {shlex.quote(fork.url())} --branch {BRANCH} 2>&1",
                       check=False)  # fmt: skip
        assert proc.returncode == 0, f"`fwman modules build` exit {proc.returncode}:\n{proc.stdout[-4000:]}"
        _user_space(root, "", VERSION)
        # nvidia-smi: the stand-in prints the example host's recorded `nvidia-smi --version` (570.86.16)
        smi = tmp_path_factory.mktemp("smi") / "bin"
        fake_nvidia_smi(smi)
        for name in ("nvidia-smi", "outputs.json"):
            root.put(smi / name, f"/usr/local/bin/{name}")
        root.sh(f"mkdir -p /lib/firmware/nvidia/{VERSION} && printf x > /lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin")
        yield root, layer[1]
    finally:
        root.close()


def _audit(root: DebRoot) -> tuple[int, dict[str, Any], str]:
    proc = root.sh(f"fwman audit --offline --json --container-root {CONTAINER}", check=False)
    text = root.sh(f"fwman audit --offline --container-root {CONTAINER} 2>&1", check=False).stdout
    assert proc.stdout.strip(), f"`fwman audit --json` printed nothing: {proc.stderr}"
    doc: dict[str, Any] = json.loads(proc.stdout)
    return proc.returncode, doc, text


def _container_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = doc["rows"]
    assert isinstance(rows, list)
    return [r for r in rows if CONTAINER in json.dumps(r)]


def test_audit_matches_with_a_container_on_the_same_version(machine: tuple[DebRoot, Kernels]) -> None:
    root, kernels = machine
    _user_space(root, CONTAINER, VERSION)
    code, doc, text = _audit(root)
    rows = _container_rows(doc)
    assert rows, f"the audit has no row for {CONTAINER}:\n{text}"
    assert {r["status"] for r in rows} == {"match"}, text
    module = [r for r in doc["rows"] if "nvidia.ko" in json.dumps(r) and kernels.first in json.dumps(r)]
    assert module and all(r["status"] == "match" for r in module), f"the built module's row:\n{text}"
    assert doc["reference"] == VERSION, text
    in_tree = [r for r in doc["rows"] if "/kernel/drivers/" in json.dumps(r) and r["status"] != "match"]
    assert in_tree == [], (
        "the audit counts modules of the Debian kernel itself (not NVIDIA's driver) as NVIDIA driver modules:\n"
        + "\n".join(json.dumps(r) for r in in_tree)
    )
    assert code == 0, f"`fwman audit` exit {code} with every version at {VERSION}:\n{text}"


def test_audit_names_the_container_mismatch_and_its_fix(machine: tuple[DebRoot, Kernels]) -> None:
    root, _ = machine
    _user_space(root, CONTAINER, OTHER)
    code, doc, text = _audit(root)
    rows = _container_rows(doc)
    assert rows and {r["status"] for r in rows} == {"mismatch"}, text
    assert code == 4, f"`fwman audit` exit {code} with the container on {OTHER}:\n{text}"
    assert f"NVIDIA-Linux-x86_64-{VERSION}.run --no-kernel-modules" in text and CONTAINER in text, text
