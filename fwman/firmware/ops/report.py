"""Owner reports: what one flash did to one card, from fwman's own records, to attach to an issue.

``fwman flash report --card BUS`` builds an :class:`OwnerReport` from the flash history: the newest successful flash or
restore of the card (versions, image and chain hashes, the card's BAR1, BAR1 offers and power limits as they were
before) and the ``upgrade --check`` that followed it (the same, after the reboot). Nothing is read that could identify
the owner: no GPU UUID, serial number, host name or file path is copied into a report, and free text that fwman copies
(a check's message, an image label) is passed through :func:`redact_text`. ``fwman catalog propose`` reads reports back
with :func:`parse_report`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fwman.core.errors import MissingError, ParseError, VerificationError
from fwman.core.jsontext import parse_json
from fwman.firmware.ops.history import HistoryRecord, read_history
from fwman.gpu.card import Card
from fwman.host.base import Host

SCHEMA = "fwman.report/1"
MAX_REPORT_BYTES = 1 << 20
#: what a report never carries, said in every report so a reader knows what was left out on purpose
REDACTED = ["GPU UUIDs", "serial numbers", "host name", "file paths", "flash logs"]

# GPU-8-4-4-4-12 and bare UUIDs; long digit runs (board serial numbers are 13 digits on the cards seen, a run
# of 10 or more is dropped to be safe: no fwman message carries such a number on purpose)
_UUID = re.compile(r"(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SERIAL = re.compile(r"\b[0-9]{10,}\b")
_PATH = re.compile(r"(?<![\w.])/[^\s:,;]+")


def redact_text(text: str) -> str:
    """Return ``text`` with UUIDs, serial-number-like digit runs and absolute paths replaced by ``[redacted]``."""
    text = _UUID.sub("[redacted]", text)
    text = _SERIAL.sub("[redacted]", text)
    return _PATH.sub(lambda m: m.group(0).rsplit("/", 1)[-1] or "[redacted]", text)


class ReportCard(BaseModel):
    """The card's identity: what the catalog is keyed by, and the board ID nvflash matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor_id: str
    device_id: str
    subsystem_vendor_id: str
    subsystem_device_id: str
    board_id: str | None = None
    name: str | None = None  # nvidia-smi's product name (the GPU's, not the board maker's)

    @property
    def key(self) -> str:
        """Return ``vendor:device:subvendor:subdevice``, the catalog key."""
        return f"{self.vendor_id}:{self.device_id}:{self.subsystem_vendor_id}:{self.subsystem_device_id}"


class CardState(BaseModel):
    """The card at one moment: firmware, BAR1, offers, power limits, and which record said so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str | None = None
    chain_sha256: str | None = None  # the option-ROM chain on the card (read back by nvflash)
    bar1_bytes: int | None = None
    bar1_offers_bytes: list[int] | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    recorded_at: str | None = None
    recorded_by: str  # "flash", "restore", "check", or "not recorded"


class ReportFlash(BaseModel):
    """The flash the report is about."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: str
    kind: str  # "flash" | "restore"
    result: str
    operation: str | None = None
    image: str | None = None  # the image's label, without directories
    image_sha256: str | None = None
    image_chain_sha256: str | None = None
    #: what vouched for the image (the history's ``verified_by``): "catalog", "extracted from a package signed by
    #: <maker> (<subject>)", ...; with ``image_sha256`` it is how the catalog can learn an image's hash
    verified_by: str | None = None


class ReportCheck(BaseModel):
    """The post-reboot check (``fwman upgrade --check``) that followed the flash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: str
    result: str  # "confirmed", "mismatch", "unknown"
    message: str


class OwnerReport(BaseModel):
    """One owner report (JSON schema ``fwman.report/1``, see docs/report.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    generated_at: str
    fwman_version: str
    card: ReportCard
    flash: ReportFlash
    before: CardState
    after: CardState
    check: ReportCheck | None = None
    notes: list[str] = []
    redacted: list[str] = REDACTED

    @property
    def confirmed(self) -> bool:
        """Return True when the flash succeeded and the post-reboot check confirmed it."""
        return self.flash.result == "success" and self.check is not None and self.check.result == "confirmed"


def report_document(report: OwnerReport) -> dict[str, Any]:
    """Return the JSON document of ``report``: ``{"schema": "fwman.report/1", ...}``."""
    return {"schema": SCHEMA, **report.model_dump(mode="json")}


def parse_report(data: bytes, where: str) -> OwnerReport:
    """Return the report in JSON ``data``. Raises VerificationError naming ``where`` and what is wrong."""
    if len(data) > MAX_REPORT_BYTES:
        raise VerificationError(f"{where}: larger than {MAX_REPORT_BYTES} bytes: not an fwman report")
    try:
        doc = parse_json(data, where)
    except ParseError as e:
        raise VerificationError(f"{where}: {e}") from e
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise VerificationError(f"{where}: not an fwman report (schema {found!r}, expected {SCHEMA!r})")
    body = {k: v for k, v in doc.items() if k != "schema"}
    try:
        return OwnerReport.model_validate(body)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "document"
        raise VerificationError(f"{where}: {loc}: {err['msg']}") from e


#: what a card state copies from the history record that saw it, under the same names
_STATE_FIELDS = ("bar1_bytes", "bar1_offers_bytes", "power_limit_w", "default_power_limit_w")


def _state(record: HistoryRecord, version: str | None, chain: str | None) -> CardState:
    seen = {name: getattr(record, name) for name in _STATE_FIELDS}
    return CardState(version=version, chain_sha256=chain, recorded_at=record.time, recorded_by=record.kind, **seen)


def _label(label: str | None) -> str | None:
    """Return an image label without directories (a cache path names the owner's layout, a home its user)."""
    if label is None:
        return None
    return redact_text(label.rsplit("/", 1)[-1])


#: what a report copies from the card, and from the history record of the flash, under the same names
_CARD_IDS = ("vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id")
_FLASH_FIELDS = ("time", "kind", "result", "operation", "image_sha256", "image_chain_sha256")


def build_report(host: Host, card: Card, *, generated_at: str, fwman_version: str) -> OwnerReport:
    """Return the report of ``card``'s newest successful flash or restore and the last check after it.

    Raises MissingError when fwman recorded no successful flash of the card (nothing to report), and
    VerificationError when the history is damaged.
    """
    records = read_history(host)
    ours = [(n, r) for n, r in enumerate(records) if r.card == card.bus_id]
    flashes = [(n, r) for n, r in ours if r.kind in ("flash", "restore") and r.result == "success"]
    if not flashes:
        raise MissingError(
            f"no successful flash of {card.bus_id} is recorded: nothing to report",
            hint=f"`fwman flash history --card {card.bus_id}` lists what fwman recorded; a report follows "
            "`upgrade --apply` and --check",
        )
    at, flash = flashes[-1]
    notes: list[str] = []
    # the last check after the flash: one run before the reboot (the old firmware still running, or no driver)
    # records "unknown" or "mismatch"; the check after the reboot is the one that tells
    check_record = next((r for r in reversed(records[at + 1 :]) if r.card == card.bus_id and r.kind == "check"), None)
    # what ran before: the flash recorded the card as it was then; nvidia-smi cannot run while the driver is
    # unloaded for the flash, so the power limits come from the last check before it, when that check saw the
    # same firmware the flash replaced
    before = _state(flash, flash.before_version, flash.before_chain_sha256)
    if before.power_limit_w is None and before.default_power_limit_w is None:
        checks = (r for r in reversed(records[:at]) if r.card == card.bus_id and r.kind == "check")
        replaced = (flash.before_version or "").upper()
        earlier = next((r for r in checks if (r.after_version or "").upper() == replaced), None)
        if earlier is not None and (earlier.power_limit_w is not None or earlier.default_power_limit_w is not None):
            limits = {"power_limit_w": earlier.power_limit_w, "default_power_limit_w": earlier.default_power_limit_w}
            before = before.model_copy(update=limits)
            notes.append(f"power limits before: from the check of {earlier.time} (the same firmware)")
        else:
            notes.append(
                "power limits before: unknown (nvidia-smi cannot run while the driver is unloaded for a flash, "
                "and no earlier check saw that firmware)"
            )
    if check_record is None:
        after = CardState(version=flash.after_version, chain_sha256=flash.after_chain_sha256, recorded_by="flash")
        notes.append("no post-reboot check yet: reboot, then `fwman upgrade --check`, then report again")
        check = None
    else:
        after = _state(check_record, check_record.after_version, flash.after_chain_sha256)
        check = ReportCheck(
            time=check_record.time, result=check_record.result, message=redact_text(check_record.message)
        )
    board_id = (check_record.board_id if check_record else None) or flash.board_id or card.board_id
    return OwnerReport(
        generated_at=generated_at,
        fwman_version=fwman_version,
        card=ReportCard(
            **{name: getattr(card, name) for name in _CARD_IDS},
            board_id=board_id,
            name=redact_text(card.name) if card.name else None,
        ),
        flash=ReportFlash(
            **{name: getattr(flash, name) for name in _FLASH_FIELDS},
            image=_label(flash.image),
            verified_by=redact_text(flash.verified_by) if flash.verified_by else None,
        ),
        before=before,
        after=after,
        check=check,
        notes=notes,
    )
