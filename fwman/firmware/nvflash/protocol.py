"""nvflash: command lines and output parsers (pure: no I/O).

Facts from the design notes' docs/vbios.md (section 4; not in this tree): every run opens with ``NVIDIA Firmware Update
Utility (Version 5.867.0)``; ``--list`` prints ``<1> GeForce RTX 3080     (10DE,2206,1043,87B0) S:00,B:0F,D:00,F:00``
per adapter; ``--save``/``--version`` print a ``Key : Value`` block; a flash succeeds only when it prints ``A reboot is
required for the update to take effect.`` Exit codes are undocumented, so outcomes are judged from the text (and, for a
flash, by a read-back done elsewhere)."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from fwman.core.errors import ParseError

TOOL = "nvflash"
BANNER_PREFIX = "NVIDIA Firmware Update Utility"
SUCCESS_LINE = "A reboot is required for the update to take effect."
NOTHING_CHANGED = "Nothing changed!"
DRIVER_LOADED_MARK = "necessary to unload the NVIDIA kernel driver first"
PROTECTION_DONE = "Setting EEPROM protection complete."
CONFIRM_PROMPT = "Press 'y' to confirm"

_BANNER_RE = re.compile(r"NVIDIA Firmware Update Utility \(Version (?P<v>\d+(?:\.\d+)+)\)")
# An adapter line is ``<index> NAME (VVVV,DDDD,SSSS,SSSS) S:..,B:..,D:..,F:..``, read in two parts (see
# _adapter_line): one pattern ``\s+(?P<name>.*?)\s*\(`` tried every split of a run of blanks between three
# quantifiers, cubic in the line's length (a 4000-character line took 31 s).
_LIST_HEAD = re.compile(r"\s*<(?P<index>\d+)>\s+")
_LIST_TAIL = re.compile(
    r"\((?P<v>[0-9A-Fa-f]{4}),(?P<d>[0-9A-Fa-f]{4}),(?P<sv>[0-9A-Fa-f]{4}),(?P<sd>[0-9A-Fa-f]{4})\)\s+"
    r"S:(?P<s>[0-9A-Fa-f]{2,4}),B:(?P<b>[0-9A-Fa-f]{2}),D:(?P<dev>[0-9A-Fa-f]{2}),F:(?P<f>[0-9A-Fa-f]{1,2})"
    r"(?:\s+H:\S+)?\s*$"
)
#: a ``Key : Value`` key (the part before the first colon, trailing blanks stripped in code: a lazy key
#: followed by ``\s*`` was quadratic in a run of blanks)
_KV_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 '()/._-]*")
_ID_RE = re.compile(
    r"ID:(?P<v>[0-9A-Fa-f]{4}):(?P<d>[0-9A-Fa-f]{4}):(?P<sv>[0-9A-Fa-f]{4}|None):(?P<sd>[0-9A-Fa-f]{4}|None)"
)
_VER_RE = re.compile(r"Version:(?P<ver>\S+)")
_BOARD_RE = re.compile(r"(?P<who>Adapter|Firmware image) Board ID:\s*(?P<id>[0-9A-Fa-f]+)")
_SUBSYS_RE = re.compile(r"PCI Subsystem ID \((?P<sv>[0-9A-Fa-f]{4})\.(?P<sd>[0-9A-Fa-f]{4})\)")


# -- command lines ---------------------------------------------------------------------------------------------
def list_argv(tool: str = TOOL) -> list[str]:
    """Return the argv listing adapters (``nvflash --list``)."""
    return [tool, "--list"]


def save_argv(index: int, path: str, tool: str = TOOL) -> list[str]:
    """Return the argv saving adapter ``index``'s EEPROM to ``path`` (a real filesystem path)."""
    return [tool, "--index", str(index), "--save", path]


def version_argv(*, index: int | None = None, file: str | None = None, tool: str = TOOL) -> list[str]:
    """Return the argv printing the identity block of adapter ``index`` or of image ``file``.

    Raises ValueError when neither or both are given (a programming error, not a user one).
    """
    if (index is None) == (file is None):
        raise ValueError("version_argv needs exactly one of index or file")
    if file is not None:
        return [tool, "--version", file]
    return [tool, "--index", str(index), "--version"]


def protectoff_argv(index: int, tool: str = TOOL) -> list[str]:
    """Return the argv removing EEPROM write protection on adapter ``index``."""
    return [tool, "--index", str(index), "--protectoff"]


def flash_argv(index: int, image: str, *, override_subsystem: bool = False, tool: str = TOOL) -> list[str]:
    """Return the argv flashing ``image`` onto adapter ``index`` (answers come through a terminal)."""
    argv = [tool, "--index", str(index)]
    if override_subsystem:
        argv.append("--overridesub")
    return [*argv, image]


# -- models ----------------------------------------------------------------------------------------------------
class Adapter(BaseModel):
    """One ``--list`` line. IDs lower-case hex; ``bus_id`` in sysfs form (``0000:41:00.0``)."""

    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    vendor_id: str
    device_id: str
    subsystem_vendor_id: str
    subsystem_device_id: str
    bus_id: str

    @property
    def subsystem(self) -> str:
        """Return ``vvvv:dddd``."""
        return f"{self.subsystem_vendor_id}:{self.subsystem_device_id}"


class FirmwareBlock(BaseModel):
    """The ``Key : Value`` block of ``--save`` / ``--version``; every field None when not printed."""

    model_config = ConfigDict(frozen=True)

    version: str | None = None
    build_date: str | None = None
    modification_date: str | None = None
    uefi_version: str | None = None
    subsystem_vendor_id: str | None = None  # lower-case hex, from "Subsystem Vendor ID" or "IFR Subsystem ID"
    subsystem_device_id: str | None = None
    board_id: str | None = None  # "0x0240"
    device_id: str | None = None  # lower-case hex "2204"
    fields: dict[str, str] = {}

    @property
    def subsystem(self) -> str | None:
        """Return ``vvvv:dddd`` or None."""
        if self.subsystem_vendor_id and self.subsystem_device_id:
            return f"{self.subsystem_vendor_id}:{self.subsystem_device_id}"
        return None


class FlashOutcome(StrEnum):
    """What a flash transcript says happened (a read-back still decides success)."""

    SUCCESS = "success"  # the success line was printed
    DRIVER_LOADED = "driver_loaded"
    SUBSYSTEM_MISMATCH = "subsystem_mismatch"
    BOARD_ID_MISMATCH = "board_id_mismatch"
    REFUSED = "refused"  # "Nothing changed!" for another reason (abort, protection, unreadable image)
    INCOMPLETE = "incomplete"  # output stopped without a verdict: the write may have been cut


class FlashTranscript(BaseModel):
    """A parsed flash run."""

    model_config = ConfigDict(frozen=True)

    outcome: FlashOutcome
    tool_version: str | None = None
    current_version: str | None = None
    replace_version: str | None = None
    current_ids: str | None = None  # "10de:2204:3842:3987"
    replace_ids: str | None = None
    adapter_board_id: str | None = None
    image_board_id: str | None = None
    image_subsystem: str | None = None  # from the mismatch warning, "3842:3982"
    adapter_subsystem: str | None = None
    prompted: bool = False
    errors: list[str] = []
    warnings: list[str] = []

    @property
    def nothing_changed(self) -> bool:
        """Return True when nvflash said it refused before writing."""
        return self.outcome not in (FlashOutcome.SUCCESS, FlashOutcome.INCOMPLETE)


# -- parsers ---------------------------------------------------------------------------------------------------
def _clean_lines(text: str) -> list[str]:
    """Split output into lines, dropping carriage-return progress redraws (keeps the last redraw)."""
    return [raw.rsplit("\r", 1)[-1].rstrip() for raw in text.replace("\r\n", "\n").split("\n")]


def parse_tool_version(text: str) -> str:
    """Return nvflash's version from its banner line (``5.867.0``).

    Raises ParseError when no banner is present (the program is not nvflash, or it crashed at once).
    """
    for line in _clean_lines(text)[:5]:
        m = _BANNER_RE.search(line)
        if m:
            return m.group("v")
    raise ParseError("nvflash output", "banner", f"no '{BANNER_PREFIX} (Version x.y.z)' line", 1)


def driver_loaded(text: str) -> bool:
    """Return True when nvflash refused because the NVIDIA kernel driver is loaded."""
    return DRIVER_LOADED_MARK in text


def _adapter_line(line: str) -> tuple[str, str, re.Match[str]] | None:
    r"""Return (index, name, the match of the IDs and bus part) of an ``nvflash --list`` adapter line, or None.

    The name is everything between the blanks after ``<index>`` and the first ``(`` that starts a valid ID
    and bus part, trailing blanks stripped: what the lazy ``(?P<name>.*?)\s*\(`` of one pattern gave.
    """
    head = _LIST_HEAD.match(line)
    if head is None:
        return None
    rest = line[head.end() :]
    tail = _LIST_TAIL.search(rest)  # the leftmost "(" that works: the lazy name's shortest choice
    if tail is None:
        return None
    return head.group("index"), rest[: tail.start()].rstrip(), tail


def _key_value(line: str) -> tuple[str, str] | None:
    """Return (key, value) of a ``Key : Value`` line (value as after ``: ``, not stripped), or None.

    The key is the text before the first ``:`` without its trailing blanks; the colon must be followed by a
    blank. Linear: a partition and one pattern with a single quantifier.
    """
    key, colon, rest = line.partition(":")
    if not colon or not rest[:1].isspace():
        return None
    key = key.rstrip()
    return (key, rest[1:]) if _KV_KEY.fullmatch(key) else None


def parse_list(text: str) -> list[Adapter]:
    """Return the adapters of ``nvflash --list`` output, in index order.

    Raises ParseError when a line starting with ``<n>`` does not have the documented shape, or when two
    lines share an index.
    """
    adapters: list[Adapter] = []
    seen: set[int] = set()
    for n, line in enumerate(_clean_lines(text), start=1):
        if not line.lstrip().startswith("<"):
            continue
        parsed = _adapter_line(line)
        if parsed is None:
            raise ParseError("nvflash --list", "adapter line", f"unexpected shape: {line[:80]!r}", n)
        index_text, name, m = parsed
        index = int(index_text)
        if index in seen:
            raise ParseError("nvflash --list", "index", f"index {index} listed twice", n)
        seen.add(index)
        bus = f"{int(m.group('s'), 16):04x}:{m.group('b').lower()}:{m.group('dev').lower()}.{int(m.group('f'), 16):x}"
        v, d, sv, sd = _ids(m).split(":")
        ids = {"vendor_id": v, "device_id": d, "subsystem_vendor_id": sv, "subsystem_device_id": sd}
        adapters.append(Adapter(index=index, name=name, bus_id=bus, **ids))
    return sorted(adapters, key=lambda a: a.index)


def _hex4(value: str, what: str, line: int) -> str:
    v = value.strip()
    if v.lower().startswith("0x"):
        v = v[2:]
    if not v or len(v) > 4 or any(c not in "0123456789abcdefABCDEF" for c in v):
        raise ParseError("nvflash block", what, f"not a 16-bit hex ID: {value[:40]!r}", line)
    return f"{int(v, 16):04x}"


def parse_block(text: str) -> FirmwareBlock:
    """Return the ``Key : Value`` block of ``--save`` or ``--version`` output.

    Raises ParseError when no ``Version`` key is present or an ID field is not hexadecimal.
    """
    fields: dict[str, str] = {}
    lines: dict[str, int] = {}
    for n, line in enumerate(_clean_lines(text), start=1):
        kv = _key_value(line.strip())
        if kv is None:
            continue
        key = kv[0].strip()
        if key not in fields:
            fields[key] = kv[1].strip()
            lines[key] = n
    if "Version" not in fields:
        raise ParseError("nvflash block", "Version", "no 'Version : ...' line in the output")

    def get(key: str) -> str | None:
        value = fields.get(key)
        return None if value in (None, "", "N/A") else value

    svid = sdid = None
    if get("Subsystem Vendor ID") and get("Subsystem ID"):
        svid = _hex4(fields["Subsystem Vendor ID"], "Subsystem Vendor ID", lines["Subsystem Vendor ID"])
        sdid = _hex4(fields["Subsystem ID"], "Subsystem ID", lines["Subsystem ID"])
    ifr = get("IFR Subsystem ID")
    if ifr is not None:
        parts, at = re.split(r"[-:.]", ifr), lines["IFR Subsystem ID"]
        if len(parts) != 2:
            raise ParseError("nvflash block", "IFR Subsystem ID", f"expected VVVV-DDDD: {ifr[:40]!r}", at)
        ifr_v, ifr_d = (_hex4(part, "IFR Subsystem ID", at) for part in parts)
        if svid is None:
            svid, sdid = ifr_v, ifr_d
        elif (svid, sdid) != (ifr_v, ifr_d):
            raise ParseError(
                "nvflash block", "IFR Subsystem ID", f"{ifr} disagrees with Subsystem ID {svid}:{sdid}", at
            )
    board = get("Board ID")
    board_id = "0x" + _hex4(board.split()[0], "Board ID", lines["Board ID"]) if board is not None else None
    device = get("Device ID")
    device_id = None
    if device is not None:
        # "0x2204" or "10DE:2204": the device is the last colon-separated part of the first word
        words = device.split()
        device_id = _hex4(words[0].split(":")[-1] if words else "", "Device ID", lines["Device ID"])
    version = get("Version")
    return FirmwareBlock(
        version=version.split()[0].upper() if version else None,
        build_date=get("Build Date"),
        modification_date=get("Modification Date"),
        uefi_version=get("UEFI Version"),
        subsystem_vendor_id=svid,
        subsystem_device_id=sdid,
        board_id=board_id,
        device_id=device_id,
        fields=fields,
    )


def _ids(m: re.Match[str]) -> str:
    return ":".join(m.group(k).lower() for k in ("v", "d", "sv", "sd"))


def _version_ids(s: str, version: str | None, ids: str | None) -> tuple[str | None, str | None]:
    """Return the version and the IDs a ``Current`` or ``Replace with`` line gives, each the one passed in when
    the line does not give it (an ID of ``None`` is not given)."""
    vm, im = _VER_RE.search(s), _ID_RE.search(s)
    return vm.group("ver").upper() if vm else version, _ids(im) if im and "None" not in im.group(0) else ids


def parse_flash(text: str) -> FlashTranscript:
    """Return what a flash run's output says happened. Never raises: unknown output is ``INCOMPLETE``.

    The success line decides ``SUCCESS`` only when no error line follows it; a refusal (``Nothing changed!``
    or the driver-loaded error) is classified by the warning that preceded it.
    """
    found: dict[str, str | None] = {}  # the transcript's facts, by field name, as the lines give them
    errors: list[str] = []
    warnings: list[str] = []
    prompted = success = nothing = board_mismatch = sub_mismatch = False
    for line in _clean_lines(text):
        s = line.strip()
        m = _BANNER_RE.search(s)
        if m:
            found.setdefault("tool_version", m.group("v"))
        which = "current" if s.startswith("Current") and "-" in s else "replace" if s.startswith("Replace with") else ""
        if which:
            version, ids = _version_ids(s, found.get(f"{which}_version"), found.get(f"{which}_ids"))
            found[f"{which}_version"], found[f"{which}_ids"] = version, ids
        bm = _BOARD_RE.search(s)
        if bm:
            value = f"0x{int(bm.group('id'), 16):04x}" if len(bm.group("id")) <= 8 else None
            found["adapter_board_id" if bm.group("who") == "Adapter" else "image_board_id"] = value
        sm = _SUBSYS_RE.search(s)
        if sm and ("Firmware image" in s or "adapter" in s):
            sub = f"{sm.group('sv').lower()}:{sm.group('sd').lower()}"
            found["image_subsystem" if "Firmware image" in s else "adapter_subsystem"] = sub
        if s.startswith("WARNING:"):
            warnings.append(s)
            if "Board ID" in s:
                board_mismatch = True
            if "Subsystem ID" in s:
                sub_mismatch = True
        if s.startswith("ERROR:"):
            errors.append(s)
            if "Board ID mismatch" in s:
                board_mismatch = True
        prompted = prompted or CONFIRM_PROMPT in s
        success = success or s == SUCCESS_LINE
        nothing = nothing or s == NOTHING_CHANGED
    if driver_loaded(text):
        outcome = FlashOutcome.DRIVER_LOADED
    elif success and not nothing and not errors:
        outcome = FlashOutcome.SUCCESS
    elif nothing and board_mismatch:
        outcome = FlashOutcome.BOARD_ID_MISMATCH
    elif nothing and sub_mismatch and not prompted:
        outcome = FlashOutcome.SUBSYSTEM_MISMATCH
    elif nothing:
        outcome = FlashOutcome.REFUSED
    else:
        outcome = FlashOutcome.INCOMPLETE
    return FlashTranscript(outcome=outcome, prompted=prompted, errors=errors, warnings=warnings, **found)


def match_adapter(adapters: list[Adapter], bus_id: str, vendor_id: str, device_id: str, subsystem: str) -> Adapter:
    """Return the adapter at PCI location ``bus_id`` whose IDs equal the card's.

    Raises ParseError when no adapter sits at that bus location, or when the one there reports other IDs
    (the inventory and nvflash disagree: flashing would target the wrong card).
    """
    wanted = bus_id.lower()
    if wanted.count(":") == 1:
        wanted = "0000:" + wanted
    for a in adapters:
        if a.bus_id == wanted:
            ids = (a.vendor_id, a.device_id, a.subsystem)
            if ids != (vendor_id.lower(), device_id.lower(), subsystem.lower()):
                raise ParseError(
                    "nvflash --list",
                    f"adapter <{a.index}>",
                    f"at {wanted} nvflash sees {':'.join(ids)}, the inventory {vendor_id}:{device_id}:{subsystem}",
                )
            return a
    raise ParseError("nvflash --list", "bus location", f"no adapter at {wanted} ({len(adapters)} listed)")
