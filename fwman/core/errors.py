"""The FwmanError tree and the exit-code table.

Every failure a user can meet is a subclass of :class:`FwmanError` carrying its exit code; the CLI entry point
(``fwman.cli.app.main``) is the only place that turns an exception into a process exit status. Commands never
return an integer into click: they raise.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The documented exit statuses (README "Exit codes", docs/exit-codes.md)."""

    OK = 0
    ERROR = 1  # unexpected error (a bug, or an OS error fwman did not anticipate)
    USAGE = 2  # bad command line, bad option value, unknown card
    BLOCKED = 3  # a safety gate blocked the action
    VERIFICATION = 4  # verification failed (hash, signature, audit mismatch, corrupted P2P copy, bad file)
    MISSING = 5  # a required tool or file is missing (nvflash, headers, snapshot entry, no NVIDIA GPU)
    PARTIAL = 6  # partial success: some items failed
    INTERRUPTED = 130  # Ctrl-C


class FwmanError(Exception):
    """Base of every error fwman reports to the user.

    ``message`` is one line shown after ``fwman: error:``; ``hint`` (optional) is a second line telling the
    user what to do about it.
    """

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(FwmanError):
    """The command line asks for something that cannot be (unknown card, conflicting options)."""

    exit_code = ExitCode.USAGE


class BlockedError(FwmanError):
    """A safety gate (a Finding of severity ``block``) stopped a changing operation before any write."""

    exit_code = ExitCode.BLOCKED

    def __init__(self, message: str, hint: str | None = None, findings: list[object] | None = None) -> None:
        super().__init__(message, hint)
        self.findings = findings or []


class VerificationError(FwmanError):
    """Something was checked and found wrong: a hash, a signature, a read-back, an audit."""

    exit_code = ExitCode.VERIFICATION


class ParseError(VerificationError):
    """Input bytes or text could not be parsed.

    Parsers raise only this. ``field`` names what was being read and ``offset`` where (byte offset for binary
    input, line number for text, ``None`` when it does not apply).
    """

    def __init__(self, what: str, field: str, message: str, offset: int | None = None) -> None:
        where = f" at offset 0x{offset:X}" if offset is not None else ""
        super().__init__(f"{what}: {field}{where}: {message}")
        self.what = what
        self.field = field
        self.offset = offset
        self.detail = message


class HostChangeError(FwmanError):
    """The filesystem refused a change on the host (a file where a directory belongs, permissions, full disk).

    ``path`` is the host path (not the ``--root`` one) and ``strerror`` the operating system's reason, so a
    caller can say what it was storing and what to do (free space, fix the path).
    """

    def __init__(self, message: str, path: str, strerror: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.path = path
        self.strerror = strerror


class MissingError(FwmanError):
    """A tool, file or device fwman needs is not there."""

    exit_code = ExitCode.MISSING


class NotRecordedError(FwmanError):
    """A snapshot replay was asked for a path or command it did not record. Never falls back to the machine.

    Deliberately not a MissingError: code that treats a missing file as "absent" must not treat an unrecorded
    one the same way, or a replay would silently answer differently from the machine it recorded.
    """

    exit_code = ExitCode.MISSING


class ToolMissingError(MissingError):
    """An executable is not installed (or not on PATH)."""

    def __init__(self, tool: str, hint: str | None = None) -> None:
        super().__init__(f"required tool not found: {tool}", hint)
        self.tool = tool


class PartialError(FwmanError):
    """Some items of a multi-item operation failed while others succeeded."""

    exit_code = ExitCode.PARTIAL
