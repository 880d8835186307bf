"""The module bundle file: ``bundle.json`` (:class:`BundleDoc`), the tar around it, and the pure checks.

Pure: bytes in, a :class:`Bundle` or a ParseError out (:func:`unpack`); :func:`pack` is the way back.
:func:`verify_contents` holds the modules to the hashes and ``vermagic`` the document states. What a bundle
means for a host (export, trust, import) is the other modules of :mod:`fwman.driver.bundle`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from fwman.core import names
from fwman.core.errors import ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json
from fwman.driver.build.manifest import BuildRecord
from fwman.gpu.kernel_modules import MODULE_NAMES

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


@dataclass
class BundleModule:
    """One module of a bundle: its file's SHA-256 and size."""

    sha256: str
    size: int


@dataclass(kw_only=True)
class BundleDoc(BuildRecord):
    """The document ``bundle.json``: what was built and how (the manifest's :class:`BuildRecord`: fork, branch,
    commit, source, compiler, ``signed``, ``built_at``), and what every module hashes to. Flat in the file."""

    kernel: str
    vermagic: str
    modules: dict[str, BundleModule]
    #: issuer common name of the modules' signature, when signed
    signer: str | None = None
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
            **{
                k: text(k)
                for k in ("source", "compiler", "signed", "signer", "built_at", "exported_at", "exported_from")
            },
            schema=SCHEMA,
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
