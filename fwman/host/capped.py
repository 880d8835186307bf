"""Bounded reads: the one way fwman reads a file whose size someone else chooses.

A file under a user's home, in a container's layers or volumes, or unpacked from a package is as large as its
owner makes it: ``truncate -s 512M ~/.cache/vllm/gpu_p2p_access_cache_for_0,1.json`` is one command for any user,
and reading it whole as root took a gigabyte. :func:`read_capped` asks the Host for one byte more than the bound
(LiveHost reads that much from the open file, never more), so a file past the bound is refused with
:class:`~fwman.core.bounded.OverLimit` ("over 64 KiB ...", a ParseError: exit 4, or a note where the caller
reports what it could not read) before more than the bound is ever held.
"""

from __future__ import annotations

from fwman.core.bounded import MiB, OverLimit, size_text
from fwman.host.base import Host

#: one of fwman's own JSON records (a hold, a pre-flight's verdicts): kilobytes; past this it is not fwman's
MAX_RECORD = 16 * MiB
#: a CDI spec, a Makefile of a header tree, a text file a tool generated: kilobytes to a few hundred
MAX_TEXT_FILE = 4 * MiB


def read_capped(host: Host, path: str, limit: int, what: str) -> bytes:
    """Return the bytes of ``path``, which ``what`` names in an error (``vLLM P2P cache``).

    Raises OverLimit when the file holds more than ``limit`` bytes (at most ``limit + 1`` are read), and
    MissingError / NotRecordedError as the Host's ``read_bytes`` does.
    """
    data = host.read_bytes(path, limit=limit + 1)
    if len(data) > limit:
        raise OverLimit(f"{what} {path}", "file size", size_text(limit))
    return data


def read_text_capped(host: Host, path: str, limit: int, what: str) -> str:
    """Return :func:`read_capped`'s bytes decoded as UTF-8 (errors replaced, as ``Host.read_text`` does)."""
    return read_capped(host, path, limit, what).decode("utf-8", errors="replace")
