"""The pre-flight: build the patched modules for a kernel apt is about to install, before it is installed.

For each kernel release a simulated upgrade (``apt-get -s dist-upgrade``) would install and that is not
installed yet, and for each kernel fwman holds back:

1. its headers package and the packages the headers tree needs beside it (``linux-headers-*-common``,
   ``linux-kbuild-*``: :func:`fwman.driver.aptsim.is_build_dependency`) are downloaded with ``apt-get download``
   into ``/var/cache/fwman/preflight/KVER/debs`` (no image, nothing installed);
2. they are unpacked with ``dpkg-deb -x`` into ``/var/cache/fwman/preflight/KVER/root``; the headers' absolute
   links (``/lib/modules/KVER/build``, ``source``) and the ``include /usr/src/...`` of Debian's arch Makefile
   are followed into that root;
3. the module source the kernel hook would build (the remembered or configured one, at its cached commit) is
   built against them with the build pipeline and its object cache, the patches of ``/etc/fwman/patches.d``
   that match the kernel applied, and the modules' vermagic checked;
4. the verdict is recorded per (kernel, headers version, source commit, patches, compiler) in
   ``/var/lib/fwman/preflight.json``: the same question asked again is answered from the record.

Nothing is written outside fwman's state, cache and log directories, and the scratch directory of a kernel
goes once its verdict is in (its log stays: ``/var/log/fwman/preflight-KVER.log``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fwman.core import bounded, clock, names, paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.driver import aptsim, nova_core
from fwman.driver.build import compat
from fwman.driver.build import patches as kpatches
from fwman.driver.build.failure import BuildFailure
from fwman.driver.build.kbuild import KernelTree, compile_for_kernel
from fwman.driver.build.manifest import now_iso
from fwman.driver.build.patches import KernelPatch
from fwman.driver.build.progress import ProgressSink
from fwman.driver.build.source import Source
from fwman.driver.headers import advise_host
from fwman.driver.kernels import installed_kernels, version_key
from fwman.driver.localfs import local_dir, root_prefix
from fwman.host.actions import Tell, WriteFile, silent
from fwman.host.base import Host
from fwman.host.capped import MAX_RECORD, MAX_TEXT_FILE, read_capped, read_text_capped
from fwman.host.confine import inside_target, links_leaving, resolve_in_root

SCHEMA = "fwman.preflight-state/1"
SAFE, BROKEN, UNCHECKED = "safe", "will-not-build", "could-not-check"
#: a header tree is a handful of packages; more is a dependency loop or a misread field
MAX_PACKAGES = 8


@dataclass
class KernelOffer:
    """A kernel release apt would install next (or one fwman holds back), and its packages: name -> version."""

    kernel: str
    packages: dict[str, str] = field(default_factory=dict)
    held: bool = False  #: fwman's pin holds it back (apt no longer offers it: the hold record's versions)

    def headers(self, host: Host) -> tuple[str, str | None]:
        """Return (the headers package of this kernel, the version apt offers of it, None: its candidate)."""
        mine = ((n, v) for n, v in self.packages.items() if aptsim.kernel_of_package(n) == ("headers", self.kernel))
        return next(mine, None) or (advise_host(host, self.kernel).package, None)


def simulate_argv(host: Host) -> list[str]:
    """Return the simulated upgrade: ``apt-get -s dist-upgrade`` (new kernels come with a metapackage's upgrade,
    which ``upgrade`` keeps back), on a temp root with its own lists, status and preferences."""
    return ["apt-get", "-s", "-o", "Debug::NoLocking=1", *aptsim.apt_root_options(root_prefix(host)), "dist-upgrade"]


def _apt_error(result_stderr: str, result_stdout: str, rc: int) -> str:
    said = [ln for ln in (result_stderr + "\n" + result_stdout).splitlines() if ln.startswith("E:")]
    tail = said or [ln for ln in (result_stderr or result_stdout).strip().splitlines()][-1:]
    return "; ".join(tail)[:500] or f"exit {rc}"


def offered_kernels(host: Host) -> tuple[list[KernelOffer], aptsim.Simulation]:
    """Return the kernel releases the simulated upgrade would install that are not installed, oldest first, and
    the simulation itself.

    Raises MissingError without apt-get, FwmanError when apt-get fails (its error), ParseError when its output
    has an operation line that cannot be read.
    """
    result = host.run(simulate_argv(host), timeout=300) if host.which("apt-get") is not None else None
    if result is None or result.missing:
        raise MissingError("apt-get not found: the pre-flight asks apt which kernels it would install")
    if not result.ok:
        raise FwmanError(
            f"`{shlex.join(simulate_argv(host))}` failed: {_apt_error(result.stderr, result.stdout, result.rc)}",
            hint="run it by hand; `apt-get update` may be needed",
        )
    sim = aptsim.parse_simulation(result.stdout)
    installed = set(installed_kernels(host))
    offers: dict[str, KernelOffer] = {}
    kernel_changes = [(aptsim.kernel_of_package(c.package), c) for c in sim.installs() if c.version is not None]
    # a kernel lands with its image: headers alone (a headers metapackage) are not a kernel that boots
    for kind, change in kernel_changes:
        # a release that is not one (a hostile archive's package name) never becomes a scratch directory
        if kind is not None and kind[0] == "image" and kind[1] not in installed and names.is_kernel_release(kind[1]):
            offers.setdefault(kind[1], KernelOffer(kind[1])).packages[change.package] = str(change.version)
    for kind, change in kernel_changes:
        if kind is not None and kind[0] == "headers" and kind[1] in offers:
            offers[kind[1]].packages[change.package] = str(change.version)
    return [offers[k] for k in sorted(offers, key=version_key)], sim


# -- the record ---------------------------------------------------------------------------------------------------
@dataclass
class KernelVerdict:
    """What the pre-flight found for one kernel: safe to install, will not build (where), or could not check."""

    kernel: str
    status: str  #: SAFE | BROKEN | UNCHECKED
    message: str
    key: str = ""  #: what the verdict holds for (kernel, headers version, commit, patches, compiler)
    headers: dict[str, str] = field(default_factory=dict)  #: the packages built against: name -> version
    commit: str | None = None
    source: str | None = None  #: the source's label
    patches: list[str] = field(default_factory=list)
    file: str | None = None
    line: int | None = None
    error: str | None = None
    phase: str | None = None
    log: str | None = None
    object_cache_hit: bool | None = None
    seconds: float | None = None
    at: str = ""
    #: answered from the record of an earlier pre-flight (nothing downloaded or built this time)
    cached: bool = False
    #: CONFIG_NOVA_CORE in the headers' .config ("m", "y"; None: unset or not read)
    nova_config: str | None = None
    #: why nova_core would take the GPU when this kernel boots, judged against today's modprobe files (not recorded)
    nova_problem: str | None = None

    @property
    def where(self) -> str:
        """Return ``FILE:LINE`` (or ``FILE``) of the first error, '' when none is known."""
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def line_text(self) -> str:
        """Return the one line a person reads: "safe to install", "will not build: FILE:LINE: error", ..."""
        if self.status == SAFE:
            return f"builds, but NOT safe to boot: {self.nova_problem}" if self.nova_problem else "safe to install"
        if self.status == BROKEN:
            where = f"{self.where}: " if self.where else ""
            return f"will not build: {where}{self.error or self.message}"
        return f"could not check: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """Return the record's (and the JSON document's) entry for this kernel."""
        return {
            "kernel": self.kernel,
            "status": self.status,
            "verdict": self.line_text(),
            "message": self.message,
            "key": self.key,
            "headers": dict(sorted(self.headers.items())),
            "commit": self.commit,
            "source": self.source,
            "patches": list(self.patches),
            "failure": None
            if self.status != BROKEN
            else {"file": self.file, "line": self.line, "error": self.error, "phase": self.phase},
            "log": self.log,
            "object_cache_hit": self.object_cache_hit,
            "seconds": round(self.seconds, 1) if self.seconds is not None else None,
            "at": self.at,
            "cached": self.cached,
            "nova_core": None
            if self.nova_config not in ("m", "y")
            else {"config": self.nova_config, "built_in": self.nova_config == "y", "problem": self.nova_problem},
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> KernelVerdict:
        """Return the verdict a record entry holds. Raises ParseError when it is not one."""
        status = doc.get("status")
        if status not in (SAFE, BROKEN, UNCHECKED) or not isinstance(doc.get("kernel"), str):
            raise ParseError(paths.PREFLIGHT_STATE, "kernels", "an entry without kernel and status")
        if not names.is_kernel_release(doc["kernel"]):
            raise ParseError(
                paths.PREFLIGHT_STATE, f"kernels.{doc['kernel']!r}", "not a kernel release (as --kernel checks one)"
            )
        raw = doc.get("failure")
        failure: dict[str, Any] = raw if isinstance(raw, dict) else {}
        line = failure.get("line")
        seconds = doc.get("seconds")
        nova = doc.get("nova_core")
        nova_config = nova.get("config") if isinstance(nova, dict) else None

        return cls(
            kernel=str(doc["kernel"]),
            status=str(status),
            message=str(doc.get("message", "")),
            key=str(doc.get("key", "")),
            headers={str(k): str(v) for k, v in (doc.get("headers") or {}).items()},
            commit=str(doc["commit"]) if doc.get("commit") else None,
            source=str(doc["source"]) if doc.get("source") else None,
            patches=[str(p) for p in doc.get("patches") or []],
            file=str(failure["file"]) if failure.get("file") else None,
            line=int(line) if isinstance(line, int) else None,
            error=str(failure["error"]) if failure.get("error") else None,
            phase=str(failure["phase"]) if failure.get("phase") else None,
            log=str(doc["log"]) if doc.get("log") else None,
            object_cache_hit=bool(doc["object_cache_hit"]) if doc.get("object_cache_hit") is not None else None,
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            at=str(doc.get("at", "")),
            nova_config=nova_config if isinstance(nova_config, str) else None,
        )


@dataclass
class State:
    """``/var/lib/fwman/preflight.json``: the verdict per kernel, and what the last run found."""

    kernels: dict[str, KernelVerdict] = field(default_factory=dict)
    last_at: str | None = None
    last_kernels: list[str] = field(default_factory=list)  #: the kernels the last run looked at

    def last(self) -> list[KernelVerdict]:
        """Return the verdicts of the last run's kernels, in its order."""
        return [self.kernels[k] for k in self.last_kernels if k in self.kernels]

    def to_bytes(self) -> bytes:
        """Return the state file's bytes."""
        doc = {
            "schema": SCHEMA,
            "last_run": {"at": self.last_at, "kernels": self.last_kernels},
            "kernels": {k: self.kernels[k].to_dict() for k in sorted(self.kernels, key=version_key)},
        }
        return (json.dumps(doc, indent=2) + "\n").encode()


def read_state(host: Host) -> State:
    """Return the pre-flight record (empty when there is none). Raises ParseError when it is damaged."""
    if not host.exists(paths.PREFLIGHT_STATE):
        return State()
    try:
        data = read_capped(host, paths.PREFLIGHT_STATE, MAX_RECORD, "pre-flight record")
        doc = parse_json(data, paths.PREFLIGHT_STATE)
    except MissingError as e:
        raise ParseError(paths.PREFLIGHT_STATE, "file", e.message) from e
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), dict):
        raise ParseError(paths.PREFLIGHT_STATE, "kernels", "not a table of kernel releases")
    state = State()
    for entry in doc["kernels"].values():
        if not isinstance(entry, dict):
            raise ParseError(paths.PREFLIGHT_STATE, "kernels", "an entry that is not an object")
        verdict = KernelVerdict.from_dict(entry)
        state.kernels[verdict.kernel] = verdict
    raw = doc.get("last_run")
    last: dict[str, Any] = raw if isinstance(raw, dict) else {}
    state.last_at = str(last["at"]) if last.get("at") else None
    state.last_kernels = [str(k) for k in last.get("kernels") or []]
    return state


def state_action(state: State) -> WriteFile:
    """Return the action that writes ``state`` to the record."""
    return WriteFile(paths.PREFLIGHT_STATE, state.to_bytes())


def verdict_key(kver: str, headers_version: str | None, source_id: str, patches: Sequence[KernelPatch],
                compiler: str) -> str:  # fmt: skip
    """Return what a verdict holds for: the kernel, its headers' version, the source, the patches, fwman's compat
    patches (which of them apply is decided by the headers, part of the key already) and the compiler (any of them
    changed is a new question)."""
    shipped = ",".join(p.sha256 for p in compat.shipped_patches())
    parts = [kver, headers_version or "", source_id, ",".join(p.sha256 for p in patches), shipped, compiler]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


# -- fetching and unpacking the headers ----------------------------------------------------------------------------
def scratch_dir(kver: str) -> str:
    """Return the pre-flight's scratch directory of ``kver`` (downloads, unpacked root, build tree; removed
    afterwards). Raises UsageError when ``kver`` is not a kernel release: it is one path component, never more."""
    return f"{paths.PREFLIGHT_DIR}/{names.kernel_release(kver, 'kernel release')}"


def log_path(kver: str) -> str:
    """Return the pre-flight's build log of ``kver``. Raises UsageError when ``kver`` is not a kernel release."""
    return f"{paths.LOG_DIR}/preflight-{names.kernel_release(kver, 'kernel release')}.log"


def candidate_version(host: Host, package: str) -> str | None:
    """Return the version apt would install of ``package`` (``apt-cache show --no-all-versions``), or None."""
    argv = ["apt-cache", *aptsim.apt_root_options(root_prefix(host)), "show", "--no-all-versions", package]
    result = host.run(argv, timeout=120)
    if not result.ok:
        return None
    try:
        return aptsim.parse_control(result.stdout).get("Version")
    except ParseError:
        return None


def _deb_fields(host: Host, deb: str) -> dict[str, str]:
    result = host.run(["dpkg-deb", "-f", local_dir(host, deb), "Package", "Version", "Depends"], timeout=60)
    if not result.ok:
        raise FwmanError(f"dpkg-deb cannot read {deb}: {result.stderr.strip()[-300:]}")
    return aptsim.parse_control(result.stdout)


def download_headers(host: Host, package: str, version: str | None, debs: str, tell: Tell = silent) -> dict[str, str]:
    """Download ``package`` (at ``version``, else its candidate) and the build dependencies of its tree into
    ``debs``; return {package: version} of what is there.

    Raises MissingError without apt-get or dpkg-deb, FwmanError when apt cannot download one (its error).
    """
    for tool in ("apt-get", "dpkg-deb"):
        if host.which(tool) is None:
            raise MissingError(f"{tool} not found: the pre-flight downloads and unpacks header packages with it")
    host.mkdir(debs)
    wanted: list[tuple[str, str | None]] = [(package, version)]
    got: dict[str, str] = {}
    files: dict[str, str] = {}
    while wanted:
        name, ver = wanted.pop(0)
        if name in got:
            continue
        if len(got) >= MAX_PACKAGES:
            raise FwmanError(f"the headers of {package} need more than {MAX_PACKAGES} packages: not a header tree")
        spec = f"{name}={ver}" if ver else name
        tell(f"downloading {spec}")
        before = set(host.listdir(debs))
        argv = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root"]
        result = host.run(
            [*argv, *aptsim.apt_root_options(root_prefix(host)), spec], cwd=local_dir(host, debs), timeout=1800
        )
        if not result.ok:
            raise FwmanError(f"`apt-get download {spec}` failed: {_apt_error(result.stderr, result.stdout, result.rc)}")
        new = sorted(n for n in set(host.listdir(debs)) - before if n.endswith(".deb"))
        candidates = new or sorted(n for n in host.listdir(debs) if n.startswith(f"{name}_") and n.endswith(".deb"))
        if not candidates:
            raise FwmanError(f"`apt-get download {spec}` left no {name}_*.deb in {debs}")
        fields = _deb_fields(host, f"{debs}/{candidates[0]}")
        got[fields.get("Package", name)] = fields.get("Version", ver or "")
        files[name] = candidates[0]
        for group in aptsim.parse_depends(fields.get("Depends", "")):
            first = next((r for r in group if aptsim.is_build_dependency(r.package)), None)
            if first is not None and first.package not in got:
                wanted.append((first.package, first.version if first.op == "=" else None))
    return got


def headers_nova_config(host: Host, build: str) -> str | None:
    """Return ``CONFIG_NOVA_CORE`` of the kernel whose headers tree is ``build`` (its ``.config``, which Debian's
    headers package ships), None when unset or unreadable: the pre-flight's view of nova_core before the kernel
    is installed. Never raises."""
    try:
        # a headers package's file: bounded (Debian's amd64 .config is about 280 KB)
        config = read_text_capped(host, f"{build}/.config", 4 << 20, "kernel configuration")
        return nova_core.parse_config_symbol(config)
    except (FwmanError, OSError):
        return None


def judge_nova_core(host: Host, verdict: KernelVerdict) -> None:
    """Set ``verdict.nova_problem`` from its kernel's recorded ``CONFIG_NOVA_CORE`` and today's modprobe files."""
    kernel = nova_core.NovaKernel(verdict.kernel, verdict.nova_config, "its headers' .config", None)
    verdict.nova_problem = nova_core.problem(kernel, nova_core.blacklist_files(host))


def unpack_headers(host: Host, kver: str, debs: str, root: str, workdir: str, log: str) -> KernelTree:
    """Unpack every package of ``debs`` into ``root`` (``dpkg-deb -x``) and return the kernel tree to build in.

    Raises MissingError when the packages hold no ``lib/modules/KVER/build`` with an ``include/`` directory,
    FwmanError when dpkg-deb fails.
    """
    host.remove_tree(root)
    host.mkdir(root)
    for name in sorted(host.listdir(debs)):
        if not name.endswith(".deb"):
            continue
        result = host.run(["dpkg-deb", "-x", local_dir(host, f"{debs}/{name}"), local_dir(host, root)], timeout=600)
        if not result.ok:
            raise FwmanError(f"`dpkg-deb -x {name}` failed: {result.stderr.strip()[-300:]}")
    _confine_links(host, kver, root)
    found: dict[str, str] = {}
    for base in ("/lib/modules", "/usr/lib/modules"):
        for slot in ("build", "source"):
            # the links are followed inside the scratch root (an absolute target is the package's path, never
            # this machine's), so the verdict is about these headers and nothing installed is touched
            path = resolve_in_root(host, root, f"{base}/{kver}/{slot}")
            if host.is_dir(path):
                found.setdefault(slot, path)
    build, source = found.get("build"), found.get("source")
    if build is None or not host.is_dir(resolve_in_root(host, root, f"{build.removeprefix(root)}/include")):
        raise MissingError(f"the header packages of {kver} hold no lib/modules/{kver}/build with an include/ directory")
    _follow_makefile_includes(host, root, build)
    return KernelTree(build, source if source and host.is_dir(f"{source}/include") else None, workdir, log)


def _confine_links(host: Host, kver: str, root: str) -> None:
    """Keep the build inside the unpacked packages: an absolute link (``build -> /usr/src/linux-headers-KVER``)
    is pointed at the same path inside ``root``; a relative one whose ``..`` climb out of ``root`` is refused.

    Raises FwmanError naming the link (the kernel is then "could not check": such packages are not headers).
    """
    for link, target in links_leaving(host, root, root):
        if not target.startswith("/"):
            raise FwmanError(
                f"the header packages of {kver} hold a link out of their tree: {link.removeprefix(root)} -> {target}"
            )
        host.symlink(inside_target(root, link, target), link)  # a scratch file: the make that follows it stays in


_INCLUDE = re.compile(r"^(?P<head>\s*-?include\s+)(?P<path>/\S+)(?P<tail>\s*)$", re.MULTILINE)


def _follow_makefile_includes(host: Host, root: str, build: str) -> None:
    """Point the absolute ``include`` lines of the headers' Makefile into ``root`` (Debian's arch Makefile is one
    line, ``include /usr/src/linux-headers-VER-common/Makefile``, which names the installed path)."""
    makefile = resolve_in_root(host, root, f"{build.removeprefix(root)}/Makefile")
    if not host.exists(makefile):
        return
    text = read_text_capped(host, makefile, MAX_TEXT_FILE, "header Makefile")

    def inside(m: re.Match[str]) -> str:
        path = resolve_in_root(host, root, m.group("path"))  # the packages' path, never this machine's
        if host.exists(path):
            return f"{m.group('head')}{local_dir(host, path)}{m.group('tail')}"
        return m.group(0)

    changed = _INCLUDE.sub(inside, text)
    if changed != text:
        host.unlink(makefile)  # a file of the scratch root: written anew, never through a link
        host.write_bytes(makefile, changed.encode())


# -- one kernel ---------------------------------------------------------------------------------------------------
#: the causes of a failed build that are this machine's, not the kernel's or the source's (build/failure.py)
MACHINE_CAUSES = ("missing-tool", "missing-library")


def machine_lacks(failure: BuildFailure | None) -> bool:
    """Return True when ``failure`` says this machine lacks what the build runs (a command not found, a program
    without its shared library): the pre-flight then could not check the kernel, which is not "will not build".
    Pure."""
    return failure is not None and failure.cause in MACHINE_CAUSES


def kernel_patches(host: Host, kver: str) -> list[KernelPatch]:
    """Return the patches of ``/etc/fwman/patches.d`` that apply to ``kver``. Raises ParseError for a bad one."""
    return [p for p in kpatches.load_patches(host) if p.applies_to(kver)]


def cached_verdict(state: State, key: str, kver: str) -> KernelVerdict | None:
    """Return the recorded verdict of ``kver`` when it holds for ``key`` (and was a verdict), else None."""
    verdict = state.kernels.get(kver)
    if verdict is None or verdict.key != key or verdict.status == UNCHECKED:
        return None
    verdict.cached = True
    return verdict


def check_kernel(
    host: Host,
    offer: KernelOffer,
    source: Source,
    patches: Sequence[KernelPatch],
    compiler: str,
    key: str,
    tell: Tell = silent,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
) -> KernelVerdict:
    """Download, unpack and build for ``offer``'s kernel; return the verdict (never raises for the kernel's own
    problems: a download that fails is "could not check", a build that fails "will not build").

    Raises FwmanError for what needs a person (disk, permissions, no compiler).
    """
    from fwman.driver.kmod.kofile import read_module

    kver = offer.kernel
    started = clock.monotonic()
    verdict = KernelVerdict(kver, UNCHECKED, "", key, commit=source.commit or source.source_id, source=source.label)
    verdict.patches = [p.name for p in patches]
    verdict.at = now_iso()
    scratch = scratch_dir(kver)
    package, version = offer.headers(host)
    try:
        try:
            verdict.headers = download_headers(host, package, version, f"{scratch}/debs", tell)
            tree = unpack_headers(host, kver, f"{scratch}/debs", f"{scratch}/root", f"{scratch}/build", log_path(kver))
        except FwmanError as e:
            verdict.message = e.message
            return verdict
        verdict.nova_config = headers_nova_config(host, tree.build)
        # fwman's compat patches by what these headers declare, after the owner's (who wins: compat.select)
        roots = [r for r in (tree.source, tree.build) if r]
        patches = [*patches, *compat.select(host, kver, patches, roots, kpatches.masked_names(host), tell)]
        verdict.patches = [p.name for p in patches]
        tell(f"building {source.label} against the headers of {kver} (not installed)")
        result = compile_for_kernel(host, source, kver, tell, jobs, progress, patches, headers=tree)
        verdict.log, verdict.object_cache_hit = result.log_path, result.cache_hit
        if not result.ok:
            failure = result.failure
            if failure is not None and machine_lacks(failure):
                # this machine lacks what the build runs: no verdict on the kernel (and never a reason to hold it)
                hint = f"; {failure.hint}" if failure.hint else ""
                verdict.message = f"the build cannot run here: {failure.message}{hint}"
                return verdict
            verdict.status = BROKEN
            if failure is not None:
                verdict.file, verdict.line = failure.file, failure.line
                verdict.error, verdict.phase = failure.message, failure.phase
            verdict.message = f"the patched modules do not build for {kver}"
            return verdict
        for name, path in result.modules.items():
            info = read_module(read_capped(host, path, bounded.MODULE.output, "built module"))
            if info.kernel_release != kver:
                verdict.status, verdict.error = BROKEN, f"{name}.ko has vermagic {info.vermagic!r}, not for {kver}"
                verdict.message = verdict.error
                return verdict
        verdict.status = SAFE
        hit = "object cache hit" if result.cache_hit else "full build"
        verdict.message = f"the patched modules build for {kver} ({hit})"
        return verdict
    finally:
        verdict.seconds = clock.monotonic() - started
        host.remove_tree(scratch)
