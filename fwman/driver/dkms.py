"""Keeping DKMS from rebuilding NVIDIA's stock modules over the patched ones.

``dkms autoinstall`` (kernel hook and ``dkms.service``) builds every registered module that is not installed
for a kernel; when a same-named module exists it moves it into ``/var/lib/dkms/<m>/original_module/`` and
installs its own, silently replacing the patched module. ``fwman dkms block`` removes the registered
``nvidia*`` modules for all kernels (``dkms remove M/V --all``), pins the ``*nvidia*dkms*`` packages to -1 in
``/etc/apt/preferences.d/`` so apt cannot bring them back (and with them Ubuntu's prebuilt
``linux-modules-nvidia-*``, ``linux-objects-nvidia-*`` and ``linux-signatures-nvidia-*``, whose metapackages
provide ``nvidia-dkms-*``: :mod:`fwman.driver.prebuilt`; never the P2P fork's own ``nvidia-open-p2p-dkms``),
and records what it did in ``/var/lib/fwman/dkms-block.json`` so ``fwman dkms unblock`` can undo it
(``dkms add M/V`` again).

On a temp root the real ``dkms`` is pointed at it with ``--dkmstree``, ``--sourcetree`` and ``--installtree``,
and told ``--no-depmod`` (its depmod would run on this machine's /lib/modules); fwman runs depmod itself.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.core.aptprefs import Pin as AptPin
from fwman.core.aptprefs import render as render_apt_preferences
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError, VerificationError
from fwman.core.jsonout import OMIT, meta
from fwman.core.jsontext import parse_json
from fwman.driver.localfs import root_prefix
from fwman.host.base import Host

if TYPE_CHECKING:  # the actions are imported where a block is planned: `fwman audit` reads the pin only
    from fwman.host.actions import Action


def _never(pattern: str, *comment: str) -> AptPin:
    """Return the record that keeps every version of the packages ``pattern`` matches from installing."""
    return AptPin((pattern,), "release", "*", -1, comment=comment, patterns=True)


#: the P2P fork's own DKMS packages, which ``*nvidia*dkms*`` also matches: Duanyll publishes ``nvidia-open-p2p-dkms``
#: (../shared/docs/field-late-2026.md, "The forks"). The block is for NVIDIA's stock module, never the owner's fork.
FORK_DKMS_PACKAGES = ("nvidia-open-p2p-dkms",)
#: the priority the fork's packages keep: 500, what apt gives every archive's versions when nothing pins them
#: (apt_preferences(5), "APT's Default Priority Assignments"); below 1000, so it never forces a downgrade
FORK_DKMS_PRIORITY = 500


def _fork_exempt() -> AptPin:
    """Return the record that keeps the fork's DKMS packages out of the ``*nvidia*dkms*`` hold.

    apt takes the first specific record that matches a package (apt_preferences(5), "How APT Interprets
    Priorities"; a glob counts as the names it matches: "Matching packages in the Package field"), so this record
    goes before the glob's.
    """
    why = (
        "The owner's P2P fork packaged for DKMS is not NVIDIA's stock module: apt may install and upgrade it.",
        "This record comes first because apt uses the first record that names a package.",
    )
    return AptPin(FORK_DKMS_PACKAGES, "release", "*", FORK_DKMS_PRIORITY, comment=why)


APT_PIN_TEXT = render_apt_preferences(
    [
        _fork_exempt(),
        _never(
            "*nvidia*dkms*",
            "Keep apt from installing NVIDIA's DKMS module packages, which would rebuild the stock modules over",
            "fwman's P2P-patched ones.",
        ),
        _never(
            "linux-modules-nvidia-*",
            "Ubuntu's prebuilt, Canonical-signed stock NVIDIA modules (linux-modules-nvidia-*, with their",
            "linux-objects-nvidia-* and linux-signatures-nvidia-*): their metapackages provide nvidia-dkms-*, so",
            "apt would install them in place of the DKMS package pinned above, and every kernel update would bring",
            "stock modules that load wherever fwman's patched build is missing.",
        ),
        _never("linux-objects-nvidia-*"),
        _never("linux-signatures-nvidia-*"),
    ],
    header=("Written by `fwman dkms block`. `fwman dkms unblock` removes this file.",),
).decode()
WHAT = "dkms status output"

# 3.x: "nvidia/590.48.01, 6.18.9+deb14-amd64, x86_64: installed"   added only: "nvidia/590.48.01: added"
_V3 = re.compile(r"^(?P<m>[^/,:\s]+)/(?P<v>[^,:\s]+)(?:, (?P<k>[^,:\s]+), (?P<a>[^,:\s]+))?: (?P<s>.+)$")
# 2.x: "nvidia, 396.45, 4.17.14-202.fc28.x86_64, x86_64: installed"   added only: "nvidia, 396.45: added"
_V2 = re.compile(r"^(?P<m>[^/,:\s]+), (?P<v>[^,:\s]+)(?:, (?P<k>[^,:\s]+), (?P<a>[^,:\s]+))?: (?P<s>.+)$")


@dataclass(frozen=True)
class DkmsEntry:
    """One line of ``dkms status``."""

    module: str
    version: str
    kernel: str | None
    arch: str | None
    state: str  # "added", "built", "installed", "installed (original_module exists)", ...

    @property
    def installed(self) -> bool:
        """Return True when DKMS says this module is installed for its kernel."""
        return self.state.startswith("installed")


def parse_status(text: str) -> list[DkmsEntry]:
    """Return the entries of ``dkms status`` output (2.x and 3.x formats).

    Warning/error lines dkms mixes in are skipped. Raises ParseError (with the line number) for any other line
    that is not a status line.
    """
    entries: list[DkmsEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.lower().startswith(("warning", "error", "deprecated")):
            continue
        m = _V3.match(line) or _V2.match(line)
        if m is None:
            raise ParseError(WHAT, "line", f"not a dkms status line: {line[:80]!r}", number)
        entries.append(DkmsEntry(m.group("m"), m.group("v"), m.group("k"), m.group("a"), m.group("s").strip()))
    return entries


def is_nvidia(entry: DkmsEntry) -> bool:
    """Return True for NVIDIA's modules (``nvidia``, Debian's ``nvidia-current``, ``nvidia-open``...)."""
    return entry.module.lower().startswith("nvidia")


# -- the owner's P2P fork registered in DKMS ----------------------------------------------------------------------
# aikitoria's 2026 trees are reported to ship dkms.conf and dkms-setup.sh, and Duanyll publishes a
# nvidia-open-p2p-dkms .deb (../shared/docs/field-late-2026.md, "The forks"): an owner may have the fork itself
# registered in DKMS. It is told from NVIDIA's stock module by its tree, never by the module name alone (both are
# "nvidia"). The March 2025 tree's kernel-open/dkms.conf is NVIDIA's installer template (PACKAGE_VERSION=
# "__VERSION_STRING", a "__DKMS_MODULES" line: read in aikitoria/open-gpu-kernel-modules, branch 570.86.16-p2p),
# unusable as it is.
FORK, STOCK = "fork", "stock"
#: placeholders of NVIDIA's installer template of dkms.conf (filled in by nvidia-installer)
TEMPLATE_MARKS = ("__VERSION_STRING", "__DKMS_MODULES", "__JOBS", "__EXCLUDE_MODULES")


def is_template(text: str) -> bool:
    """Return True when a dkms.conf is NVIDIA's installer template (its placeholders not filled in)."""
    return any(mark in text for mark in TEMPLATE_MARKS)


@dataclass(frozen=True)
class DkmsSource:
    """What one registered module's tree is: the owner's P2P fork or NVIDIA's stock module, and why. Its JSON
    form (added to a module of ``fwman.dkms-status/1``) is ``{"kind", "fork_evidence", "tree_version"}``."""

    module: str = field(metadata=OMIT)
    version: str = field(metadata=OMIT)
    kind: str  # FORK | STOCK
    evidence: tuple[str, ...] = field(metadata=meta(key="fork_evidence"))  # why it is the fork (empty for stock)
    tree_version: str | None = None  # the NVIDIA_VERSION of its version.mk, when the tree has one


def _read(host: Host, path: str) -> str | None:
    try:
        return host.read_text(path) if host.exists(path) else None
    except (FwmanError, OSError):
        return None


def dkms_module_files(host: Host, entry: DkmsEntry) -> list[str]:
    """Return the nvidia.ko files DKMS built for ``entry``'s kernel (its tree under /var/lib/dkms, dkms 3.x's
    layout ``M/V/KVER/ARCH/module/``). Never raises."""
    if entry.kernel is None:
        return []
    found = []
    for arch in ([entry.arch] if entry.arch else []) + ["x86_64"]:
        base = f"{paths.DKMS_TREE}/{entry.module}/{entry.version}/{entry.kernel}/{arch}/module"
        for suffix in ("", ".xz", ".zst", ".gz"):
            try:
                if host.exists(f"{base}/nvidia.ko{suffix}"):
                    found.append(f"{base}/nvidia.ko{suffix}")
            except (FwmanError, OSError):
                continue
        if found:
            break
    return found


def _srcversion(host: Host, path: str) -> str | None:
    from fwman.driver.kmod.kofile import decompress, read_module

    try:
        return read_module(decompress(host.read_bytes(path), path)).srcversion
    except (FwmanError, OSError):
        return None


def fwman_srcversion(host: Host, kver: str) -> str | None:
    """Return the srcversion of the nvidia.ko fwman's manifest for ``kver`` names (None: no build, unreadable)."""
    from fwman.driver.build.manifest import load_manifest

    try:
        manifest = load_manifest(host, kver)
    except (FwmanError, OSError):
        return None
    entry = manifest.modules.get("nvidia") if manifest else None
    return _srcversion(host, entry.path) if entry else None


def classify(host: Host, module: str, version: str, entries: list[DkmsEntry] | None = None) -> DkmsSource:
    """Return whether registered module ``module/version`` is the owner's P2P fork or NVIDIA's stock module.

    The fork when any of: its name says p2p; its tree (``/usr/src/M-V``) has ``dkms-setup.sh`` (what the fork's
    2026 trees are reported to ship) or the fork's ``version.mk`` at its root beside ``kernel-open/`` (a git tree
    of the open modules, not NVIDIA's package layout), with a dkms.conf that is not the installer template; a
    nvidia.ko DKMS built from it (``entries``: its ``dkms status`` lines) whose srcversion is the one of fwman's
    build for that kernel (the same patched source). Else stock. Never raises.
    """
    from fwman.driver.versions import parse_version_mk

    tree = f"/usr/src/{module}-{version}"
    evidence: list[str] = []
    if "p2p" in module.lower() or "p2p" in version.lower():
        evidence.append(f"its name {module}/{version} says p2p")
    if _read(host, f"{tree}/dkms-setup.sh") is not None:
        evidence.append(f"{tree}/dkms-setup.sh (the fork's own DKMS set-up)")
    mk = _read(host, f"{tree}/version.mk")
    tree_version = None
    if mk is not None:
        with contextlib.suppress(ParseError):
            tree_version = str(parse_version_mk(mk))
    conf = _read(host, f"{tree}/dkms.conf")
    checkout = tree_version is not None and host_is_dir(host, f"{tree}/kernel-open")
    if checkout and conf is not None and not is_template(conf):
        evidence.append(f"{tree} is a git tree of the open modules (version.mk {tree_version}, kernel-open/)")
    for entry in entries or []:
        if (entry.module, entry.version) != (module, version) or entry.kernel is None:
            continue
        ours = fwman_srcversion(host, entry.kernel)
        for path in dkms_module_files(host, entry):
            theirs = _srcversion(host, path)
            if ours and theirs == ours:
                evidence.append(f"its nvidia.ko for {entry.kernel} has the srcversion of fwman's build ({ours})")
                break
    return DkmsSource(module, version, FORK if evidence else STOCK, tuple(evidence), tree_version)


def host_is_dir(host: Host, path: str) -> bool:
    """Return ``host.is_dir(path)``, False for what cannot be read."""
    try:
        return host.is_dir(path)
    except (FwmanError, OSError):
        return False


def sources(host: Host, entries: list[DkmsEntry]) -> dict[tuple[str, str], DkmsSource]:
    """Return each registered (module, version) of ``entries`` classified (:func:`classify`). Never raises."""
    return {(m, v): classify(host, m, v, entries) for m, v in sorted({(e.module, e.version) for e in entries})}


def read_tree(host: Host) -> list[DkmsEntry]:
    """Return the NVIDIA modules DKMS holds, read from its tree without running dkms (fast, for ``fwman audit``):
    each ``/var/lib/dkms/M/V`` is registered ("added"), and dkms's install link ``M/kernel-KVER-ARCH`` ->
    ``V/KVER/ARCH`` (``ln -s "$module_version/$kernelver/$arch" "$dkms_tree/$module/kernel-$kernelver-$arch"`` in
    dkms 3.0.10's install step) says it is installed for KVER. Never raises: what cannot be read is left out."""
    out: list[DkmsEntry] = []
    try:
        modules = sorted(m for m in host.listdir(paths.DKMS_TREE) if m.lower().startswith("nvidia"))
    except (FwmanError, OSError):
        return []
    for m in modules:
        base = f"{paths.DKMS_TREE}/{m}"
        try:
            names = sorted(host.listdir(base))
        except (FwmanError, OSError):
            continue
        installed: set[str] = set()
        for name in names:
            if not name.startswith("kernel-"):
                continue
            try:
                target = host.readlink(f"{base}/{name}")
            except (FwmanError, OSError):
                continue
            parts = target.strip("/").split("/")
            if len(parts) == 3 and all(parts):
                out.append(DkmsEntry(m, parts[0], parts[1], parts[2], "installed"))
                installed.add(parts[0])
        for name in names:
            if name.startswith(("kernel-", "original_module")) or name in installed:
                continue
            if host_is_dir(host, f"{base}/{name}"):
                out.append(DkmsEntry(m, name, None, None, "added"))
    return out


def builders(entries: list[DkmsEntry], kinds: dict[tuple[str, str], DkmsSource], fwman_kernels: list[str]) -> list[str]:
    """Return one line per kernel DKMS installed the fork for: whether fwman built it too, and whose copy loads
    (fwman's, through its depmod override). Pure."""
    out = []
    for e in entries:
        src = kinds.get((e.module, e.version))
        if e.kernel is None or not e.installed or src is None or src.kind != FORK:
            continue
        out.append(
            f"{e.kernel}: built twice, by DKMS ({e.module}/{e.version}, the fork) and by fwman; "
            "modprobe loads fwman's copy (its depmod override), the one the boot check verifies"
            if e.kernel in fwman_kernels
            else f"{e.kernel}: built by DKMS only ({e.module}/{e.version}, the fork): fwman's boot check "
            f"does not know it (`fwman modules build --kernel {e.kernel}` to verify and pin)"
        )
    return out


def dkms_argv(host: Host, *args: str) -> list[str]:
    """Return a dkms command line acting on ``host`` (tree options and ``--no-depmod`` on a temp root).

    On a replay (no local filesystem) the plain command line, as ``fwman capture`` recorded it: a read such as
    ``dkms status`` replays; a change never gets here (the CLI refuses it on a snapshot first).
    """
    argv = ["dkms", *args]
    if host.local_path("/") is None:
        return argv
    prefix = root_prefix(host)
    if prefix is not None:
        argv += [
            f"--dkmstree={prefix}/var/lib/dkms",
            f"--sourcetree={prefix}/usr/src",
            f"--installtree={prefix}{paths.MODULES_ROOT}",
            "--no-depmod",
        ]
    return argv


def pin_current(host: Host) -> bool:
    """Return True when fwman's apt pin is in place as this fwman writes it (it blocks the prebuilt packages
    too); False when absent, unreadable or an older fwman's text."""
    try:
        return host.exists(paths.APT_DKMS_PIN) and host.read_bytes(paths.APT_DKMS_PIN) == APT_PIN_TEXT.encode()
    except (MissingError, NotRecordedError):
        return False


def status(host: Host) -> list[DkmsEntry]:
    """Return every registered DKMS module of ``host`` ([] when dkms is not installed).

    Raises FwmanError when dkms fails, ParseError when its output is not understood.
    """
    if host.which("dkms") is None:
        return []
    result = host.run(dkms_argv(host, "status"), timeout=120)
    if result.missing:
        return []
    if not result.ok:
        raise FwmanError(f"dkms status failed: {(result.stderr or result.stdout).strip()}")
    return parse_status(result.stdout)


@dataclass
class BlockRecord:
    """What ``fwman dkms block`` removed and wrote, so ``unblock`` can undo exactly that."""

    removed: list[dict[str, str]] = field(default_factory=list)  # {"module", "version"}
    apt_pin: str | None = None
    at: str = ""


def read_block(host: Host) -> BlockRecord | None:
    """Return the block record, or None when DKMS is not blocked by fwman.

    Raises VerificationError (exit 4) when the record exists but cannot be read: it is the only note of which
    modules ``block`` removed, so "not blocked" would be a guess (and ``unblock`` could not undo it).
    """
    if not host.exists(paths.DKMS_BLOCK_STATE):
        return None
    try:
        doc = parse_json(host.read_bytes(paths.DKMS_BLOCK_STATE), "DKMS block record")
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        record = BlockRecord(**doc)
        if not isinstance(record.removed, list) or not all(
            isinstance(r, dict) and isinstance(r.get("module"), str) and isinstance(r.get("version"), str)
            for r in record.removed
        ):
            raise TypeError("'removed' is not a list of {module, version}")
        return record
    except (ValueError, TypeError, MissingError, ParseError) as e:
        why = e.detail if isinstance(e, ParseError) else str(e)
        first = why.splitlines()[0] if why else type(e).__name__
        raise VerificationError(
            f"unreadable DKMS block record {paths.DKMS_BLOCK_STATE}: {first[:120]}",
            hint="it lists the DKMS modules `fwman dkms block` removed: check it by hand (`dkms status`, "
            "/etc/apt/preferences.d/fwman-nvidia-dkms), repair or remove it, then run the command again",
        ) from e


@dataclass
class BlockPlan:
    """What ``fwman dkms block`` would do (:func:`block_plan`): ``actions`` (each ``dkms remove``, then the apt
    pin), ``forks`` (the owner's P2P forks it leaves registered), and the block ``record`` as read before it."""

    actions: list[Action]
    forks: list[DkmsSource]
    record: BlockRecord
    removes: list[tuple[str, str]]  # the (module, version) pairs the actions unregister

    def kept(self) -> list[str]:
        """Return one ``leave M/V registered (the P2P fork)`` line per fork left registered."""
        return [f"leave {src.module}/{src.version} registered (the P2P fork)" for src in self.forks]


def block_plan(host: Host) -> BlockPlan:
    """Return how to remove NVIDIA's DKMS modules for all kernels and pin the packages away (:func:`block` applies
    it; nothing is changed here). Raises VerificationError for a damaged block record."""
    from fwman.host.actions import RunCommand, WriteFile

    entries = [e for e in status(host) if is_nvidia(e)]
    kinds = sources(host, entries)
    # the owner's P2P fork registered in DKMS is theirs: the block removes NVIDIA's stock module only
    pairs = sorted(k for k, src in kinds.items() if src.kind == STOCK)
    forks = [src for src in kinds.values() if src.kind == FORK]

    def still_registered(module: str, version: str) -> Callable[[Host], bool]:
        return lambda h: any((e.module, e.version) == (module, version) for e in status(h))

    actions: list[Action] = [
        RunCommand(
            dkms_argv(host, "remove", f"{m}/{v}", "--all"),
            still_registered(m, v),
            reason=f"unregister {m}/{v} from DKMS for every kernel",
        )
        for m, v in pairs
    ]
    actions.append(WriteFile(paths.APT_DKMS_PIN, APT_PIN_TEXT.encode()))
    return BlockPlan(actions, forks, read_block(host) or BlockRecord(), pairs)


def block(host: Host, plan: BlockPlan, tell: Callable[[str], None] | None = None) -> list[str]:
    """Apply ``plan`` (:func:`block_plan`): record what it removes, then remove and pin; return what was done.

    Re-running is harmless (each step checks whether it is still needed). Raises FwmanError when dkms fails.
    """
    from fwman.driver.build.manifest import now_iso
    from fwman.host.actions import apply_all

    if tell is not None:
        for src in plan.forks:
            tell(f"left alone: {src.module}/{src.version}, the P2P fork ({'; '.join(src.evidence)})")
    record = plan.record
    known = {(r["module"], r["version"]) for r in record.removed}
    fresh = [{"module": m, "version": v} for m, v in plan.removes if (m, v) not in known]
    # The record is written BEFORE the first `dkms remove`: a failure or Ctrl-C halfway must still leave the
    # note of what is (or is about to be) removed, since `dkms status` no longer lists a removed module and
    # `unblock` could not register it again. `unblock` skips what is still registered, so listing a module
    # whose removal never ran is harmless. A second block with nothing new leaves the record (and its date).
    if fresh or record.apt_pin != paths.APT_DKMS_PIN or not host.exists(paths.DKMS_BLOCK_STATE):
        record.removed += fresh
        record.apt_pin = paths.APT_DKMS_PIN
        record.at = now_iso()
        host.write_bytes(paths.DKMS_BLOCK_STATE, (json.dumps(asdict(record), indent=2) + "\n").encode())
    return apply_all(host, plan.actions, tell)


def unblock_plan(host: Host) -> tuple[list[Action], list[str]] | None:
    """Return the actions that undo ``block`` (the apt pin goes, each module it removed is added back when its
    source is still in ``/usr/src``, the record goes last) and a ``skip M/V: why`` line for each module that
    cannot come back; None when DKMS is not blocked by fwman (nothing to undo: a second unblock is a no-op, like
    every other undo). Raises VerificationError for a damaged record."""
    record = read_block(host)
    if record is None:
        return None
    actions, skipped = _unblock_plan(host, record)
    # the modules that cannot come back are said in the dry run and the run alike ("would skip", "skip")
    return actions, [f"skip {s}" for s in skipped]


def unblock(host: Host, actions: list[Action], left: list[str], tell: Callable[[str], None] | None = None) -> list[str]:
    """Apply :func:`unblock_plan`'s ``actions``; return what was done, then the ``left`` lines (each also said
    through ``tell`` as it happens). Raises FwmanError when dkms fails."""
    from fwman.host.actions import apply_all

    done = apply_all(host, actions, tell)
    if tell is not None:
        for line in left:
            tell(line)
    return done + left


def _unblock_plan(host: Host, record: BlockRecord) -> tuple[list[Action], list[str]]:
    """Return the actions that undo ``record`` and the modules that cannot be added back (why, one line each)."""
    from fwman.host.actions import RemoveFile, RunCommand

    registered = {(e.module, e.version) for e in status(host)}
    actions: list[Action] = [RemoveFile(paths.APT_DKMS_PIN)]
    # the record goes last (see below), once every module it names is back: an unblock that fails halfway
    # keeps it, and running unblock again finishes the job
    skipped: list[str] = []
    for r in record.removed:
        m, v = r["module"], r["version"]
        if (m, v) in registered:  # never removed (a block interrupted before it), or added back by hand
            continue
        if not host.exists(f"/usr/src/{m}-{v}/dkms.conf"):
            skipped.append(f"{m}/{v}: its source /usr/src/{m}-{v} is gone, reinstall its package to get it back")
            continue
        add = dkms_argv(host, "add", f"{m}/{v}")
        actions.append(RunCommand(add, _not_in(registered, (m, v)), reason="register it with DKMS again"))
    actions.append(RemoveFile(paths.DKMS_BLOCK_STATE, "the block record"))
    return actions, skipped


def _not_in(registered: set[tuple[str, str]], key: tuple[str, str]) -> Callable[[Host], bool]:
    return lambda _h: key not in registered
