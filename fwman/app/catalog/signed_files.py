"""What the maintainers' signing commands (``catalog sign``, ``catalog keys sign``) share: the files they write
into a user-named catalog directory (or, in a dry run, would), and the dates they are given."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core import clock
from fwman.core.errors import UsageError
from fwman.core.jsonout import meta
from fwman.core.names import iso_date
from fwman.firmware.catalog.schema import parse_timestamp
from fwman.host.userfiles import is_user_file, read_user_file, write_user_file


@dataclass
class Written:
    """The files a signing command wrote (or, in a dry run, would write): each path and whether it changed."""

    dry_run: bool = field(metadata=meta(then=("changed",)))
    #: path -> its bytes differ from what was there; in JSON ``written``, the paths written (or to write in a dry run)
    files: dict[str, bool] = field(
        default_factory=dict, metadata=meta(key="written", via=lambda f: [p for p, differs in f.items() if differs])
    )

    @property
    def changed(self) -> bool:
        """Return True when a file was changed (never in a dry run)."""
        return not self.dry_run and any(self.files.values())


def write_files(directory: str, files: dict[str, bytes], dry_run: bool) -> Written:
    """Write ``files`` (name -> bytes) into the user-named ``directory`` unless ``dry_run``; return what
    changed. Raises UsageError when a file cannot be written."""
    written = Written(dry_run)
    for name, data in files.items():
        path = f"{directory}/{name}"
        written.files[path] = not is_user_file(path) or read_user_file(path) != data
        if not dry_run and written.files[path]:
            write_user_file(path, data)
    return written


def today() -> str:
    """Return today's date, UTC, as YYYY-MM-DD (the default date of a signed document)."""
    return clock.now_utc().strftime("%Y-%m-%d")


def metadata_time(value: str, option: str) -> str:
    """Return ``value`` (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ) as a metadata timestamp. Raises UsageError."""
    stamp = value if "T" in value else f"{iso_date(value, option)}T00:00:00Z"
    try:
        parse_timestamp(stamp)
    except ValueError:
        raise UsageError(
            f"{option} {value!r}: not a date", hint="give YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)"
        ) from None
    return stamp
