"""Installing built modules for one kernel, running depmod, and checking that depmod picks ours.

The install is staged: the new modules are written to ``/lib/modules/<kver>/updates/.fwman-new/`` and the
directory is swapped with ``updates/fwman`` by two renames, so modprobe sees the old set or the new set, never a
mix. ``/etc/depmod.d/fwman.conf`` overrides every other copy of the five names (a stock module under
``kernel/drivers/video``, DKMS's under ``updates/dkms``). Then the real ``depmod`` runs (``-b``/``-C`` when the
Host is a temp root) and its output, ``modules.dep``, is read back: each name must resolve to our file, with the
hash recorded in the manifest and a ``vermagic`` naming the kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fwman.core import paths
from fwman.core.errors import MissingError, ParseError, VerificationError
from fwman.driver.build.manifest import INSTALL_SUBDIR, Manifest, ModuleEntry, install_dir, sha256_hex, store_dir
from fwman.driver.kmod.kofile import module_stem, read_module
from fwman.driver.localfs import root_prefix
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.actions import Action, Tracked, WriteFile, apply_all
from fwman.host.base import Host

WHAT_DEP = "modules.dep"


def depmod_conf_text() -> bytes:
    """Return the content of ``/etc/depmod.d/fwman.conf``: an override line per module name."""
    lines = [
        "# Written by fwman (`fwman modules build`): the P2P-patched NVIDIA modules fwman installs under",
        f"# {INSTALL_SUBDIR}/ win over every other copy of these names (packaged, DKMS). Removing this file",
        "# and running `depmod -a` hands the names back to whatever else is installed.",
    ]
    lines += [f"override {name} * {INSTALL_SUBDIR}" for name in MODULE_NAMES]
    return ("\n".join(lines) + "\n").encode()


def _holds(host: Host, path: str, digest: str) -> bool:
    """Return True when ``path`` exists with SHA-256 ``digest``."""
    try:
        return sha256_hex(host.read_bytes(path)) == digest
    except MissingError:
        return False


@dataclass
class InstallModules:
    """Make ``updates/fwman/`` of ``kver`` (and fwman's store copy) hold exactly ``built``.

    ``built`` maps module names to file bytes. The new set is written to ``updates/.fwman-new/`` and swapped in
    by two renames, so modprobe sees the old set or the new one, never a mix.
    """

    kver: str
    built: Mapping[str, bytes]

    def entries(self) -> dict[str, ModuleEntry]:
        """Return the manifest entries of the modules this action installs."""
        final = install_dir(self.kver)
        return {n: ModuleEntry(f"{final}/{n}.ko", sha256_hex(d), len(d)) for n, d in self.built.items()}

    def describe(self) -> str:
        """Return which modules go where."""
        names = ", ".join(f"{name}.ko" for name in self.built)
        return f"install {names} into {install_dir(self.kver)} (staged, swapped in)"

    def is_needed(self, host: Host) -> bool:
        """Return True unless the installed set and the stored copy are exactly ``built`` (hashes compared)."""
        final, store = install_dir(self.kver), store_dir(self.kver)
        expected = {f"{name}.ko" for name in self.built}
        try:
            if not host.is_dir(final) or set(host.listdir(final)) != expected:
                return True
        except MissingError:
            return True
        for name, data in self.built.items():
            digest = sha256_hex(data)
            if not (_holds(host, f"{final}/{name}.ko", digest) and _holds(host, f"{store}/{name}.ko", digest)):
                return True
        return False

    def apply(self, host: Host) -> None:
        """Install the set. Raises MissingError when the kernel's module directory does not exist, FwmanError when
        a write fails; the previous modules stay in place until the final rename."""
        base = paths.modules_dir(self.kver)
        if not host.is_dir(base):
            raise MissingError(f"{base} does not exist: is kernel {self.kver} installed?")
        final = install_dir(self.kver)
        staging = f"{base}/updates/.fwman-new"
        old = f"{base}/updates/.fwman-old"
        host.remove_tree(staging)
        host.remove_tree(old)
        for name, data in self.built.items():
            host.write_bytes(f"{staging}/{name}.ko", data)
        # the store first: if the swap below is interrupted, a repair can still put the new set in place
        store = store_dir(self.kver)
        for name, data in self.built.items():
            host.write_bytes(f"{store}/{name}.ko", data)
        if host.exists(final):
            host.rename(final, old)
        host.rename(staging, final)
        host.remove_tree(old)


@dataclass
class RunDepmod:
    """Run ``depmod -a`` for ``kver`` when a watched change was applied or the names do not resolve to ours."""

    kver: str
    expected: Mapping[str, str]  # module name -> the host path depmod must resolve it to
    after: Sequence[Tracked] = ()

    def describe(self) -> str:
        """Return the command and why."""
        return f"run depmod -a {self.kver} (so {', '.join(self.expected)} resolve to fwman's files)"

    def is_needed(self, host: Host) -> bool:
        """Return True when a watched action changed something, or modules.dep does not resolve every name."""
        if any(t.applied for t in self.after):
            return True
        try:
            resolution = depmod_resolution(host, self.kver)
        except ParseError:
            return True
        return any(resolution.get(name.replace("-", "_")) != path for name, path in self.expected.items())

    def apply(self, host: Host) -> None:
        """Run depmod (see :func:`run_depmod` for what it raises)."""
        run_depmod(host, self.kver)


def install_actions(kver: str, built: Mapping[str, bytes]) -> tuple[list[Action], dict[str, ModuleEntry]]:
    """Return (the actions that install ``built`` for ``kver``, the manifest entries of those modules).

    The actions: the module files (staged, with the store copy), the depmod override
    (``/etc/depmod.d/fwman.conf``), then depmod, which runs when either of the first two changed something or
    when the names do not resolve to fwman's files. Applying them twice changes nothing the second time.
    """
    files = InstallModules(kver, built)
    entries = files.entries()
    tracked_files = Tracked(files)
    override = Tracked(WriteFile(paths.DEPMOD_OVERRIDE, depmod_conf_text()))
    depmod = RunDepmod(kver, {name: entry.path for name, entry in entries.items()}, (tracked_files, override))
    return [tracked_files, override, depmod], entries


def install_modules(host: Host, kver: str, built: Mapping[str, bytes]) -> tuple[dict[str, ModuleEntry], list[str]]:
    """Install ``built`` ({module name: file bytes}) for ``kver`` and run depmod where needed.

    Returns (the manifest entries, the descriptions of what changed: [] when all was in place). Raises as
    :class:`InstallModules` and :func:`run_depmod` do.
    """
    actions, entries = install_actions(kver, built)
    return entries, apply_all(host, actions)


def remove_modules(host: Host, kver: str) -> None:
    """Remove fwman's installed modules and store for ``kver`` (the kernel itself was removed)."""
    host.remove_tree(install_dir(kver))
    host.remove_tree(store_dir(kver))


def run_depmod(host: Host, kver: str) -> None:
    """Run the real ``depmod -a`` for ``kver`` (under the Host's root with ``-b`` and ``-C`` when it has one).

    Raises ToolMissing-style MissingError when depmod is absent, VerificationError when it fails: the modules
    are then in place but not in effect (not indexed), as when they do not resolve afterwards, and the manifest
    is not written; running the build or import again reruns depmod.
    """
    argv = ["depmod", "-a"]
    prefix = root_prefix(host)
    if prefix is not None:
        # -b alone still reads /etc/depmod.d of this machine: point -C at the temp root's configuration.
        argv += ["-b", prefix, "-C", f"{prefix}/etc/depmod.d"]
    elif host.exists(f"/boot/System.map-{kver}"):
        argv += ["-F", f"/boot/System.map-{kver}"]
    argv.append(kver)
    result = host.run(argv, timeout=300)
    if result.missing:
        raise MissingError("depmod not found", hint="install kmod (apt install kmod)")
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise VerificationError(
            f"depmod failed for {kver}: {detail[-1] if detail else f'exit status {result.rc}'}",
            hint=f"the modules are in place but not in effect; fix what depmod says (`depmod -a {kver}` by hand "
            "shows it) and run the command again",
        )


def parse_modules_dep(text: str) -> dict[str, str]:
    """Return {module name with ``_``: path relative to the kernel's module dir} from ``modules.dep`` text.

    Each line is ``path: dependency...``. Raises ParseError (with the line number) for a line without the
    colon or with a path that is not a module file.
    """
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        path, sep, _deps = line.partition(":")
        path = path.strip()
        if not sep or not path or " " in path:
            raise ParseError(WHAT_DEP, "line", f"expected 'path: deps', got {line[:60]!r}", number)
        stem = module_stem(path.rsplit("/", 1)[-1])
        if stem is None:
            raise ParseError(WHAT_DEP, "path", f"not a module file: {path[:60]!r}", number)
        result.setdefault(stem.replace("-", "_"), path)
    return result


def depmod_resolution(host: Host, kver: str) -> dict[str, str]:
    """Return {module name with ``_``: absolute host path} as the last depmod run for ``kver`` resolved them.

    Returns {} when depmod never ran for that kernel. Raises ParseError for a corrupt modules.dep.
    """
    path = f"{paths.modules_dir(kver)}/modules.dep"
    if not host.exists(path):
        return {}
    return {name: f"{paths.modules_dir(kver)}/{rel}" for name, rel in parse_modules_dep(host.read_text(path)).items()}


@dataclass
class ModuleCheck:
    """The verdict on one module of a manifest."""

    name: str
    ok: bool
    problem: str | None = None
    resolved: str | None = None


def check_installed(
    host: Host, manifest: Manifest, *, resolution: Mapping[str, str] | None = None, hash_files: bool = True
) -> list[ModuleCheck]:
    """Check every module of ``manifest`` on ``host`` and return one verdict per module.

    A module is ok when depmod resolves its name to the manifest's path, the file has the recorded SHA-256
    (or size, with ``hash_files=False``) and its ``vermagic`` names the manifest's kernel. Never raises for a
    missing or unreadable file: that is a failed check.
    """
    kver = manifest.kernel
    if resolution is None:
        try:
            resolution = depmod_resolution(host, kver)
        except ParseError as e:
            return [ModuleCheck(name, False, f"modules.dep unreadable: {e.message}") for name in manifest.modules]

    def problem_of(name: str, entry: ModuleEntry, resolved: str | None) -> str | None:
        if resolved != entry.path:
            return f"depmod resolves {name} to {resolved or 'nothing'}, not to ours"
        try:
            if not hash_files:
                same = entry.size is None or host.stat_size(entry.path) == entry.size
                return None if same else "file size differs from the manifest"
            data = host.read_bytes(entry.path)
            if sha256_hex(data) != entry.sha256:
                return "file differs from the manifest (sha256)"
            release = read_module(data).kernel_release
            return None if release == kver else f"vermagic names {release or 'no kernel'}, not {kver}"
        except MissingError:
            return f"{entry.path} is missing"
        except ParseError as e:
            return f"not a readable module: {e.message}"

    checks: list[ModuleCheck] = []
    for name, entry in manifest.modules.items():
        resolved = resolution.get(name.replace("-", "_"))
        problem = problem_of(name, entry, resolved)
        checks.append(ModuleCheck(name, problem is None, problem, resolved))
    return checks


def verify_or_raise(host: Host, manifest: Manifest) -> None:
    """Raise VerificationError naming the first failed check of ``manifest`` on ``host``; return when all pass."""
    bad = [c for c in check_installed(host, manifest) if not c.ok]
    if bad:
        raise VerificationError(
            f"kernel {manifest.kernel}: {bad[0].name}: {bad[0].problem}",
            hint="run `fwman modules status` for every module's state",
        )


def stored_copy(host: Host, manifest: Manifest) -> dict[str, bytes] | None:
    """Return fwman's stored copy of ``manifest``'s modules (name -> bytes), None when the store is missing a
    module or a stored copy does not match the manifest (then only a rebuild brings them back)."""
    kver = manifest.kernel
    built: dict[str, bytes] = {}
    for name, entry in manifest.modules.items():
        try:
            data = host.read_bytes(f"{store_dir(kver)}/{name}.ko")
        except MissingError:
            return None
        if sha256_hex(data) != entry.sha256:
            return None
        built[name] = data
    return built


def repair_from_store(host: Host, manifest: Manifest) -> bool:
    """Put fwman's stored copies of ``manifest``'s modules back in place and rerun depmod.

    Used when DKMS moved our modules away (into its ``original_module`` directory) and installed its own.
    Returns False (changing nothing) when there is no usable stored copy (:func:`stored_copy`); the caller then
    rebuilds.
    """
    built = stored_copy(host, manifest)
    if built is None:
        return False
    install_modules(host, manifest.kernel, built)
    return True
