"""The dry run is the plan: for every changing command, in a state where it has work to do, the steps
``--dry-run --json`` lists are exactly the steps the real run then reports as done, and a second run does nothing.

The state is a prepared root (the example 4x3090 host's files, with stand-ins for the tools each subject runs,
named as the root's own machine): hooks, DKMS (a stand-in dkms with an NVIDIA module registered), the metrics
timer, driver power (a stand-in nvidia-smi whose persistence mode and power limits are set by ``-pm``/``-pl`` and
read back by ``-q -x``; persistence mode starts off), the user-space hold (one NVIDIA package in the root's own
dpkg database, read by the real dpkg-query), a kernel the pre-flight held back (its apt pin and record). A
command is walked through its changing form and later its inverse, so each starts from a state the one before
left. driver settings recommends nothing for 3090s: it is
walked on a constructed 2x RTX 5090 root with the loaded module's options not in effect and a stand-in
update-initramfs (:func:`test_driver_settings_dry_run_is_what_its_run_does`).

``modules forget``, ``modules remove`` and ``modules keygen`` are walked on a root with fwman's modules
installed for three kernels, one of them removed and avoided by a boot pin
(:func:`test_the_modules_commands_that_remove_list_in_their_dry_runs_what_their_runs_do`).

The comparison is shown to catch a drift: :func:`test_the_walk_catches_a_dry_run_that_omits_a_step` runs the
check over dkms unblock as it was (its dry run listed "remove the block record" that the run did not report).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from fwman.driver import kernel_hold
from fwman.driver.build.toolchain import BUILD_TOOLS
from fwman.driver.kernel_hold import HeldKernel, HoldRecord
from fwman.driver.move.keep import KeepFiles, kept_paths
from fwman.driver.move.record import COMMITTED, MoveRecord, WriteRecord
from fwman.host.actions import apply_all
from fwman.host.live import LiveHost
from tests.support.env import EXAMPLE_HOST, FwmanEnv, Result
from tests.support.settings_rig import KVER, initramfs_generator, settings_host, write_params
from tests.support.smi import settable_nvidia_smi
from tests.support.tools import needs_tool, tools_path

BUILD = tuple(t.command for t in BUILD_TOOLS)
needs_depmod = needs_tool("depmod", "kmod")

#: each walk: (command, its arguments for a change); run in this order on one root
WALK: list[tuple[str, ...]] = [
    ("hooks", "install"),
    ("metrics", "install"),
    ("dkms", "block"),
    ("dkms", "unblock"),
    ("driver", "power", "--apply", "--limit", "280", "--persistence"),
    ("driver", "power", "--apply", "--off"),
    ("metrics", "remove"),
    ("hooks", "remove"),
    ("driver", "move", "--rollback"),
    ("userspace", "hold"),
    ("userspace", "release"),
    ("modules", "preflight", "--release"),  # the kernel hold the pre-flight placed: pin file and record go
    ("apply",),  # the front door: hooks and the DKMS block again, as their parts of the plan
]


def _steps(doc: dict[str, Any], dry: bool) -> list[str]:
    """Return the steps a command's document lists: ``actions`` (the change commands) or ``would``/``applied``
    (the status commands with ``--apply``, and ``fwman apply``), or a plan's parts' ``steps``."""
    if "actions" in doc:
        return list(doc["actions"])
    if "parts" in doc and dry:  # fwman plan / apply --dry-run: each part's steps, in order
        return [step for part in doc["parts"] for step in part["steps"]]
    return list(doc["would"] if dry else doc["applied"])


def check(dry: dict[str, Any], run: dict[str, Any], again: dict[str, Any]) -> list[str]:
    """Return what is wrong with one command's three documents (empty: the dry run was the plan)."""
    problems = []
    if _steps(dry, True) != _steps(run, False):
        problems.append(f"dry run {_steps(dry, True)} != run {_steps(run, False)}")
    if not _steps(run, False):
        problems.append("the run had nothing to do: the state did not exercise it")
    if again.get("changed") or _steps(again, False):
        problems.append(f"a second run changed something: {_steps(again, False)}")
    return problems


def _tool(bindir: Path, name: str, script: str) -> None:
    (bindir / name).write_text("#!/bin/sh\n" + script)
    (bindir / name).chmod(0o755)


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[FwmanEnv, Path]:
    """Return fwman (with the stand-ins named as the root's machine) and the prepared root."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    registered = tmp_path / "registered"
    registered.write_text("nvidia/570.86.16: added\n")
    _tool(
        bindir,
        "dkms",
        f"""case "$1" in
  status) cat {registered} ;;
  remove) grep -v "^$2:" {registered} > {registered}.new; mv {registered}.new {registered} ;;
  add) echo "$2: added" >> {registered} ;;
esac
""",
    )
    (root / "usr/src/nvidia-570.86.16").mkdir(parents=True)
    (root / "usr/src/nvidia-570.86.16/dkms.conf").write_text('PACKAGE_NAME="nvidia"\n')
    settable_nvidia_smi(tmp_path / "smi")
    # a committed driver move (its --to needs a fork and builds: tests/story/test_driver_move.py compares its dry
    # run with its run): the set kept before it, then what the commit wrote over it
    host = LiveHost(str(root))
    record = MoveRecord("565.77", "570.86.16", COMMITTED, [])
    apply_all(host, [KeepFiles(kept_paths(host, [])), WriteRecord(record)])
    # one NVIDIA user-space package in the root's own dpkg database (real dpkg-query reads it: --admindir)
    dpkg = root / "var/lib/dpkg"
    (dpkg / "info").mkdir(parents=True, exist_ok=True)
    (dpkg / "status").write_text(
        "Package: libnvidia-ml1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 570.86.16-1\n"
        "Maintainer: fwman tests <tests@fwman.invalid>\nDescription: stand-in\n\n"
    )
    # a kernel the pre-flight held back (its build failed): the apt pin and the record
    held = HeldKernel("6.8.12-5-pve", {"proxmox-kernel-6.8.12-5-pve-signed": "6.8.12-5"}, "build failed", "now")
    apply_all(host, kernel_hold.hold_actions(HoldRecord({"6.8.12-5-pve": held})))
    (root / "var/lib/fwman/modules").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/fwman/modules/source.json").write_text('{"fork": "aikitoria", "branch": "570.86.16-p2p"}\n')
    return FwmanEnv(path_prepend=[bindir, tmp_path / "smi"]), root


def _docs(env: FwmanEnv, root: Path, argv: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    def doc(r: Result) -> dict[str, Any]:
        assert r.code == 0, (argv, r.stdout, r.stderr)
        parsed: dict[str, Any] = json.loads(r.stdout)
        return parsed

    where = ("--json", "--root", str(root))
    return (doc(env(*argv, "--dry-run", *where)), doc(env(*argv, *where)), doc(env(*argv, *where)))


def test_every_changing_command_s_dry_run_is_what_its_run_does(prepared: tuple[FwmanEnv, Path]) -> None:
    env, root = prepared
    problems = {}
    for argv in WALK:
        found = check(*_docs(env, root, argv))
        if found:
            problems[" ".join(argv)] = found
    assert problems == {}


def test_driver_settings_dry_run_is_what_its_run_does(tmp_path: Path) -> None:
    root = settings_host(tmp_path, "2x5090")
    write_params(root, RMForceStaticBar1="0", PeerMappingOverride="0")
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/initrd.img-{KVER}").write_bytes(b"")  # an image without fwman's file: regenerated
    env = FwmanEnv(path_prepend=[initramfs_generator(tmp_path, root)])
    dry, run, again = _docs(env, root, ("driver", "settings", "--apply"))
    assert check(dry, run, again) == []
    assert any("update-initramfs -u -k" in step for step in _steps(run, False))  # the initramfs is in the plan


def test_the_walk_catches_a_dry_run_that_omits_a_step() -> None:
    """dkms unblock before it was one plan: the dry run listed the record's removal, the run did not report it."""
    dry = {
        "dry_run": True,
        "changed": False,
        "actions": [
            "remove /etc/apt/preferences.d/fwman-nvidia-dkms",
            "remove the block record /var/lib/fwman/dkms-block.json",
        ],
    }
    run = {"dry_run": False, "changed": True, "actions": ["remove /etc/apt/preferences.d/fwman-nvidia-dkms"]}
    again = {"dry_run": False, "changed": False, "actions": []}
    assert check(dry, run, again) and "!= run" in check(dry, run, again)[0]
    assert check(run | {"dry_run": True}, run, again) == []
    assert "nothing to do" in check(again, again, again)[0]


@needs_depmod
def test_the_kernel_hook_s_dry_run_lists_the_repair_and_the_rebuild_its_run_does(
    prepared: tuple[FwmanEnv, Path], tmp_path: Path
) -> None:
    """Issue 34, row 2: ``modules hook --dry-run`` planned only the kernel it names, while the run also put back
    the modules DKMS replaced for every kernel with a manifest and rebuilt those whose stored copy is gone."""
    from fwman.driver.build.manifest import store_dir
    from tests.support.boot import install_safe_modules

    _, root = prepared
    host = LiveHost(str(root))
    named, repaired, broken = "6.8.12-4-pve", "6.8.12-2-pve", "6.8.12-3-pve"  # named: no headers, no manifest
    for kver in (repaired, broken):
        install_safe_modules(host, root, kver)
        (root / f"lib/modules/{kver}/updates/fwman/nvidia.ko").write_bytes(b"DKMS's nvidia.ko")  # replaced
    (root / store_dir(broken).lstrip("/") / "nvidia.ko").unlink()  # and fwman's stored copy of one is gone
    (root / "usr/src/h/include").mkdir(parents=True)
    (root / f"lib/modules/{broken}/build").symlink_to("/usr/src/h")  # its headers: it is rebuilt
    (root / "var/lib/fwman/modules/source.json").write_text('{"source": "/src/none"}\n')  # a build cannot succeed
    env = FwmanEnv(path_prepend=[tools_path(tmp_path / "build-tools", BUILD)])
    dry, run, again = _docs(env, root, ("modules", "hook", "--kernel", named, "--origin", "postinst"))
    assert _steps(dry, True) == [
        f"reinstall fwman's stored modules for {repaired} (DKMS or a package replaced them)",
        f"mark {named} pending until its headers are installed",
        f"build the patched modules for {broken} from local tree /src/none",
        f"refresh the initramfs of {broken} where it carries other NVIDIA modules",
        "check that the next boot has working patched modules",
    ]
    assert _steps(run, False) == _steps(dry, True)
    assert run["repaired"] == [repaired] and run["changed"] is True
    assert {k["kernel"]: k["status"] for k in run["kernels"]} == {named: "pending", broken: "pending"}
    # the repair held; the kernel without a stored copy is rebuilt again (its source cannot be had)
    assert _steps(again, False) == [s for s in _steps(dry, True) if repaired not in s]


def test_the_kernel_lifecycle_plan_is_what_the_dry_runs_of_its_commands_print() -> None:
    """The hook, the catch-up, ``modules build`` and bundle import plan through one function, and the dry runs
    print that plan's descriptions: no second planner is left to drift."""
    import inspect

    from fwman.app.modules import build as modules_build
    from fwman.app.modules import hooks as modules_hooks
    from fwman.driver.bundle import install
    from fwman.driver.hooks import run

    for module in (run, modules_hooks, modules_build, install):
        source = inspect.getsource(module)
        assert "lifecycle" in source, module.__name__
        assert "def build_plan" not in source and "def planned_build" not in source, module.__name__


@needs_depmod
def test_the_catchup_s_dry_run_is_its_run_and_a_second_run_takes_the_fast_path(tmp_path: Path) -> None:
    """A kernel whose modules DKMS replaced: the catch-up puts them back, checks the boot and writes the boot fast
    path's stamp, as its dry run said; then every kernel is current and the next catch-up does nothing."""
    from tests.support.boot import install_safe_modules

    root, kver = tmp_path / "root", "6.1.0-50-amd64"
    install_safe_modules(LiveHost(str(root)), root, kver)
    (root / f"lib/modules/{kver}/updates/fwman/nvidia.ko").write_bytes(b"DKMS's nvidia.ko")
    dry, run, again = _docs(FwmanEnv(), root, ("modules", "catchup"))
    assert check(dry, run, again) == []
    assert _steps(run, False) == [
        f"reinstall fwman's stored modules for {kver} (DKMS or a package replaced them)",
        "check that the next boot has working patched modules",
        f"update the boot fast path's record of the kernels and fwman's module files ({paths.MODULES_STAMP})",
    ]


@needs_depmod
def test_the_modules_commands_that_remove_list_in_their_dry_runs_what_their_runs_do(tmp_path: Path) -> None:
    """``modules forget`` (a removed kernel's files, the boot fast path's stamp, the boot pin that avoided it),
    ``modules remove`` (one kernel, then all) and ``modules keygen``: each dry run lists what its run reports
    as done, and a second run does nothing (keygen's refuses instead: a key is configured)."""
    import shutil

    from fwman.driver.boot import pin as boot
    from tests.support.modules import install_tiny_modules

    root = tmp_path / "root"
    gone, kept, other = "6.1.0-49-amd64", "6.1.0-50-amd64", "6.1.0-53-amd64"
    loader = root / "boot/efi/loader"
    (loader / "entries").mkdir(parents=True)
    for kver in (gone, kept, other):
        install_tiny_modules(root, kver)
        (loader / "entries" / f"abc-{kver}.conf").write_text(f"title Debian\nversion {kver}\nlinux /abc/{kver}/l\n")
    (loader / "loader.conf").write_text("timeout 3\ndefault abc-*\n")
    boot.pin(LiveHost(str(root)), kept, gone, "test")
    shutil.rmtree(root / f"lib/modules/{gone}/kernel")  # the kernel package went; fwman's files are left
    (root / f"boot/efi/loader/entries/abc-{gone}.conf").unlink()
    (root / paths.MODULES_STAMP.lstrip("/")).write_text("{}\n")
    env = FwmanEnv()
    problems = {}
    for argv in (("modules", "forget", "--kernel", gone), ("modules", "remove", "--kernel", kept),
                 ("modules", "remove", "--all")):  # fmt: skip
        dry, run, again = _docs(env, root, argv)
        if found := check(dry, run, again):
            problems[" ".join(argv)] = found
        if argv[1] == "forget":
            assert f"release the boot pin to {kept} and pin another safe kernel" in _steps(run, False)
            assert any(s.startswith(f"drop {paths.MODULES_STAMP}") for s in _steps(run, False))
    assert problems == {}
    where = ("--json", "--root", str(root))
    dry = env("modules", "keygen", "--dry-run", *where).json()
    run = env("modules", "keygen", *where).json()
    assert _steps(dry, True) == _steps(run, False) != []
    again = env("modules", "keygen", *where)
    assert again.code == 2 and "already configured" in again.stderr
