"""``fwman catalog list``, ``show``, ``update``, ``lint`` and ``sign``. ``lint --dir`` and ``sign`` work on a
maintainer's copy named on the command line, through the user-file door (never mapped under ``--root``);
without ``--dir``, on the catalog bundled with fwman."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.catalog.signed_files import Written, metadata_time, today, write_files
from fwman.app.text import Line, Out, Result, Span, line, say, table
from fwman.core.errors import FwmanError, UsageError, VerificationError
from fwman.core.jsonout import OMIT, fields_of
from fwman.core.names import iso_date
from fwman.core.signing import load_private_key
from fwman.firmware.catalog.lint import LintIssue, TrustCheck, lint_directory, lint_signature
from fwman.firmware.catalog.load import BUNDLED_CATALOG, Catalog, CatalogEntry, load_catalog
from fwman.firmware.catalog.local import LOCAL_DIR
from fwman.firmware.catalog.publish import sign_directory
from fwman.firmware.catalog.schema import INDEX_NAME, SIG_NAME, Board, CatalogImage, CatalogIndex, parse_index
from fwman.firmware.catalog.signing import admin_keys, root_keys
from fwman.firmware.catalog.tree import bundled_tree, user_tree
from fwman.firmware.catalog.update import DEFAULT_SOURCE, UpdateResult, catalog_source, configured_url, update_catalog
from fwman.firmware.ops.local_entry import lint_local_entries
from fwman.host.base import Host
from fwman.host.http import HttpOptions
from fwman.host.userfiles import read_user_file, user_path

YES_NO = {True: "yes", False: "no", None: "unknown"}
#: how an image's status stands out in text (fwman.app.text.STYLES); superseded is plain
STATUS_STYLES = {"current": "green", "unverified": "yellow", "withdrawn": "red"}
#: the columns of ``catalog list``
LIST_COLUMNS = ("SUBSYSTEM", "BOARD", "VERSION", "STATUS", "REBAR", "HASH")


def status_span(status: str) -> Span:
    """Return an image status as a styled span of text."""
    return Span(status, STATUS_STYLES.get(status, ""))


def wrapped(text: str, width: int, indent: str) -> str:
    """Return ``text`` wrapped to ``width`` columns, each line starting with ``indent``, as ``click.wrap_text``
    wraps one paragraph (what ``catalog show`` printed before its text moved here): tabs expanded, whitespace
    kept inside a line, a word longer than a line cut where the line ends (never at a hyphen before it)."""

    class Wrapper(textwrap.TextWrapper):
        def _handle_long_word(self, chunks: list[str], line: list[str], length: int, room: int) -> None:
            left = max(room - length, 1)  # click's rule: the line is filled, the word goes on on the next
            if self.break_long_words:
                line.append(chunks[-1][:left])
                chunks[-1] = chunks[-1][left:]
            elif not line:
                line.append(chunks.pop())

    wrapper = Wrapper(width, initial_indent=indent, subsequent_indent=indent, replace_whitespace=False)
    return wrapper.fill(text.expandtabs())


def image_json(image: CatalogImage) -> dict[str, Any]:
    """Return the JSON form of a catalog image (its model plus the cache file name)."""
    data: dict[str, Any] = image.model_dump(mode="json")
    data["file"] = image.file_name
    return data


@dataclass
class Listing(Result):
    """Every board and image of the catalog in use."""

    catalog: Catalog

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-list/2``."""
        cat = self.catalog
        return {
            "catalog": cat.summary(),
            "boards": [
                {
                    "key": b.key,
                    "subsystem": b.subsystem,
                    "name": b.board.name,
                    "maker": b.board.maker,
                    "local_entry": cat.local_files.get(b.key),
                    "images": [image_json(i) for i in b.images_newest_first()],
                    "facts_known": board_facts(b)[0],
                    "facts_unknown": board_facts(b)[1],
                }
                for b in sorted(cat.boards, key=lambda b: b.key)
            ],
        }

    def text(self, verbose: int = 0) -> Out:
        """Return which catalog (dim), its notes (dim), the table of every board and image (a board with no image
        gets one row saying so), then for each board what the catalog knows and what it does not."""
        head = [say(self.catalog.describe(), "dim"), *(say(f"note: {n}", "dim") for n in self.catalog.notes)]
        out: Out = [*head, table(LIST_COLUMNS, self.rows()), say("")]
        for board in self.catalog.boards:
            known, unknown = board_facts(board)
            out.append(say(f"{board.board.name} ({board.subsystem})", "bold"))
            out.append(say(f"  known:   {'; '.join(known)}"))
            out.append(say(f"  unknown: {'; '.join(unknown) or 'nothing listed'}", "dim"))
        return out

    def rows(self) -> list[list[str | Span]]:
        """Return the table rows: subsystem, board, version, status, rebar, hash (which one is known); a board the
        catalog lists no image for has one row with version ``-`` and status ``no image listed``."""
        rows: list[list[str | Span]] = []
        entries = self.catalog.entries()
        for board in self.catalog.boards:
            mine = [e for e in entries if e.board.key == board.key]
            name = board.board.name + (" (local entry)" if self.catalog.is_local(board) else "")
            if not mine:
                rows.append([board.subsystem, name, "-", Span("no image listed", "dim"), "?", "-"])
            for entry in mine:
                rows.append(
                    [
                        entry.board.subsystem,
                        name,
                        entry.image.version,
                        status_span(entry.image.status.value),
                        {True: "yes", False: "no", None: "?"}[entry.image.rebar],
                        "sha256" if entry.image.sha256 else ("md5" if entry.image.md5 else "-"),
                    ]
                )
        return rows


def board_facts(board: Board) -> tuple[list[str], list[str]]:
    """Return (known, unknown): the facts the catalog states for ``board`` and those it leaves empty (what a
    maintainer could still source), in words."""
    info = board.board
    known = [f"PCI IDs {board.key}", f"maker {info.maker}"]
    unknown: list[str] = []
    for label, value in (
        ("part numbers", ", ".join(info.part_numbers)),
        ("board IDs", ", ".join(info.board_ids)),
        ("update-program signer", "; ".join(info.package_signers)),
    ):
        (known if value else unknown).append(f"{label} {value}" if value else label)
    if info.dual_firmware_switch is None:
        unknown.append("dual firmware switch")
    else:
        known.append(f"dual firmware switch: {YES_NO[info.dual_firmware_switch]}")
    if info.vram_bytes:
        known.append(f"memory {info.vram_bytes // (1 << 30)} GiB")
    else:
        unknown.append("memory size")
    images = board.images
    if images:
        hashed = [i for i in images if i.has_hash]
        known.append(f"{len(images)} image(s), {len(hashed)} with a published hash")
        if len(hashed) < len(images):
            unknown.append(f"published hash of {len(images) - len(hashed)} image(s)")
    else:
        unknown.append("firmware images (none listed with a source)")
    if info.sources:
        known.append(f"sources: {len(info.sources)} public page(s)")
    else:
        unknown.append("a public source for the board's facts (format 1: from the project's design notes)")
    return known, unknown


def list_catalog(host: Host) -> Listing:
    """Return the catalog in use on ``host``. Raises MissingError when there is none."""
    return Listing(load_catalog(host))


@dataclass
class BoardView(Result):
    """One board of the catalog: what it is, and every image with its status, reason, hashes and sources."""

    catalog: Catalog
    board: Board
    entries: list[CatalogEntry]

    @property
    def local(self) -> str | None:
        """Return the file of the host's local entry for the board (None: a curated board)."""
        return self.catalog.local_files.get(self.board.key)

    @property
    def recommended(self) -> CatalogImage | None:
        """Return the image the board should run (None: none to recommend)."""
        return self.board.recommended()

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-board/2``."""
        images = []
        for e in self.entries:
            data = image_json(e.image)
            data["local_override"] = e.override.model_dump(mode="json") if e.override else None
            images.append(data)
        b, recommended = self.board, self.recommended
        return {
            "catalog": self.catalog.summary(),
            "pci_key": b.key,
            "subsystem": b.subsystem,
            "pci": b.pci.model_dump(),
            "board": b.board.model_dump(mode="json"),
            "local_entry": self.local,
            "recommended": recommended.version if recommended else None,
            "images": images,
        }

    def facts(self) -> list[tuple[str, str]]:
        """Return (label, value) facts of the board: where it is from, maker, part numbers, ..., sources."""
        info, local = self.board.board, self.local
        return [
            ("from", f"local entry {local} (this host only, unsigned)" if local else self.catalog.describe()),
            ("maker", info.maker),
            ("part numbers", ", ".join(info.part_numbers) or "unknown"),
            ("board IDs", ", ".join(info.board_ids) or "unknown"),
            ("dual firmware", {True: "yes (switch)", False: "no", None: "unknown"}[info.dual_firmware_switch]),
            ("sources", "\n                ".join(info.sources) or ("none" if not local else "the [local] table")),
        ]

    def text(self, verbose: int = 0) -> Out:
        """Return the board's name (bold), its facts, its notes (wrapped to 100 columns), then its images."""
        info = self.board.board
        out = [say(f"{info.name}  ({self.board.key})", "bold"), *(say(f"  {k:<14}{v}") for k, v in self.facts())]
        if info.notes:
            out.append(say(wrapped(info.notes, 100, "  ")))
        return [*out, *self.images()]

    def images(self) -> list[Line]:
        """Return each image's lines: an empty line, its version and status (the recommended one marked), and
        every fact of it that has a value."""
        recommended, out = self.recommended, list[Line]()
        for e in self.entries:
            i = e.image
            mark = "  <- recommended" if recommended and i.version == recommended.version else ""
            out += [say(), line("  ", Span(i.version, "bold"), "  ", status_span(i.status.value), mark)]
            out += [say(f"    {k:<14}{v}") for k, v in self.image_facts(e)]
        return out

    def image_facts(self, e: CatalogEntry) -> list[tuple[str, str]]:
        """Return the (label, value) facts of one image that have a value: reason, dates, hashes, URLs, ..."""
        i, o = e.image, e.override
        lines = [
            ("reason", i.status_reason),
            ("status date", i.status_date),
            ("released", i.release_date or "unknown"),
            ("superseded by", i.superseded_by),
            ("rebar", YES_NO[i.rebar]),
            ("max BAR1", f"{i.max_bar1_bytes // 1024**2} MiB" if i.max_bar1_bytes else "unknown"),
            ("power limit", f"{i.power_limit_w:g} W (default)" if i.power_limit_w else "unknown"),
            ("min driver", i.min_driver),
            ("MD5", i.md5 or ("unknown" if not o else f"unknown in catalog; local: {o.md5} ({o.source})")),
            ("SHA-256", i.sha256 or "unknown"),
            ("size", f"{i.size} bytes" if i.size else "unknown"),
            ("URLs", ", ".join(i.urls) or "unknown"),
            ("notes", i.notes),
            ("sources", "\n                  ".join(i.sources) or ("none" if not self.local else "")),
        ]
        return [(k, v) for k, v in lines if v]


def show_board(host: Host, board: str) -> BoardView:
    """Return the catalog's board ``board`` (a subsystem or the four PCI IDs). Raises UsageError when unknown,
    MissingError when there is no catalog."""
    cat = load_catalog(host)
    b = cat.find_board(board)
    return BoardView(cat, b, cat.board_entries(b))


@dataclass
class Updated(Result):
    """What ``catalog update`` installed (or found already installed)."""

    result: UpdateResult

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-update/1``: the update's fields (:class:`UpdateResult`)."""
        return fields_of(self.result)

    def text(self, verbose: int = 0) -> Out:
        """Return what people are told: installed (serial, signature, expiry, where), or already up to date."""
        r = self.result
        keys = []
        if r.keys_serial is not None:
            root = f", root key {r.keys_root}" if r.keys_root else ""
            new = " (new)" if r.keys_installed else ""
            new += " (the one installed here: the publisher serves none)" if r.keys_fallback else ""
            keys = [say(f"  keys document: serial {r.keys_serial}{new}{root}")]
        if not r.installed:
            return [
                say(f"catalog already up to date (serial {r.serial}, {r.date}; checked against {r.url})"),
                say(f"  signature: key {r.key.key_id} ({r.key.origin})"),
                *keys,
            ]
        return [
            say(f"installed catalog serial {r.serial} ({r.date}, {r.files} file(s)) from {r.url}"),
            say(f"  signature: key {r.key.key_id} ({r.key.origin})"),
            *keys,
            say(f"  expires {r.expires}; replaces serial {r.previous_serial}; now at {r.location}"),
        ]


def update(
    host: Host, url: str | None, *, timeout: float, retries: int, note: Callable[[str], None] = lambda t: None
) -> Updated:
    """Read the catalog published at ``url`` (http(s) or a catalog directory; default: /etc/fwman/catalog-url,
    else the bundled one), verify it completely and install it atomically; return what was installed (or that it
    already is); ``note`` is told of plain http and of the default. Raises UsageError for a URL that is neither,
    VerificationError for anything that does not verify (nothing installed), DownloadError when unreadable."""
    url = url or configured_url(host)
    if url is None:
        note(f"note: no catalog URL configured: checking {DEFAULT_SOURCE} (docs/catalog.md says how to follow the "
             "maintainers' signed catalog)")  # fmt: skip
    elif url.startswith("http://"):
        note("note: plain http: the signature and hashes are what protect this download")
    options = HttpOptions(read_timeout=timeout, connect_timeout=min(timeout, 10.0), retries=retries)
    source = catalog_source(url, host, options)
    return Updated(update_catalog(host, source[0], options=options, source=source))


@dataclass
class LintReport(Result):
    """What ``catalog lint`` found in ``directory``; ``trust`` is None with ``--local`` (nothing signed)."""

    directory: str
    issues: list[LintIssue]
    trust: TrustCheck | None = None

    @property
    def errors(self) -> list[LintIssue]:
        """Return the issues of level error."""
        return [i for i in self.issues if i.level == "error"]

    def signature(self) -> dict[str, Any] | None:
        """Return the ``signature`` object of the JSON: checked, good, the key, the keys document."""
        trust = self.trust
        if trust is None:
            return None
        key = trust.key
        return {
            "checked": key is not None or bool(trust.issues),  # neither: no index.json, nothing signed to check
            "good": key is not None,
            "key_id": key.key_id if key is not None else None,
            "origin": key.origin if key is not None else None,
            "keys_document": None
            if trust.keys is None
            else {
                "serial": trust.keys.serial,
                "expires": trust.keys.expires,
                "root_key_id": trust.root.key_id if trust.root is not None else None,
                "catalog_keys": [k.key_id for k in trust.keys.keys],
                "retired": [r.key_id for r in trust.keys.retired],
            },
        }

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-lint/1``."""
        return {
            "directory": self.directory,
            "ok": not self.errors,
            "signature": self.signature(),
            "issues": [i.model_dump() for i in self.issues],
        }

    def trust_lines(self) -> list[str]:
        """Return the lines that say what signed the catalog (the keys document, the index key), when good."""
        trust, out = self.trust, []
        if trust is not None and trust.keys is not None and trust.root is not None:
            out.append(f"keys document: good, serial {trust.keys.serial}, root key {trust.root.key_id}, "
                       f"expires {trust.keys.expires}")  # fmt: skip
        if trust is not None and trust.key is not None:
            out.append(f"signature: good, key {trust.key.key_id} ({trust.key.origin})")
        return out

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: what signed the catalog (dim), each issue with its level, or "clean"."""
        out: Out = [say(text, "dim") for text in self.trust_lines()]
        for i in self.issues:
            where = f" {i.where}:" if i.where else ""
            out.append(line(f"{i.file}:{where} ", Span(i.level, "red" if i.level == "error" else "yellow"),
                            f": {i.message}"))  # fmt: skip
        return out if self.issues else [*out, say(f"{self.directory}: clean")]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when an issue is an error; None when there are only warnings."""
        if not self.errors:
            return None
        return VerificationError(
            f"catalog lint: {len(self.errors)} error(s) in {self.directory}",
            hint="fix them; see docs/catalog-format.md",
        )


def lint(host: Host, directory: str | None = None, *, local_only: bool = False) -> LintReport:
    """Return every issue of the catalog ``directory`` (None: the bundled one plus the host's local entries; with
    ``local_only`` those alone). Raises UsageError for ``local_only`` with a directory, never for a bad catalog."""
    if local_only and directory is not None:
        raise UsageError("--local and --dir cannot be combined")
    tree = user_tree(directory) if directory is not None else bundled_tree(BUNDLED_CATALOG)
    issues = [] if local_only else lint_directory(tree)
    if directory is None:
        issues.extend(lint_local_entries(host))
    if local_only:
        return LintReport(LOCAL_DIR, issues)
    trust = lint_signature(tree, root_keys(host), admin_keys(host))
    return LintReport(str(directory or BUNDLED_CATALOG), issues + trust.issues, trust)


@dataclass
class Signed(Written, Result):
    """What ``catalog sign`` wrote: the new index (``index.json`` and its signature)."""

    index: CatalogIndex | None = field(default=None, metadata=OMIT)
    directory: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.catalog-sign/1``: the fields (:class:`Written`'s, the directory), then
        the index's."""
        i = self.index
        assert i is not None
        return {**super().to_json(), "serial": i.serial, "date": i.date, "expires": i.expires, "files": len(i.files)}

    def text(self, verbose: int = 0) -> Out:
        """Return the one line: the index signed (or to sign), its serial, date, file count and expiry."""
        i = self.index
        assert i is not None
        return [say(f"{'would sign' if self.dry_run else 'signed'} {self.directory}/index.json: serial {i.serial}, "
                    f"{i.date}, {len(i.files)} file(s), expires {i.expires}")]  # fmt: skip


def sign(
    key_file: str,
    directory: str | None = None,
    *,
    serial: int | None = None,
    date: str | None = None,
    expires: str | None = None,
    dry_run: bool = False,
) -> Signed:
    """Write ``index.json`` (every board file's SHA-256, a new serial, the date, an expiry) and its signature,
    signed with the key in ``key_file``, into ``directory`` (None: the bundled catalog); ``dry_run``: only say
    so. Returns what was written. Raises UsageError for a bad date, serial or key, VerificationError when the
    catalog does not lint clean."""
    path = user_path(directory or str(BUNDLED_CATALOG))
    stamp = iso_date(date) if date is not None else today()
    until = metadata_time(expires, "--expires") if expires is not None else None
    key = load_private_key(read_user_file(key_file), key_file)
    index_bytes, sig_bytes = sign_directory(user_tree(path), key, stamp, serial, until)
    written = write_files(path, {INDEX_NAME: index_bytes, SIG_NAME: sig_bytes}, dry_run)
    return Signed(dry_run, written.files, parse_index(index_bytes), path)
