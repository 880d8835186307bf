"""The role fwman.p2p.p2p_host on three local hosts with their own temp roots (real builds, real depmod).

* ``builder``: 6.1.0-50-amd64 with headers and the stand-in fork tree: builds (kernel-open only, the object
  cache is seeded), exports a bundle, the controller fetches it;
* ``importer``: the same kernel without headers or source, in the builder's group: imports the bundle;
* ``broken``: 6.1.0-53-amd64, whose pci_resize_resource() takes a fourth argument: its own build fails in
  kernel-open/nvidia/nv-pci.c. The host fails with fwman's first error; the other two carry on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ansible import local_host, require_ansible, run_playbook
from tests.support.modules import (
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    add_kernel,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
)
from tests.support.tree import tree_digest

pytestmark = pytest.mark.system

PLAY = """
- hosts: gpu
  gather_facts: false
  roles:
    - role: fwman.p2p.p2p_host
"""


def test_check_mode_changes_nothing_a_failed_build_fails_only_its_host_and_a_second_run_changes_nothing(
    tmp_path: Path,
    object_cache: Path,  # noqa: F811
) -> None:
    require_ansible()
    require_build_env(KERNEL_OK, KERNEL_BAD)
    roots = {
        "builder": build_root(tmp_path / "builder", (KERNEL_OK,), object_cache),
        "broken": build_root(tmp_path / "broken", (KERNEL_BAD,), object_cache),
        "importer": tmp_path / "importer/root",
    }
    add_kernel(roots["importer"], KERNEL_OK, headers=False)
    remote = {name: tmp_path / f"{name}-tmp" for name in roots}
    for d in remote.values():
        d.mkdir()
    common = {
        "p2p_host_source": SOURCE,
        "p2p_host_reboot": False,
        "p2p_host_verify_p2p": False,
        "p2p_host_bundle_controller_dir": str(tmp_path / "controller"),
    }
    hosts = {
        "builder": local_host(
            p2p_host_root=str(roots["builder"]), p2p_host_kernels=[KERNEL_OK], p2p_host_build_once=True,
            p2p_host_bundle_remote_dir=str(remote["builder"]), **common,
        ),
        "importer": local_host(
            p2p_host_root=str(roots["importer"]), p2p_host_kernels=[KERNEL_OK], p2p_host_build_once=True,
            p2p_host_bundle_remote_dir=str(remote["importer"]), **common,
        ),
        "broken": local_host(p2p_host_root=str(roots["broken"]), p2p_host_kernels=[KERNEL_BAD], **common),
    }  # fmt: skip

    before = {name: tree_digest(root) for name, root in roots.items()}
    check = run_playbook(tmp_path, hosts, PLAY, "--check", "--diff")
    assert check.rc == 0, check.output
    assert {name: tree_digest(root) for name, root in roots.items()} == before  # check mode wrote nothing
    assert all(check.recap[h]["changed"] > 0 and check.recap[h]["failed"] == 0 for h in hosts), check.recap
    assert "would_build" in check.output or "would build" in check.output

    first = run_playbook(tmp_path, hosts, PLAY)
    assert first.recap["broken"]["failed"] == 1, first.output
    assert f"patched modules did not build for {KERNEL_BAD}: kernel-open/nvidia/nv-pci.c:" in first.output
    assert f"build log: /var/log/fwman/build-{KERNEL_BAD}.log" in first.output
    for name in ("builder", "importer"):
        assert first.recap[name]["failed"] == 0 and first.recap[name]["changed"] > 0, first.output
    builder_ko = roots["builder"] / "lib/modules" / KERNEL_OK / "updates/fwman/nvidia.ko"
    importer_ko = roots["importer"] / "lib/modules" / KERNEL_OK / "updates/fwman/nvidia.ko"
    assert importer_ko.read_bytes() == builder_ko.read_bytes()
    manifest = json.loads((roots["importer"] / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["source"].startswith(f"imported from {remote['importer']}/fwman-{KERNEL_OK}-")
    assert not (roots["importer"] / "var/cache/fwman/build").exists()  # the importer compiled nothing
    assert (roots["importer"] / "etc/nccl.conf").read_text() == "NCCL_P2P_LEVEL=SYS\n"
    assert (roots["builder"] / "etc/kernel/postinst.d/fwman").exists()
    assert (roots["importer"] / "etc/apt/preferences.d/fwman-nvidia-dkms").exists()
    assert (roots["importer"] / "etc/systemd/system/timers.target.wants/fwman-metrics.timer").is_symlink()
    assert "the patched modules changed: reboot this host" in first.output  # the handler ran (no real reboot)
    assert not (roots["broken"] / "lib/modules" / KERNEL_BAD / "updates/fwman").exists()

    settled = {name: tree_digest(roots[name]) for name in ("builder", "importer")}
    second = run_playbook(tmp_path, hosts, PLAY, "--limit", "builder,importer")
    assert second.rc == 0, second.output
    changed = [line for line in second.output.splitlines() if line.startswith(("TASK", "changed"))]
    assert second.recap["builder"]["changed"] == 0 and second.recap["importer"]["changed"] == 0, changed
    assert "reboot this host" not in second.output
    assert {name: tree_digest(roots[name]) for name in ("builder", "importer")} == settled
