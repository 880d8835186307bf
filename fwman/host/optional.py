"""Reading a file that may be absent: None for absent, and (``read_text_noting``) a note for unreadable."""

from __future__ import annotations

from fwman.core.errors import MissingError, NotRecordedError
from fwman.host.base import Host


def read_text_if_exists(host: Host, path: str) -> str | None:
    """Return the text of ``path``, None when it does not exist.

    Raises NotRecordedError on a snapshot that did not record it, MissingError when it exists but cannot be read.
    """
    if not host.exists(path):
        return None
    return host.read_text(path)


def read_text_noting(host: Host, path: str, unreadable: list[str]) -> str | None:
    """Return the text of ``path``, or None when it is absent or unreadable.

    An unreadable file is appended to ``unreadable`` (``"<path> (not recorded)"`` when a snapshot did not record
    it), so the caller can say which facts it could not check; an absent file is not noted. Never raises.
    """
    try:
        return read_text_if_exists(host, path)
    except NotRecordedError:
        unreadable.append(f"{path} (not recorded)")
    except MissingError:
        unreadable.append(path)
    return None
