"""Build once per fleet: a kernel's installed patched modules as a bundle, and the import that checks it.

DKMS has ``mktarball``/``ldtarball`` and akmods builds kmod packages; fwman's equivalent is a bundle: one
uncompressed tar file (``fwman modules export --kernel KVER -o FILE``) holding

* ``bundle.json``: schema ``fwman.modules-bundle/1``, the kernel release and ``vermagic``, fork, branch, commit,
  source, compiler, the modules' signature state, and per module its SHA-256 and size;
* ``modules/<name>.ko``: the five modules exactly as installed;
* ``bundle.json.sig`` (optional): an Ed25519 signature over the exact bytes of ``bundle.json``, in the catalog's
  signature format (made and checked by :mod:`fwman.app.bundle` with :mod:`fwman.firmware.catalog.signing`:
  driver/ does not import its sibling firmware/), so it covers every module through their hashes.

:func:`import_bundle` refuses a bundle for another kernel, a module whose hash or ``vermagic`` does not match,
a bundle whose signature the caller's check refuses (:mod:`fwman.app.bundle`: unsigned or signed by an
unknown key when the host trusts bundle keys, ``/etc/fwman/bundle-keys.d/*.pub``), and unsigned modules on a
host with Secure Boot on and no signing key. It then installs through the same staged install, ``depmod``,
verification, manifest and boot-safety check as a build (:mod:`fwman.driver.build.install`,
:func:`fwman.driver.boot.pin.ensure_safe_boot`); the manifest's ``source`` says ``imported from ...``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fwman.core import names, paths
from fwman.core.errors import FwmanError, MissingError, ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json
from fwman.driver.kmod.secureboot import secure_boot_enabled
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.driver.boot.pin import BootCheck
    from fwman.driver.build.manifest import Manifest

SCHEMA = "fwman.modules-bundle/1"
DOC_NAME = "bundle.json"
SIG_NAME = "bundle.json.sig"
MODULES_PREFIX = "modules/"
WHAT = "module bundle"
#: a bundle of the real driver is ~100 MiB; anything far beyond that is not one
MAX_MEMBER = 512 * 1024 * 1024
#: bundle.json names five modules and their hashes: a few KB
MAX_DOC = 1024 * 1024
#: bundle.json, its signature and the modules (five for the open driver); a bundle never holds many more
MAX_MEMBERS = 64
#: a module's name as the kernel knows it (MODULE_NAME_LEN is 56 with the NUL): it becomes modules/<name>.ko
_MODULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,54}")
#: a git commit id, or "tree:<sha256>" for a build from a local directory (driver/build/source.py's source id)
_COMMIT = re.compile(r"(?:tree:)?[0-9a-f]{7,64}")

Report = Callable[[str], None]
#: returns the bundle.json.sig document for the bytes of bundle.json (the catalog's Ed25519 format)
Signer = Callable[[bytes], bytes]


def _nothing(_: str) -> None:
    return None


@dataclass
class BundleModule:
    """One module of a bundle: its file's SHA-256 and size."""

    sha256: str
    size: int


@dataclass
class BundleDoc:
    """The document ``bundle.json``: what was built, how, and what every module hashes to."""

    kernel: str
    vermagic: str
    modules: dict[str, BundleModule]
    fork: str | None = None
    branch: str | None = None
    commit: str | None = None
    source: str | None = None
    compiler: str | None = None
    #: the hash the modules are signed with (manifest ``signed``), or None when they are unsigned
    signed: str | None = None
    #: issuer common name of the modules' signature, when signed
    signer: str | None = None
    built_at: str | None = None
    exported_at: str | None = None
    exported_from: str | None = None
    schema: str = SCHEMA

    def to_json(self) -> bytes:
        """Return the document as UTF-8 JSON bytes (stable key order: the signature covers these bytes)."""
        doc = asdict(self)
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> BundleDoc:
        """Return the document in ``data``. Raises ParseError naming the field that is wrong."""
        doc = parse_json(data, WHAT, DOC_NAME)
        if not isinstance(doc, dict):
            raise ParseError(WHAT, DOC_NAME, "not a JSON object")
        if doc.get("schema") != SCHEMA:
            raise ParseError(WHAT, "schema", f"expected {SCHEMA}, got {str(doc.get('schema'))[:40]!r}")
        raw = doc.get("modules")
        if not isinstance(raw, dict) or not raw:
            raise ParseError(WHAT, "modules", "missing or empty")
        modules: dict[str, BundleModule] = {}
        for name, entry in raw.items():
            if not isinstance(entry, dict):
                raise ParseError(WHAT, f"modules.{name}", "not an object")
            digest, size = entry.get("sha256"), entry.get("size")
            if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ParseError(WHAT, f"modules.{name}.sha256", "not a lowercase SHA-256 hex digest")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ParseError(WHAT, f"modules.{name}.size", "not a non-negative integer")
            if not _MODULE_NAME.fullmatch(name):
                raise ParseError(WHAT, "modules", f"bad module name {str(name)[:40]!r}")
            if name not in MODULE_NAMES:
                # depmod would resolve any name to updates/fwman/<name>.ko: a bundle carrying ext4.ko would
                # replace the host's ext4 unseen. Only the modules fwman builds may be installed.
                raise ParseError(
                    WHAT,
                    "modules",
                    f"{str(name)[:40]!r} is not one of the NVIDIA modules fwman builds ({', '.join(MODULE_NAMES)})",
                )
            modules[str(name)] = BundleModule(digest, size)

        def text(key: str, required: bool = False, check: Callable[[str, str], str] = names.one_line) -> str | None:
            """Return field ``key``, held to ``check``: the CLI's rule for the same field (every text field is
            at least one line without control characters: it is printed by status and audit)."""
            value = doc.get(key)
            if value is None and not required:
                return None
            if not isinstance(value, str) or (required and not value):
                raise ParseError(WHAT, key, "missing or not a string" if required else "not a string")
            try:
                if value:  # an empty optional field says "unknown", as export writes it
                    check(value, key)
            except UsageError as e:
                raise ParseError(WHAT, key, f"{e.message} ({e.hint})" if e.hint else e.message) from e
            return value

        kernel = text("kernel", True, check=lambda value, _key: value) or ""  # the --kernel rule, just below
        try:
            # the kernel release becomes /lib/modules/<kver> and /var/lib/fwman/modules/<kver>.* exactly as
            # --kernel does, so it passes the same check; a bad one is a bad file (exit 4), as any other field
            names.kernel_release(kernel, option="kernel")
        except UsageError as e:
            raise ParseError(WHAT, "kernel", f"{kernel[:60]!r} is not a kernel release ({e.hint})") from e
        return cls(
            kernel=kernel,
            vermagic=text("vermagic", True) or "",
            modules=modules,
            fork=text("fork", check=_fork),
            branch=text("branch", check=names.branch_name),
            commit=text("commit", check=_commit),
            source=text("source"),
            compiler=text("compiler"),
            signed=text("signed"),
            signer=text("signer"),
            built_at=text("built_at"),
            exported_at=text("exported_at"),
            exported_from=text("exported_from"),
        )


def _fork(value: str, option: str) -> str:
    """Return ``value`` when it is a fork as ``--fork`` takes it: a configured name or a repository URL."""
    try:
        return names.fork_name(value, option)
    except UsageError:
        return names.fork_url(value, option)


def _commit(value: str, option: str) -> str:
    """Return ``value`` when it is a source id as builds record it: a git commit id (7 to 64 lowercase hex
    digits), or ``tree:`` and a SHA-256. Raises UsageError."""
    if not _COMMIT.fullmatch(value):
        raise UsageError(
            f"{option} {value[:60]!r}: not a commit id", hint="7 to 64 lowercase hex digits, or tree:<sha256>"
        )
    return value


@dataclass
class Bundle:
    """A bundle read from its file: the document, its exact bytes, the signature document, the module files."""

    doc: BundleDoc
    doc_bytes: bytes
    signature: bytes | None
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Return the SHA-256 of ``bundle.json`` (which names every module's hash): the bundle's identity."""
        return hashlib.sha256(self.doc_bytes).hexdigest()


# -- the file format (pure) -----------------------------------------------------------------------------------
def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0  # the same modules give the same bundle bytes
    return info, io.BytesIO(data)


def pack(doc_bytes: bytes, files: dict[str, bytes], signature: bytes | None = None) -> bytes:
    """Return the bytes of a bundle file (a plain tar: ``.ko`` files are what they are, no compression step)."""
    out = io.BytesIO()
    with tarfile.TarFile(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar.addfile(*_member(DOC_NAME, doc_bytes))
        if signature is not None:
            tar.addfile(*_member(SIG_NAME, signature))
        for name in sorted(files):
            tar.addfile(*_member(f"{MODULES_PREFIX}{name}.ko", files[name]))
    return out.getvalue()


def _headers(tar: tarfile.TarFile, size: int) -> dict[str, tarfile.TarInfo]:
    """Return {name: header} of every member of ``tar`` (``size`` bytes), reading headers only, never data.

    Raises ParseError for a member that is not a regular file, a sparse member (its stated size is not what
    the file holds: a few KB could expand to GiB), a name twice, more than MAX_MEMBERS members, a member over
    MAX_MEMBER bytes, or one whose data runs past the end of the file.
    """
    headers: dict[str, tarfile.TarInfo] = {}
    for info in tar:
        name = info.name[:60]
        if len(headers) >= MAX_MEMBERS:
            raise ParseError(WHAT, "file", f"more than {MAX_MEMBERS} members: not a module bundle")
        if not info.isreg():
            raise ParseError(WHAT, name, "not a regular file (links and directories are refused)")
        if info.issparse():
            raise ParseError(WHAT, name, "a sparse member (fwman never writes one): refused unread")
        if info.name in headers:
            raise ParseError(WHAT, name, "appears twice")
        if info.size > MAX_MEMBER:
            raise ParseError(WHAT, name, f"{info.size} bytes: too large for a module")
        if info.offset_data + info.size > size:
            raise ParseError(WHAT, name, f"states {info.size} bytes, but the file ends before them (truncated)")
        headers[info.name] = info
    return headers


def _read(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    """Return the data of regular, non-sparse member ``info`` (exactly its stated size). Raises ParseError."""
    handle = tar.extractfile(info)
    data = handle.read() if handle is not None else None
    if data is None or len(data) != info.size:
        raise ParseError(WHAT, info.name[:60], "unreadable")
    return data


def unpack(data: bytes) -> Bundle:
    """Return the bundle in ``data`` (the bytes of a bundle file).

    Checks the structure only (one ``bundle.json``, regular files, a ``.ko`` per listed module and nothing
    else); :func:`verify_contents` checks the hashes. Everything is checked before a module is read: every
    member's header (type, stated size, that its data is really in the file: no sparse member), then
    ``bundle.json`` (at most MAX_DOC bytes), then that the members are exactly the ones it lists, with the
    sizes it states. So a small hostile file (sparse members, a document naming other files) never makes
    fwman read more than the file holds. Raises ParseError for anything that is not a bundle.
    """
    try:
        with tarfile.TarFile(fileobj=io.BytesIO(data), mode="r") as tar:
            headers = _headers(tar, len(data))
            doc_info = headers.pop(DOC_NAME, None)
            if doc_info is None:
                raise ParseError(WHAT, DOC_NAME, "missing (not an fwman module bundle)")
            if doc_info.size > MAX_DOC:
                raise ParseError(WHAT, DOC_NAME, f"{doc_info.size} bytes: too large for a bundle document")
            doc_bytes = _read(tar, doc_info)
            doc = BundleDoc.from_json(doc_bytes)
            sig_info = headers.pop(SIG_NAME, None)
            if sig_info is not None and sig_info.size > MAX_DOC:
                raise ParseError(WHAT, SIG_NAME, f"{sig_info.size} bytes: too large for a signature")
            wanted: dict[str, tarfile.TarInfo] = {}
            for name, entry in doc.modules.items():
                path = f"{MODULES_PREFIX}{name}.ko"
                info = headers.pop(path, None)
                if info is None:
                    raise ParseError(WHAT, path, "listed in bundle.json but not in the file")
                if info.size != entry.size:
                    raise ParseError(WHAT, path, f"{info.size} bytes, but bundle.json says {entry.size}")
                wanted[name] = info
            if headers:
                raise ParseError(WHAT, sorted(headers)[0][:60], "not listed in bundle.json")
            signature = _read(tar, sig_info) if sig_info is not None else None
            files = {name: _read(tar, info) for name, info in wanted.items()}
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as e:
        raise ParseError(WHAT, "file", f"not a tar file: {e}") from e
    return Bundle(doc, doc_bytes, signature, files)


def verify_contents(bundle: Bundle) -> None:
    """Check every module against ``bundle.json``: SHA-256, size, and a ``vermagic`` naming the bundle's kernel.

    Raises VerificationError naming the first module that does not match.
    """
    from fwman.driver.kmod.kofile import read_module

    for name, entry in bundle.doc.modules.items():
        data = bundle.files[name]
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise VerificationError(f"bundle: {name}.ko does not match the SHA-256 in bundle.json (altered or corrupt)")
        info = read_module(data)
        if info.kernel_release != bundle.doc.kernel:
            raise VerificationError(
                f"bundle: {name}.ko has vermagic {info.vermagic!r}, not for kernel {bundle.doc.kernel}"
            )


# -- export ---------------------------------------------------------------------------------------------------
def _signature_state(files: dict[str, bytes]) -> str | None:
    """Return the signer of the modules (issuer CN), or None when unsigned."""
    from fwman.driver.kmod.kofile import split_signature

    for data in files.values():
        _body, sig = split_signature(data)
        if sig is not None:
            return sig.signer or sig.issuer or "unknown signer"
    return None


def host_name(host: Host) -> str:
    """Return ``host``'s name (the kernel's, else ``/etc/hostname``), or "an unnamed host" when neither says one.

    What a bundle records as the host it was built on (docs/fleet.md). Never raises.
    """
    for path in (paths.KERNEL_HOSTNAME, paths.HOSTNAME_FILE):
        try:
            name = host.read_text(path).strip().splitlines()
        except (FwmanError, UnicodeDecodeError):
            continue
        if name and name[0].strip() and len(name[0]) <= 253 and name[0].isprintable():
            return name[0].strip()
    return "an unnamed host"


def export_bundle(host: Host, kver: str, sign: Signer | None = None) -> tuple[bytes, Bundle]:
    """Return (the bundle file bytes, the bundle) of the patched modules installed for ``kver`` on ``host``.

    ``sign`` (given the bytes of ``bundle.json``) returns the signature document to add, when the bundle is
    signed.

    Only a verified set is exported: the manifest must exist and every module must pass the same check as
    ``fwman modules status`` (depmod resolution, SHA-256, vermagic). Raises MissingError when ``kver`` has no
    manifest, VerificationError when its modules do not verify.
    """
    from fwman.driver.build.install import verify_or_raise
    from fwman.driver.build.manifest import load_manifest, now_iso
    from fwman.driver.kmod.kofile import read_module

    manifest = load_manifest(host, kver)
    if manifest is None:
        raise MissingError(
            f"no patched modules installed by fwman for kernel {kver}",
            hint=f"build them first: fwman modules build --kernel {kver}",
        )
    verify_or_raise(host, manifest)
    files = {name: host.read_bytes(entry.path) for name, entry in manifest.modules.items()}
    first = files.get("nvidia") or next(iter(files.values()))
    doc = BundleDoc(
        kernel=kver,
        vermagic=read_module(first).vermagic or "",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
        fork=manifest.fork,
        branch=manifest.branch,
        commit=manifest.commit,
        source=manifest.source,
        compiler=manifest.compiler,
        signed=manifest.signed,
        signer=_signature_state(files),
        built_at=manifest.built_at,
        exported_at=now_iso(),
        exported_from=host_name(host),
    )
    doc_bytes = doc.to_json()
    signature = sign(doc_bytes) if sign is not None else None
    return pack(doc_bytes, files, signature), Bundle(doc, doc_bytes, signature, files)


# -- import ---------------------------------------------------------------------------------------------------
@dataclass
class ImportOutcome:
    """What an import did for one kernel."""

    kernel: str
    status: str  # "imported" | "current" | "would-import"
    message: str
    signature: str  # how the bundle's signature was checked
    signed: str | None  # how the installed modules are signed (hash), None when unsigned
    bundle_sha256: str
    boot: BootCheck | None = None
    checks: list[str] = field(default_factory=list)


def _same_modules(host: Host, manifest: Manifest | None, bundle: Bundle) -> bool:
    """Return True when the modules in place are the bundle's (compared without any appended signature)."""
    from fwman.driver.boot.safety import kernel_safety
    from fwman.driver.kmod.kofile import split_signature

    if manifest is None or set(manifest.modules) != set(bundle.files):
        return False
    if not kernel_safety(host, bundle.doc.kernel).safe:
        return False
    for name, entry in manifest.modules.items():
        try:
            installed = split_signature(host.read_bytes(entry.path))[0]
        except (MissingError, ParseError):
            return False
        if installed != split_signature(bundle.files[name])[0]:
            return False
    return True


def _older(bundle_built: str | None, in_place_built: str) -> bool | None:
    """Return True when ``bundle_built`` is before ``in_place_built`` (ISO 8601 times), None when either is
    missing or unreadable (then the age cannot be told, and the import says so)."""
    from datetime import UTC, datetime

    try:
        a, b = datetime.fromisoformat(bundle_built or ""), datetime.fromisoformat(in_place_built)
    except ValueError:
        return None
    if a.tzinfo is None or b.tzinfo is None:
        a, b = a.replace(tzinfo=a.tzinfo or UTC), b.replace(tzinfo=b.tzinfo or UTC)
    return a < b


def plan_import(host: Host, bundle: Bundle, origin: str, check_signature: Callable[[Bundle], str]) -> ImportOutcome:
    """Check ``bundle`` against ``host`` without changing anything; return ``current`` or ``would-import``.

    Checks: hashes and vermagic, the kernel is installed here, the signature (``check_signature`` returns how it
    was checked, or raises VerificationError), Secure Boot. Raises VerificationError, MissingError or
    BlockedError for the first check that fails.
    """
    from fwman.core.errors import BlockedError
    from fwman.driver.build.manifest import load_manifest
    from fwman.driver.kmod import sign

    doc = bundle.doc
    verify_contents(bundle)
    checks = [f"{len(doc.modules)} modules match bundle.json (SHA-256, vermagic {doc.kernel})"]
    if not host.is_dir(paths.modules_dir(doc.kernel)):
        raise MissingError(
            f"the bundle is for kernel {doc.kernel}, which is not installed here ({paths.modules_dir(doc.kernel)})",
            hint="install that kernel first, or export a bundle for a kernel this host has",
        )
    checks.append(f"kernel {doc.kernel} is installed")
    signature = check_signature(bundle)
    checks.append(signature)
    key = sign.configured_key(host)
    secure = secure_boot_enabled(host)
    if key is not None:
        checks.append(f"modules will be signed with this host's key {key.cert}")
    elif secure and doc.signed is None:
        raise BlockedError(
            "Secure Boot is on and the bundle's modules are unsigned: the kernel would refuse to load them",
            hint="run `fwman modules keygen` here (and enroll it), then import again: fwman signs on import",
        )
    elif secure:
        checks.append(f"Secure Boot is on: modules keep the bundle's signature ({doc.signer}); it must be enrolled")
    manifest = load_manifest(host, doc.kernel)
    same = _same_modules(host, manifest, bundle)
    if manifest is not None and not same:
        older = _older(doc.built_at, manifest.built_at)
        if older is None:
            checks.append(f"age not compared: built at {doc.built_at or 'unknown'}, in place {manifest.built_at}")
        elif older:
            raise BlockedError(
                f"the bundle was built at {doc.built_at}, before the modules in place for {doc.kernel} (built at "
                f"{manifest.built_at}): an older bundle replayed is refused",
                hint="to go back to older modules on purpose, build them again on the builder (the new build "
                "is newer) and export that bundle",
            )
        else:
            checks.append(f"built at {doc.built_at}, newer than the modules in place (built at {manifest.built_at})")
    if same:
        message = f"{doc.kernel}: the bundle's modules are already in place and verified"
        in_place = manifest.signed if manifest else None
        return ImportOutcome(doc.kernel, "current", message, signature, in_place, bundle.sha256, checks=checks)
    message = f"{doc.kernel}: would install the bundle from {origin}"
    return ImportOutcome(doc.kernel, "would-import", message, signature, doc.signed, bundle.sha256, checks=checks)


def import_bundle(
    host: Host, bundle: Bundle, origin: str, check_signature: Callable[[Bundle], str], report: Report = _nothing
) -> ImportOutcome:
    """Check ``bundle`` and install its modules on ``host`` the way a build does; return what happened.

    After :func:`plan_import`'s checks: signs with the host's key when one is configured (as a build does),
    stages and swaps the modules in (:func:`~fwman.driver.build.install.install_modules`, which runs depmod),
    checks that every name resolves to the new file with the recorded hash, writes the manifest (source
    ``imported from ORIGIN``), clears the failed/pending markers and makes sure the next boot is safe. Raises as
    :func:`plan_import`, and VerificationError when the installed modules are not in effect (the manifest is
    then not written).
    """
    from fwman.driver.boot.pin import ensure_safe_boot
    from fwman.driver.build import install
    from fwman.driver.build.lock import module_lock
    from fwman.driver.build.manifest import Manifest, WriteManifest, failed_path, now_iso, pending_path
    from fwman.driver.kmod import sign
    from fwman.driver.kmod.kofile import split_signature
    from fwman.host.actions import RemoveFile, apply_all

    with module_lock(host):
        outcome = plan_import(host, bundle, origin, check_signature)
        if outcome.status == "current":
            outcome.boot = ensure_safe_boot(host, report)
            return outcome
        doc = bundle.doc
        files = dict(bundle.files)
        signed = doc.signed
        key = sign.configured_key(host)
        if key is not None:
            # this host's key, as a build here would sign; the builder's signature (if any) is replaced
            unsigned = {name: split_signature(data)[0] for name, data in files.items()}
            files, signed = sign.sign_for_kernel(host, doc.kernel, unsigned, key)
            report(f"signed the modules with {key.cert} ({signed})")
        entries, _changed = install.install_modules(host, doc.kernel, files)  # staged files, override, depmod
        built_from = doc.source or (f"fork {doc.fork} branch {doc.branch}" if doc.fork else "unknown source")
        manifest = Manifest(
            kernel=doc.kernel,
            fork=doc.fork,
            branch=doc.branch,
            commit=doc.commit,
            modules=entries,
            built_at=doc.built_at or now_iso(),
            source=f"imported from {origin} (bundle {bundle.sha256[:16]}, built on {doc.exported_from} from "
            f"{built_from})",
            compiler=doc.compiler,
            signed=signed,
            object_cache_hit=False,
        )
        bad = [c for c in install.check_installed(host, manifest) if not c.ok]
        if bad:
            raise VerificationError(
                f"imported but not in effect for {doc.kernel}: {bad[0].name}: {bad[0].problem}",
                hint="run `fwman modules status`; the previous manifest was kept",
            )
        # the same actions a build ends with: the manifest, and the failed/pending markers cleared
        kver = doc.kernel
        apply_all(host, [WriteManifest(manifest), RemoveFile(failed_path(kver)), RemoveFile(pending_path(kver))])
        outcome.status = "imported"
        outcome.signed = signed
        outcome.message = f"imported and verified for {doc.kernel} from {origin}"
        outcome.boot = ensure_safe_boot(host, report)
        return outcome
