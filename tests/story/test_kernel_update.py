"""Story 2, the test of record: a kernel update triggers the patched rebuild, on a real Debian 12 root.

One root for the whole story (the owner layer: bookworm, GRUB, the first kernel), fwman's .deb installed with
apt, the fork served by git daemon and configured by *name* in ``[forks]``. The steps run in file order and
share the root; each asserts what an owner would check (files, ``modules status --json``, grubenv, exit
codes). The rows of issue 23 each have a step that says which row it is.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.debroot import DebRoot, Kernels, install_deb, installed_packages, kernel_packages
from tests.support.forkrepo import BRANCH, GitDaemon
from tests.support.kernels import resize_arguments

FORK_NAME = "story"
MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")
STATE = "/var/lib/fwman"
#: the build's phases in the fork's order (what a hook run without a terminal says: docs/hooks.md)
PHASES = ("kernel-independent objects", "conftest", "kernel-open", "linking")


def _phase_lines(log: str, kver: str) -> list[str]:
    """Return the build's progress lines for ``kver`` in an apt log (the hook's stderr reaches apt's output)."""
    return [ln.strip() for ln in log.splitlines() if ln.strip().startswith(f"{kver}: ")]


def _assert_phases_once_in_order(log: str, kver: str, row: str) -> list[str]:
    """Row 7: without a terminal each phase is said once when it starts, in the fork's order; return the lines."""
    lines = _phase_lines(log, kver)
    started = [ln.removeprefix(f"{kver}: ").split(" started,")[0] for ln in lines if " started, " in ln]
    assert started and len(started) == len(set(started)), f"{row}: a phase started twice (flapping): {lines}"
    assert started == sorted(started, key=PHASES.index), f"{row}: phases out of order: {lines}"
    assert not any("expected" in ln for ln in lines), f"{row}: a line promises an expected count: {lines}"
    return lines


@dataclass
class Owner:
    """The story's machine and what the story recorded on the way."""

    root: DebRoot
    kernels: Kernels
    fork: GitDaemon
    deb: Path
    grubenv_before: str
    packages_before: set[str]
    packages_after: set[str]
    install_log: str
    notes: dict[str, str] = field(default_factory=dict)

    def fwman(self, *argv: str, timeout: float = 1800) -> tuple[int, str]:
        """Run the installed fwman in the root; return (exit status, stdout + stderr)."""
        proc = self.root.sh(shlex.join(["fwman", *argv]) + " 2>&1", check=False, timeout=timeout)
        return proc.returncode, proc.stdout

    def apt(self, *argv: str) -> str:
        """Run ``apt-get -y -q ARGV`` in the root (it must succeed: fwman never fails a kernel install)."""
        proc = self.root.sh(shlex.join(["apt-get", "-y", "-q", *argv]) + " 2>&1", check=False, timeout=1800)
        assert proc.returncode == 0, (
            f"`apt-get {' '.join(argv)}` failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}"
        )
        return proc.stdout

    def status(self) -> dict[str, Any]:
        """Return ``fwman modules status --json``."""
        code, out = self.fwman("modules", "status", "--json")
        assert code == 0, f"`fwman modules status --json` exit {code}: {out[-3000:]}"
        # stdout and stderr are one stream here: the document is the first JSON object in it
        doc: dict[str, Any] = json.JSONDecoder().raw_decode(out[out.index("{") :])[0]
        return doc

    def kernel(self, kver: str) -> dict[str, Any]:
        """Return the ``modules status --json`` entry of ``kver``."""
        kernels = self.status()["kernels"]
        assert isinstance(kernels, list)
        for entry in kernels:
            if entry["kernel"] == kver:
                return dict(entry)
        raise AssertionError(f"`fwman modules status` does not list {kver}: {[k['kernel'] for k in kernels]}")

    def manifest(self, kver: str) -> dict[str, Any]:
        """Return fwman's manifest of ``kver`` (``/var/lib/fwman/modules/KVER.json``)."""
        path = f"{STATE}/modules/{kver}.json"
        assert self.root.exists(path), f"no manifest {path}: fwman did not install patched modules for {kver}"
        doc: dict[str, Any] = json.loads(self.root.read_text(path))
        return doc

    def vermagic(self, kver: str, module: str = "nvidia") -> str:
        """Return what ``modinfo -F vermagic`` says of fwman's installed ``module`` for ``kver``."""
        path = f"/lib/modules/{kver}/updates/fwman/{module}.ko"
        proc = self.root.sh(f"modinfo -F vermagic {path}", check=False)
        assert proc.returncode == 0, f"modinfo {path}: {proc.stderr.strip()} (the module is not installed)"
        return proc.stdout.strip()

    def grubenv(self) -> dict[str, str]:
        """Return ``grub-editenv list`` of the root as a dict."""
        out = self.root.run("grub-editenv", "/boot/grub/grubenv", "list").stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def next_boot(self) -> str:
        """Return the kernel GRUB boots next, from grubenv and grub.cfg as GRUB itself chooses (see below)."""
        return grub_next_kernel(self.root.read_text("/boot/grub/grub.cfg"), self.grubenv())


def grub_next_kernel(cfg: str, env: dict[str, str]) -> str:
    """Return the kernel release GRUB boots next: ``next_entry``, else ``saved_entry`` with ``default=saved``,
    else the default entry (0 with Debian's ``GRUB_DEFAULT=0``: the first menu entry, the newest kernel).

    Entries are named by id (``gnulinux-advanced-UUID>gnulinux-KVER-advanced-UUID``), by title, or by index.
    """
    entries = re.findall(r"menuentry '([^']*)'.*?\$menuentry_id_option '([^']*)'", cfg)
    kernel_of = {}
    for title, ident in entries:
        m = re.search(r"Linux (\S+)", title)
        if m:
            kernel_of[title] = kernel_of[ident] = m[1]
    first = next((k for t, _ in entries if (k := kernel_of.get(t))), None)
    simple = re.search(r"echo\s+'Loading Linux (\S+) \.\.\.'", cfg)
    # grub.cfg's 00_header: `if [ "${next_entry}" ]; then set default="${next_entry}" ... else set default="X"`
    defaults = [d for d in re.findall(r'^\s*set default="([^"]*)"', cfg, re.MULTILINE) if d != "${next_entry}"]
    default = defaults[0] if defaults else "0"
    choice = env.get("next_entry") or (env.get("saved_entry") if default == "${saved_entry}" else default)
    if choice in ("0", "") or choice is None:
        kver = simple[1] if simple else first
        assert kver, f"no kernel in grub.cfg:\n{cfg[:2000]}"
        return kver
    last = choice.split(">")[-1]
    if last in kernel_of:
        return kernel_of[last]
    raise AssertionError(f"GRUB's next entry {choice!r} names no menu entry of grub.cfg")


@pytest.fixture(scope="module")
def owner(
    tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path, fork: GitDaemon
) -> Iterator[Owner]:
    """Return the story's machine with fwman installed (the root is removed at the end of the module)."""
    tarball, kernels = layer
    root = DebRoot.create(tmp_path_factory.mktemp("story2"), tarball)
    try:
        root.sh("apt-get update -q")
        grubenv = root.run("grub-editenv", "/boot/grub/grubenv", "list").stdout
        before = installed_packages(root, "linux-*")
        log = install_deb(root, deb)
        yield Owner(root, kernels, fork, deb, grubenv, before, installed_packages(root, "linux-*"), log)
    finally:
        root.close()


# -- installing the package ------------------------------------------------------------------------------------
def test_installing_the_package_pulls_no_kernel_or_headers(owner: Owner) -> None:
    """Issue 23 row 5: `apt install ./fwman_*.deb` must not install a kernel or headers (meta-)package."""
    new = sorted(p for p in owner.packages_after - owner.packages_before if re.match(r"^linux-(image|headers)-", p))
    assert new == [], (
        f"row 5: `apt-get install ./{owner.deb.name}` with default recommends installed kernel packages {new} "
        "(a kernel the branch may not build for, tracked from then on)"
    )
    code, out = owner.fwman("--version")
    assert code == 0 and "fwman, version" in out, out
    # issue 39, row 1: the fork's build runs g++ (nvidia-modeset's C++), xz, binutils, and fwman's patches need
    # patch: the package's recommends bring them with a default install
    status = owner.root.sh("dpkg-query -W -f '${Package} ${Status}\\n' g++ patch xz-utils binutils make gcc git")
    missing = [ln for ln in status.stdout.splitlines() if not ln.endswith("install ok installed")]
    assert missing == [], f"issue 39 row 1: the build toolchain did not come with the package: {missing}"


# -- the owner's first build, from the fork named in [forks] ----------------------------------------------------
def test_owner_configures_the_fork_by_name_and_builds(owner: Owner) -> None:
    """Issue 23 row 1 (manual entry point): `modules build` without --fork resolves the configured fork name."""
    config = owner.root.read_text("/etc/fwman/config.toml")
    config += f'\n[forks]\n{FORK_NAME} = "{owner.fork.url()}"\n\n[modules]\nfork = "{FORK_NAME}"\nbranch = "{BRANCH}"\n'
    owner.root.write_text("/etc/fwman/config.toml", config)
    first = owner.kernels.first
    code, out = owner.fwman("modules", "build", "--kernel", first)
    assert code == 0, (
        f'row 1: `fwman modules build --kernel {first}` with `[modules] fork = "{FORK_NAME}"` and '
        f'`[forks] {FORK_NAME} = "{owner.fork.url()}"` exit {code}:\n{out[-4000:]}'
    )
    assert owner.vermagic(first).split()[0] == first
    manifest = owner.manifest(first)
    assert manifest["branch"] == BRANCH and set(manifest["modules"]) == set(MODULES)
    # issue 39, row 3: the stand-in calls the three-argument pci_resize_resource(), as the fork does; where these
    # headers declare four (Debian 12's 6.1.0-53 and later), fwman's compat patch is what made it build
    common = first.removesuffix("-amd64") + "-common"
    arity = resize_arguments(owner.root.read_text(f"/usr/src/linux-headers-{common}/include/linux/pci.h"))
    want = ["pci-resize-resource-exclude-bars.patch"] if arity == 4 else []
    assert [p["name"] for p in manifest["patches"]] == want, f"{first} (pci_resize_resource: {arity}): {manifest}"
    entry = owner.kernel(first)
    assert entry["safe_to_boot"] is True, entry
    code, out = owner.fwman("modules", "check-boot")
    assert code == 0, f"check-boot after the first build: exit {code}: {out}"


def _ensure_built(owner: Owner, *kernels: str) -> None:
    """Give ``kernels`` working modules the way the issue's owner worked around row 1 (`--fork URL` on the
    command line) when an earlier step left them without: later steps then fail only for their own row."""
    for kver in kernels:
        if not owner.root.exists(f"{STATE}/modules/{kver}.json"):
            code, out = owner.fwman(
                "modules", "build", "--kernel", kver, "--fork", owner.fork.url(), "--branch", BRANCH
            )
            assert code == 0, (
                f"`fwman modules build --kernel {kver} --fork URL` (row 1's workaround) exit {code}:\n{out}"
            )


# -- the source cache, broken two ways ----------------------------------------------------------------------------
def _source_cache(owner: Owner) -> str:
    """Return the checkout of the story's fork in /var/cache/fwman/src (the one whose origin is its URL)."""
    script = 'for d in /var/cache/fwman/src/*/; do echo "$d $(git -C "$d" remote get-url origin 2>/dev/null)"; done'
    rows = [line.split() for line in owner.root.sh(script, check=False).stdout.splitlines()]
    ours = [r[0].rstrip("/") for r in rows if r[1:] == [owner.fork.url()]]
    assert len(ours) == 1, f"expected one checkout of {owner.fork.url()} in /var/cache/fwman/src, found {rows}"
    return ours[0]


def _half_made(owner: Owner, cache: str, url: str) -> None:
    """Leave ``cache`` as an interrupted first clone leaves it: `git init` and the remote, nothing fetched."""
    q = shlex.quote
    owner.root.sh(f"rm -rf {q(cache)} && git init -q {q(cache)} && git -C {q(cache)} remote add origin {q(url)}")


def test_half_made_source_cache_repairs_itself(owner: Owner) -> None:
    """Issue 23 row 2: a half-made checkout in the source cache is repaired by the next automatic build."""
    _ensure_built(owner, owner.kernels.first)
    cache = _source_cache(owner)
    commit = owner.manifest(owner.kernels.first)["commit"]
    _half_made(owner, cache, owner.fork.url())
    code, out = owner.fwman("modules", "catchup", "--force")
    assert code == 0, (
        f"row 2: `fwman modules catchup --force` with a half-made checkout in {cache} exit {code} (every later "
        f"build fails the same way until the directory is removed by hand):\n{out[-4000:]}"
    )
    head = owner.root.sh(f"git -C {shlex.quote(cache)} rev-parse HEAD 2>&1", check=False).stdout.strip()
    assert head == commit, f"row 2: the source cache {cache} is at {head!r} after the repair, not {commit}"
    assert owner.manifest(owner.kernels.first)["commit"] == commit


def test_build_with_an_unreachable_fork_names_the_source(owner: Owner) -> None:
    """Issue 23 row 3: a broken source is named as the cause (not the headers) and git's whole error is kept."""
    gone = "/srv/git/moved-away/open-gpu-kernel-modules.git"
    config = owner.root.read_text("/etc/fwman/config.toml")
    owner.root.write_text("/etc/fwman/config.toml", config.replace(owner.fork.url(), gone))
    try:
        first = owner.kernels.first
        code, out = owner.fwman("modules", "build", "--kernel", first)
    finally:
        owner.root.write_text("/etc/fwman/config.toml", config)
    lowered = out.lower()
    # exit 5 (a fork branch that cannot be had is "missing", docs/exit-codes.md), but naming the source
    assert code == 5 and "install the headers" not in lowered and "linux-headers" not in lowered, (
        f"row 3: with the headers of {first} installed and the fork unreachable, `modules build` exit {code} "
        f"blames the headers:\n{out[-3000:]}"
    )
    assert "cannot reach fork" in out and "the kernel headers are not the problem" in out, (
        f"row 3: the error does not say the source is the cause:\n{out[-3000:]}"
    )
    assert gone in out, f"row 3: the error does not name the source {gone}:\n{out[-3000:]}"
    for line in ("does not appear to be a git repository", "Could not read from remote repository"):
        assert line in out, f"row 3: git's error is cut (missing {line!r}):\n{out[-3000:]}"
    # the owner puts the fork's URL back: the next build works again
    code, out = owner.fwman("modules", "build", "--kernel", first, "--force")
    assert code == 0, f"after restoring the fork's URL, `modules build --force` exit {code}:\n{out[-3000:]}"


# -- the kernel update: the hooks build by themselves, with the object cache ---------------------------------------
def test_kernel_update_builds_in_the_hooks_with_the_object_cache(owner: Owner) -> None:
    """Issue 23 row 1 (hook entry point) and the object cache: `apt-get install` of a new kernel builds its modules."""
    update = owner.kernels.update
    log = owner.apt("install", *kernel_packages(update))
    owner.notes["update-log"] = log
    assert owner.root.exists(f"{STATE}/modules/{update}.json"), (
        f"row 1: `apt-get install {' '.join(kernel_packages(update))}` left {update} without patched modules "
        f"(pending: {owner.root.exists(f'{STATE}/modules/{update}.pending')}); hook output:\n"
        + "\n".join(ln for ln in log.splitlines() if "fwman" in ln)[-4000:]
    )
    assert owner.vermagic(update).split()[0] == update
    for module in MODULES[1:]:
        assert owner.vermagic(update, module).split()[0] == update
    manifest = owner.manifest(update)
    assert manifest["object_cache_hit"] is True, f"the second kernel rebuilt the kernel-independent objects: {manifest}"
    lines = _assert_phases_once_in_order(log, update, "row 7 (the hook's build during apt)")
    assert "kernel-independent objects" not in " ".join(lines), f"row 7: the cached objects were built: {lines}"
    assert any(ln.startswith(f"{update}: make finished in") for ln in lines), f"row 7: no end line: {lines}"
    assert manifest["commit"] == owner.manifest(owner.kernels.first)["commit"]
    entry = owner.kernel(update)
    assert entry["safe_to_boot"] is True and entry["modules"] == "ok", entry
    assert owner.next_boot() == update, "GRUB's next boot is not the new kernel although its modules work"
    code, out = owner.fwman("modules", "check-boot")
    assert code == 0, f"check-boot after the update: exit {code}: {out}"
    assert not owner.root.exists(f"{STATE}/boot-pin.json"), "a pin although every kernel has working modules"


# -- a kernel the fork does not build for, in each package order ----------------------------------------------------
ORDERS = {
    "image-then-headers": [["image"], ["headers"]],
    "headers-then-image": [["headers"], ["image"]],
    "image-and-headers-in-one-call": [["image", "headers"]],
}


def _assert_not_next_boot(owner: Owner, order: str, step: str) -> None:
    broken = owner.kernels.broken
    env = owner.grubenv()
    nxt = owner.next_boot()
    pin = f"{STATE}/boot-pin.json"
    assert nxt != broken, (
        f"row 4 ({order}, after {step}): GRUB boots {broken} next (its patched modules did not build); grubenv: "
        f"{env}; boot-pin.json {'present' if owner.root.exists(pin) else 'absent'}"
    )
    code, out = owner.fwman("modules", "check-boot")
    assert code == 0, f"row 4 ({order}, after {step}): `fwman modules check-boot` exit {code}: {out}"


def _purge_broken(owner: Owner) -> None:
    """`apt purge` the broken kernel's image and headers (and a meta-package that depends on them)."""
    present = [p for p in kernel_packages(owner.kernels.broken) if p in installed_packages(owner.root, "linux-*")]
    if present:
        owner.apt("purge", *present)


@pytest.mark.parametrize("order", list(ORDERS))
def test_broken_kernel_is_never_the_next_boot(owner: Owner, order: str) -> None:
    """Issue 23 row 4: whatever order apt configures image, headers and zz-update-grub, the kernel whose
    modules failed is not the next boot when apt returns; then `apt purge` of that kernel gives the pin back.
    After the last order the kernel and its pin stay (the purge of fwman must give the pin back: row 6)."""
    broken = owner.kernels.broken
    _purge_broken(owner)  # a previous order that failed half-way left it installed
    _ensure_built(owner, owner.kernels.first, owner.kernels.update)
    image, headers = kernel_packages(broken)
    names = {"image": image, "headers": headers}
    logs = []
    for call in ORDERS[order]:
        log = owner.apt("install", *(names[p] for p in call))
        logs.append(log)
        assert "zz-update-grub" in log or call == ["headers"], f"GRUB's hook did not run:\n{log[-3000:]}"
        _assert_not_next_boot(owner, order, f"`apt-get install {' '.join(names[p] for p in call)}`")
    # row 7: the failed build in the hook said each phase once and where it failed, without counts it promised
    lines = _assert_phases_once_in_order("\n".join(logs), broken, f"row 7 ({order})")
    assert any(f"{broken}: make FAILED in the kernel-open phase" in ln for ln in lines), (
        f"row 7 ({order}): the hook's failure does not name the phase: {lines}"
    )
    pending = f"{STATE}/modules/{broken}.pending"
    why = owner.root.read_text(pending) if owner.root.exists(pending) else "no .pending marker either"
    assert owner.root.exists(f"{STATE}/modules/{broken}.failed"), (
        f"{broken}.failed missing: the hooks did not build (the fork refuses this kernel); {pending}: {why}"
    )
    failed = owner.root.read_text(f"{STATE}/modules/{broken}.failed")
    assert "nv-pci.c" in failed and "does not support this kernel" in failed, f"the failure record: {failed}"
    pin = json.loads(owner.root.read_text(f"{STATE}/boot-pin.json"))
    assert pin["avoided"] == broken and pin["kernel"] == owner.kernels.update, pin
    entry = owner.kernel(broken)
    assert entry["safe_to_boot"] is False, entry
    if order == list(ORDERS)[-1]:
        return
    # `apt purge` of the kernel: fwman forgets it and gives the pin back
    owner.apt("purge", image, headers)
    assert not owner.root.exists(f"/lib/modules/{broken}/updates/fwman")
    for marker in (f"{broken}.failed", f"{broken}.pending", f"{broken}.json"):
        assert not owner.root.exists(f"{STATE}/modules/{marker}"), f"{marker} left after `apt purge` of {broken}"
    assert not owner.root.exists(f"{STATE}/boot-pin.json"), f"the pin stays after {broken} was purged"
    assert "next_entry" not in owner.grubenv(), f"grubenv keeps fwman's next_entry: {owner.grubenv()}"
    assert owner.next_boot() == owner.kernels.update


# -- boot: the catch-up as the unit starts it ------------------------------------------------------------------------
def test_catchup_as_the_unit_runs_it(owner: Owner) -> None:
    """The packaged unit's ExecStart, run as systemd would at boot: exit 0, the pin kept, the stamp written."""
    unit = owner.root.read_text("/lib/systemd/system/fwman-catchup.service")
    execs = re.findall(r"^ExecStart=(.+)$", unit, re.MULTILINE)
    assert len(execs) == 1, f"the unit has {len(execs)} ExecStart lines:\n{unit}"
    command = execs[0].lstrip("-@:+!")
    proc = owner.root.sh(command + " 2>&1", check=False, timeout=1800)
    assert proc.returncode in (0, 6), f"`{command}` (the unit's ExecStart) exit {proc.returncode}:\n{proc.stdout}"
    assert owner.next_boot() != owner.kernels.broken
    assert json.loads(owner.root.read_text(f"{STATE}/boot-pin.json"))["avoided"] == owner.kernels.broken


# -- build once, import on another host ------------------------------------------------------------------------------
def test_export_on_one_root_import_on_a_second(owner: Owner, tmp_path: Path, layer: tuple[Path, Kernels]) -> None:
    """A bundle exported here installs on a second machine (same kernel) through apt-installed fwman."""
    first = owner.kernels.first
    _ensure_built(owner, first)
    code, out = owner.fwman("modules", "export", "--kernel", first, "-o", "/root/modules.fwbundle")
    assert code == 0, f"`fwman modules export --kernel {first}` exit {code}:\n{out}"
    bundle = tmp_path / "modules.fwbundle"
    owner.root.get("/root/modules.fwbundle", bundle)
    second = DebRoot.create(tmp_path / "second", layer[0])
    try:
        install_deb(second, owner.deb)
        second.put(bundle, "/root/modules.fwbundle")
        proc = second.sh("fwman modules import /root/modules.fwbundle 2>&1", check=False)
        assert proc.returncode == 0, f"`fwman modules import` on the second root exit {proc.returncode}:\n{proc.stdout}"
        theirs = json.loads(second.read_text(f"{STATE}/modules/{first}.json"))
        ours = owner.manifest(first)
        assert {m: v["sha256"] for m, v in theirs["modules"].items()} == {
            m: v["sha256"] for m, v in ours["modules"].items()
        }
        vermagic = second.sh(f"modinfo -F vermagic /lib/modules/{first}/updates/fwman/nvidia.ko").stdout
        assert vermagic.split()[0] == first
        assert second.sh("fwman modules check-boot 2>&1", check=False).returncode == 0
        # `fwman modules remove --all` (issue 23 row 6): the documented way to take fwman's modules off
        proc = second.sh("fwman modules remove --all 2>&1", check=False)
        assert proc.returncode == 0, f"row 6: `fwman modules remove --all` exit {proc.returncode}:\n{proc.stdout}"
        left = second.sh("find /lib/modules -path '*/updates/fwman*'", check=False).stdout.split()
        assert left == [], f"row 6: `fwman modules remove --all` left {left}"
        resolved = second.sh(f"modinfo -k {first} -n nvidia 2>&1", check=False)
        assert "updates/fwman" not in resolved.stdout, f"depmod still resolves nvidia to fwman's: {resolved.stdout}"
    finally:
        second.close()


# -- row 6: taking fwman off again -----------------------------------------------------------------------------------
def test_modules_remove_takes_one_kernels_modules_off(owner: Owner) -> None:
    """Issue 23 row 6: `fwman modules remove --kernel KVER` removes the modules fwman installed for KVER."""
    first = owner.kernels.first
    _ensure_built(owner, first)
    code, out = owner.fwman("modules", "remove", "--kernel", first)
    assert code == 0, (
        f"row 6: `fwman modules remove --kernel {first}` exit {code} (no documented way to remove):\n{out}"
    )
    assert not owner.root.exists(f"/lib/modules/{first}/updates/fwman"), out
    assert not owner.root.exists(f"{STATE}/modules/{first}.json"), out
    assert owner.root.exists(f"/lib/modules/{owner.kernels.update}/updates/fwman/nvidia.ko"), "other kernels untouched"


def test_purge_gives_back_grub_and_leaves_only_what_is_documented(owner: Owner) -> None:
    """Issue 23 row 6 and the purge: grubenv as before fwman, no fwman state or config; what is left, documented."""
    assert "next_entry" in owner.grubenv() or "saved_entry" in owner.grubenv(), (
        f"the broken kernel's pin is not in grubenv before the purge: {owner.grubenv()}"
    )
    log = owner.apt("purge", "fwman")
    env = owner.root.run("grub-editenv", "/boot/grub/grubenv", "list").stdout

    def values(text: str) -> dict[str, str]:  # GRUB itself leaves `next_entry=` after a one-time boot
        return {k: v for k, _, v in (line.partition("=") for line in text.splitlines()) if v}

    assert values(env) == values(owner.grubenv_before), (
        f"row 6: after `apt purge fwman`, grubenv is\n{env}\ninstead of what it was before fwman:\n"
        f"{owner.grubenv_before or '(empty)'}"
    )
    paths = ["/etc/fwman", "/var/lib/fwman", "/var/cache/fwman", "/var/log/fwman", "/etc/depmod.d",
             "/etc/apt", "/etc/dkms", "/etc/kernel", "/etc/motd.d", "/etc/systemd", "/lib/systemd", "/usr/lib/fwman",
             "/usr/libexec", "/lib/modules"]  # fmt: skip
    found = owner.root.sh(f"find {' '.join(paths)} 2>/dev/null | grep -i fwman", check=False).stdout.split()
    documented = re.compile(rf"^/lib/modules/{re.escape(owner.kernels.update)}/updates/fwman(/[a-z-]+\.ko)?$")
    left = [p for p in found if not documented.match(p)]
    assert left == [], "after `apt purge fwman` these are left:\n" + "\n".join(left) + f"\npurge said:\n{log[-2000:]}"
    assert owner.root.exists(f"/lib/modules/{owner.kernels.update}/updates/fwman/nvidia.ko"), (
        "debian-package.md says purge leaves the installed modules (they may be the driver this machine boots)"
    )
