"""Reading a kernel module file (``.ko``, ``.ko.xz``, ``.ko.gz``, ``.ko.zst``): ``.modinfo`` and signature.

:func:`read_module` is pure (bytes in, :class:`ModuleInfo` out, :class:`~fwman.core.errors.ParseError` for anything
it cannot read, naming the field and the byte offset). :func:`module_bytes` and :func:`read_module_file` do the
I/O through a Host: ``.xz`` and ``.gz`` are decompressed with the standard library; ``.zst`` has no decoder in
Python 3.11's standard library, so it is piped through the host's ``zstd`` command.

A signed module is ``[ELF][PKCS#7 DER][struct module_signature, 12 bytes]["~Module signature appended~\\n"]``
(kernel ``scripts/sign-file``); ``struct module_signature`` is ``u8 algo, hash, id_type, signer_len,
key_id_len, pad[3]; __be32 sig_len``. For PKCS#7 (``id_type`` 2) the signer is not in the struct: it is the
issuer and serial number of the SignerInfo inside the DER blob, read here with a minimal DER walk (the blob
carries no certificate, so cryptography's PKCS#7 loaders have nothing to return).
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import struct
from dataclasses import dataclass, field

from fwman.core import bounded
from fwman.core.errors import MissingError, ParseError, ToolMissingError
from fwman.host.base import Host

WHAT = "kernel module"
SIGNATURE_MAGIC = b"~Module signature appended~\n"
_SIG_STRUCT = struct.Struct(">BBBBB3xI")  # struct module_signature, big-endian sig_len
_ID_TYPES = {0: "PGP", 1: "X.509", 2: "PKCS#7"}
_TAG_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


@dataclass(frozen=True, kw_only=True)
class ModuleSignature:
    """The appended signature of a module: format, hash, and who signed it (as ``modinfo`` shows them).

    Frozen dataclasses (not pydantic): the reader below builds them from fields it has checked, and ``fwman
    audit`` reads every nvidia*.ko on its fast path (bench/containers.py).
    """

    id_type: str  # "PKCS#7" for every kernel since 4.x; "PGP"/"X.509" from very old sign tools
    sig_len: int
    offset: int  # where the signature blob starts in the file
    signer: str | None = None  # issuer common name (modinfo's "signer")
    issuer: str | None = None  # full issuer name, "CN=..., O=..."
    serial: str | None = None  # certificate serial, colon hex (modinfo's "sig_key")
    hash_algorithm: str | None = None  # "sha256", or the dotted OID when not a known one


@dataclass(frozen=True, kw_only=True)
class ModuleInfo:
    """What a ``.ko`` says about itself (``.modinfo`` tags) and its signature trailer."""

    name: str | None = None
    version: str | None = None
    vermagic: str | None = None
    kernel_release: str | None = None  # first word of vermagic: the kernel the module was built for
    srcversion: str | None = None
    license: str | None = None
    firmware: list[str] = field(default_factory=list)
    tags: dict[str, list[str]] = field(default_factory=dict)  # every tag, repeated ones in file order
    signature: ModuleSignature | None = None
    elf_class: int  # 32 or 64


# -- the pure reader --------------------------------------------------------------------------------------
def read_module(data: bytes) -> ModuleInfo:
    """Return what the uncompressed module ``data`` carries.

    Raises ParseError (naming the field and offset) for a file that is not an ELF relocatable, is truncated,
    has no readable ``.modinfo``, or has a malformed signature trailer.
    """
    end, signature = _signature_trailer(data)
    # the ELF part is data[:end]; it is not sliced off (a copy of tens of MiB): readers get the bound instead
    elf_class = _check_elf_header(data, end)
    section, sec_offset = _modinfo_section(data, end)
    tags = parse_modinfo(section, sec_offset)

    def one(key: str) -> str | None:
        values = tags.get(key)
        return values[0] if values else None

    vermagic = one("vermagic")
    release = vermagic.split()[0] if vermagic and vermagic.split() else None
    return ModuleInfo(
        name=one("name"),
        version=one("version"),
        vermagic=vermagic.strip() if vermagic else None,
        kernel_release=release,
        srcversion=one("srcversion"),
        license=one("license"),
        firmware=list(tags.get("firmware", [])),
        tags=tags,
        signature=signature,
        elf_class=elf_class,
    )


def split_signature(data: bytes) -> tuple[bytes, ModuleSignature | None]:
    """Return (the ELF part of ``data``, its signature or None when no trailer is appended).

    Raises ParseError when the trailer is there but its struct or PKCS#7 blob is malformed.
    """
    end, signature = _signature_trailer(data)
    return (data if end == len(data) else data[:end]), signature


def _signature_trailer(data: bytes) -> tuple[int, ModuleSignature | None]:
    """Return (where the ELF part ends, the signature or None). Raises ParseError as split_signature."""
    if not data.endswith(SIGNATURE_MAGIC):
        return len(data), None
    struct_end = len(data) - len(SIGNATURE_MAGIC)
    struct_start = struct_end - _SIG_STRUCT.size
    if struct_start < 0:
        raise ParseError(WHAT, "module_signature", "file too short for the signature struct", 0)
    algo, hash_id, id_type, signer_len, key_id_len, sig_len = _SIG_STRUCT.unpack_from(data, struct_start)
    sig_start = struct_start - sig_len
    if sig_len == 0 or sig_start < 0:
        raise ParseError(
            WHAT, "module_signature.sig_len", f"{sig_len} bytes does not fit in the file", struct_start + 8
        )
    kind = _ID_TYPES.get(id_type)
    if kind is None:
        raise ParseError(WHAT, "module_signature.id_type", f"unknown id_type {id_type}", struct_start + 2)
    blob = data[sig_start:struct_start]
    if kind == "PKCS#7":
        if algo or hash_id or signer_len or key_id_len:
            raise ParseError(
                WHAT, "module_signature", "PKCS#7 signature with non-zero algo/hash/signer fields", struct_start
            )
        info = _parse_pkcs7(blob, sig_start)
        signature = ModuleSignature(id_type=kind, sig_len=sig_len, offset=sig_start, **info)
    else:
        # Pre-4.x formats: signer name and key id precede the raw signature; not produced by any current tool.
        signature = ModuleSignature(id_type=kind, sig_len=sig_len, offset=sig_start)
    return sig_start, signature


def _check_elf_header(elf: bytes, size: int) -> int:
    """Return the ELF class (32/64) after checking the header and section table lie inside ``elf[:size]``."""
    if size < 4 or elf[:4] != b"\x7fELF":
        raise ParseError(WHAT, "ELF magic", "not an ELF file (no \\x7fELF at the start)", 0)
    if size < 16:
        raise ParseError(WHAT, "ELF ident", f"truncated: {size} bytes", size)
    elf_class = {1: 32, 2: 64}.get(elf[4])
    if elf_class is None:
        raise ParseError(WHAT, "EI_CLASS", f"invalid class {elf[4]}", 4)
    endian = {1: "<", 2: ">"}.get(elf[5])
    if endian is None:
        raise ParseError(WHAT, "EI_DATA", f"invalid data encoding {elf[5]}", 5)
    # (header size, e_shoff's offset and format, e_shentsize's offset, the smallest section header)
    header_size, shoff_at, shoff_format, counts_at, min_entsize = (
        (64, 0x28, "Q", 0x3A, 64) if elf_class == 64 else (52, 0x20, "I", 0x2E, 40)
    )
    if size < header_size:
        raise ParseError(WHAT, "ELF header", f"truncated: {size} of {header_size} bytes", size)
    (e_type,) = struct.unpack_from(endian + "H", elf, 16)
    if e_type != 1:
        raise ParseError(WHAT, "e_type", f"type {e_type} is not ET_REL (a kernel module is relocatable)", 16)
    (e_shoff,) = struct.unpack_from(endian + shoff_format, elf, shoff_at)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from(endian + "HHH", elf, counts_at)
    if e_shnum == 0 or e_shoff == 0:
        raise ParseError(WHAT, "section header table", "module has no section headers", shoff_at)
    if e_shentsize < min_entsize:
        raise ParseError(WHAT, "e_shentsize", f"{e_shentsize} is smaller than {min_entsize}", shoff_at)
    end = e_shoff + e_shentsize * e_shnum
    if end > size:
        raise ParseError(
            WHAT,
            "section header table",
            f"{e_shnum} entries end at 0x{end:X}, past the end of the file (0x{size:X}): truncated",
            e_shoff,
        )
    if e_shstrndx >= e_shnum:
        raise ParseError(WHAT, "e_shstrndx", f"{e_shstrndx} is not below e_shnum {e_shnum}", shoff_at)
    return elf_class


def _modinfo_section(elf: bytes, size: int) -> tuple[bytes, int]:
    """Return (the ``.modinfo`` section bytes, its file offset), read with pyelftools; the ELF is ``elf[:size]``."""
    from elftools.elf.elffile import ELFFile  # imported here: pyelftools is slow to import for --help

    try:
        elffile = ELFFile(io.BytesIO(elf))
        section = elffile.get_section_by_name(".modinfo")
        if section is None:
            raise ParseError(WHAT, ".modinfo", "no .modinfo section: not a kernel module", None)
        offset = int(section["sh_offset"])
        sec_size = int(section["sh_size"])
        sh_type = str(section["sh_type"])
    except ParseError:
        raise
    except Exception as e:  # pyelftools raises many kinds (ELFError, struct.error, ...) on damaged input
        raise ParseError(WHAT, "section headers", f"unreadable ({type(e).__name__}: {e})", None) from e
    if sh_type == "SHT_NOBITS":
        raise ParseError(WHAT, ".modinfo", "section has no file data (SHT_NOBITS)", offset)
    if offset + sec_size > size:
        raise ParseError(
            WHAT,
            ".modinfo",
            f"{sec_size} bytes at 0x{offset:X} run past the end of the file (0x{size:X}): truncated",
            offset,
        )
    return elf[offset : offset + sec_size], offset


def parse_modinfo(section: bytes, base_offset: int = 0) -> dict[str, list[str]]:
    """Return the ``tag=value`` strings of a ``.modinfo`` section as {tag: [values in order]}.

    Empty strings (alignment padding) are skipped. Raises ParseError for an entry that is not ``tag=value``.
    """
    tags: dict[str, list[str]] = {}
    pos = 0
    for raw in section.split(b"\0"):
        if raw:
            key, sep, value = raw.partition(b"=")
            key_text = key.decode("ascii", errors="replace")
            if not sep or not _TAG_KEY_RE.fullmatch(key_text):
                shown = raw[:40].decode("ascii", errors="replace")
                raise ParseError(WHAT, ".modinfo", f"entry {shown!r} is not tag=value", base_offset + pos)
            # values are free text (descriptions, parameter help); a stray byte must not hide the rest
            tags.setdefault(key_text, []).append(value.decode("utf-8", errors="replace"))
        pos += len(raw) + 1
    return tags


# -- the PKCS#7 signer -------------------------------------------------------------------------------------
_OID_NAMES = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "1.2.840.113549.1.9.1": "emailAddress",
    "2.16.840.1.101.3.4.2.1": "sha256",
    "2.16.840.1.101.3.4.2.2": "sha384",
    "2.16.840.1.101.3.4.2.3": "sha512",
    "2.16.840.1.101.3.4.2.4": "sha224",
    "1.3.14.3.2.26": "sha1",
    "1.2.156.10197.1.401": "sm3",
}
_SIGNED_DATA = "1.2.840.113549.1.7.2"


class _Der:
    """A minimal DER reader over one blob; offsets in errors are file offsets (``base`` + position)."""

    def __init__(self, data: bytes, base: int) -> None:
        self.data = data
        self.base = base

    def tlv(self, pos: int, end: int, field: str) -> tuple[int, int, int]:
        """Return (tag, content start, content end) of the element at ``pos``; raise ParseError if malformed."""
        if pos + 2 > end:
            raise ParseError(WHAT, field, "DER element truncated", self.base + pos)
        tag = self.data[pos]
        if tag & 0x1F == 0x1F:
            raise ParseError(WHAT, field, "multi-byte DER tags are not used in module signatures", self.base + pos)
        first = self.data[pos + 1]
        pos += 2
        if first < 0x80:
            length = first
        else:
            count = first & 0x7F
            if count == 0 or count > 4:
                raise ParseError(WHAT, field, "unsupported DER length form", self.base + pos - 1)
            if pos + count > end:
                raise ParseError(WHAT, field, "DER length truncated", self.base + pos)
            length = int.from_bytes(self.data[pos : pos + count], "big")
            pos += count
        if pos + length > end:
            raise ParseError(WHAT, field, f"DER element of {length} bytes runs past its container", self.base + pos)
        return tag, pos, pos + length

    def expect(self, pos: int, end: int, tag: int, field: str) -> tuple[int, int]:
        """Return (content start, content end) of the element at ``pos``, which must have ``tag``."""
        got, start, stop = self.tlv(pos, end, field)
        if got != tag:
            raise ParseError(WHAT, field, f"expected DER tag 0x{tag:02X}, found 0x{got:02X}", self.base + pos)
        return start, stop

    def children(self, start: int, end: int, field: str) -> list[tuple[int, int, int, int]]:
        """Return (tag, element start, content start, content end) of each element in ``[start, end)``."""
        out = []
        pos = start
        while pos < end:
            tag, cstart, cend = self.tlv(pos, end, field)
            out.append((tag, pos, cstart, cend))
            pos = cend
        return out

    def oid(self, start: int, end: int, field: str) -> str:
        """Return the dotted form of the OID content in ``[start, end)``."""
        body = self.data[start:end]
        if not body:
            raise ParseError(WHAT, field, "empty OID", self.base + start)
        parts: list[int] = []
        value = 0
        for b in body:
            value = (value << 7) | (b & 0x7F)
            if not b & 0x80:
                parts.append(value)
                value = 0
        if body[-1] & 0x80:
            raise ParseError(WHAT, field, "OID ends inside a sub-identifier", self.base + end - 1)
        first = parts[0]
        head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
        return ".".join(str(p) for p in [*head, *parts[1:]])


def _parse_pkcs7(blob: bytes, base: int) -> dict[str, str | None]:
    """Return signer (issuer CN), issuer, serial and hash algorithm of the first SignerInfo in ``blob``."""
    der = _Der(blob, base)
    field = "PKCS#7 signature"
    ci_start, ci_end = der.expect(0, len(blob), 0x30, field + " ContentInfo")
    items = der.children(ci_start, ci_end, field + " ContentInfo")
    if len(items) < 2 or items[0][0] != 0x06 or items[1][0] != 0xA0:
        raise ParseError(WHAT, field, "ContentInfo is not (OID, [0] content)", base + ci_start)
    content_type = der.oid(items[0][2], items[0][3], field + " contentType")
    if content_type != _SIGNED_DATA:
        raise ParseError(WHAT, field, f"content type {content_type} is not signedData", base + items[0][1])
    sd_start, sd_end = der.expect(items[1][2], items[1][3], 0x30, field + " SignedData")
    sd = der.children(sd_start, sd_end, field + " SignedData")
    if not sd or sd[-1][0] != 0x31:
        raise ParseError(WHAT, field, "SignedData has no signerInfos SET", base + sd_start)
    signer_infos = der.children(sd[-1][2], sd[-1][3], field + " signerInfos")
    if not signer_infos or signer_infos[0][0] != 0x30:
        raise ParseError(WHAT, field, "signerInfos is empty", base + sd[-1][1])
    si = der.children(signer_infos[0][2], signer_infos[0][3], field + " SignerInfo")
    if len(si) < 3:
        raise ParseError(WHAT, field, "SignerInfo too short", base + signer_infos[0][1])
    result: dict[str, str | None] = {"signer": None, "issuer": None, "serial": None, "hash_algorithm": None}
    sid_tag, sid_pos, sid_start, sid_end = si[1]
    if sid_tag == 0x30:  # IssuerAndSerialNumber
        parts = der.children(sid_start, sid_end, field + " issuerAndSerialNumber")
        if len(parts) != 2 or parts[0][0] != 0x30 or parts[1][0] != 0x02:
            raise ParseError(WHAT, field, "issuerAndSerialNumber is not (Name, INTEGER)", base + sid_pos)
        rdns = _read_name(der, parts[0][2], parts[0][3])
        result["issuer"] = ", ".join(f"{k}={v}" for k, v in rdns) or None
        result["signer"] = next((v for k, v in rdns if k == "CN"), None)
        serial = blob[parts[1][2] : parts[1][3]].lstrip(b"\0") or b"\0"
        result["serial"] = ":".join(f"{b:02X}" for b in serial)
    elif sid_tag == 0x80:  # [0] SubjectKeyIdentifier
        result["serial"] = ":".join(f"{b:02X}" for b in blob[sid_start:sid_end])
    alg_tag, _, alg_start, alg_end = si[2]
    if alg_tag == 0x30:
        alg = der.children(alg_start, alg_end, field + " digestAlgorithm")
        if alg and alg[0][0] == 0x06:
            oid = der.oid(alg[0][2], alg[0][3], field + " digestAlgorithm")
            result["hash_algorithm"] = _OID_NAMES.get(oid, oid)
    return result


def _read_name(der: _Der, start: int, end: int) -> list[tuple[str, str]]:
    """Return the (attribute, value) pairs of an X.501 Name, in order."""
    pairs: list[tuple[str, str]] = []
    for tag, pos, rstart, rend in der.children(start, end, "PKCS#7 issuer"):
        if tag != 0x31:
            raise ParseError(WHAT, "PKCS#7 issuer", "RDN is not a SET", der.base + pos)
        for atag, apos, astart, aend in der.children(rstart, rend, "PKCS#7 issuer"):
            attr = der.children(astart, aend, "PKCS#7 issuer") if atag == 0x30 else []
            if len(attr) != 2 or attr[0][0] != 0x06:
                raise ParseError(WHAT, "PKCS#7 issuer", "attribute is not (OID, value)", der.base + apos)
            oid = der.oid(attr[0][2], attr[0][3], "PKCS#7 issuer")
            value = der.data[attr[1][2] : attr[1][3]]
            # BMPString (0x1E) is UTF-16BE; the other string types are ASCII/UTF-8 compatible
            text = (
                value.decode("utf-16-be", errors="replace")
                if attr[1][0] == 0x1E
                else value.decode("utf-8", errors="replace")
            )
            pairs.append((_OID_NAMES.get(oid, oid), text))
    return pairs


# -- compressed files and the Host ------------------------------------------------------------------------
def module_stem(filename: str) -> str | None:
    """Return the module file's name without its extension (``nvidia-uvm`` for ``nvidia-uvm.ko.zst``), or None."""
    for suffix in MODULE_SUFFIXES:
        if filename.endswith(suffix) and len(filename) > len(suffix):
            return filename[: -len(suffix)]
    return None


def decompress(data: bytes, filename: str) -> bytes:
    """Return ``data`` decompressed according to ``filename``'s suffix (``.xz``, ``.gz``; ``.ko`` unchanged),
    within :data:`fwman.core.bounded.MODULE`.

    Raises OverLimit (a ParseError) past a limit, ParseError on corrupt compressed data, and for ``.zst``
    (which needs :func:`module_bytes`).
    """
    if filename.endswith(".xz"):
        return bounded.decompress("xz", data, bounded.MODULE, WHAT)
    if filename.endswith(".gz"):
        return bounded.decompress("gzip", data, bounded.MODULE, WHAT)
    if filename.endswith(".zst"):
        raise ParseError(WHAT, "zstd stream", "zstd data needs the zstd tool (use module_bytes)", 0)
    return data


def module_bytes(host: Host, path: str) -> bytes:
    """Return the uncompressed bytes of the module file at host path ``path``.

    Raises MissingError when it cannot be read, ToolMissingError when a ``.ko.zst`` needs ``zstd`` and the host
    has none, ParseError when the compressed data is corrupt.
    """
    if not path.endswith(".zst"):
        return decompress(host.read_bytes(path), path)
    if host.which("zstd") is None:
        raise ToolMissingError("zstd", hint="install zstd (Debian package zstd) to read .ko.zst modules")
    local = host.local_path(path)
    if local is None:
        raise MissingError(f"cannot decompress {path} here (no file behind it on this host)")
    # Host.run returns text; base64 carries the binary stream through it intact. `zstd -t` first, because
    # the pipeline's status is base64's; `head -c` keeps the output within the module limit (one byte more
    # tells "over" from "at").
    limits = bounded.MODULE
    allowed = limits.allowed(host.stat_size(path))
    script = 'zstd -tq -- "$1" && zstd -dcq -- "$1" | head -c "$2" | base64 -w0'
    result = host.run(["sh", "-c", script, "fwman-zstd", local, str(allowed + 1)], timeout=limits.seconds)
    if not result.ok:
        raise ParseError(WHAT, "zstd stream", result.stderr.strip() or f"zstd exited {result.rc}", 0)
    try:
        data = base64.b64decode(result.stdout, validate=True)
    except binascii.Error as e:
        raise ParseError(WHAT, "zstd stream", f"decompressor output unreadable: {e}", 0) from e
    if len(data) > allowed:
        raise bounded.OverLimit(WHAT, "zstd stream", f"{bounded.size_text(allowed)} uncompressed")
    return data


def read_module_file(host: Host, path: str) -> ModuleInfo:
    """Return the ModuleInfo of the module file at ``path`` (compressed or not). Raises as module_bytes/read_module."""
    return read_module(module_bytes(host, path))
