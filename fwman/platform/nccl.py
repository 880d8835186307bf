"""``/etc/nccl.conf``: the NCCL settings every process on this host reads (NCCL reads the file itself)."""

from __future__ import annotations

from fwman.core import paths
from fwman.host.base import Host
from fwman.platform.envfile import parse_env_file

CONF = paths.NCCL_CONF


def read_nccl_conf(host: Host) -> tuple[str, dict[str, str]] | None:
    """Return (text, assignments) of ``/etc/nccl.conf``, None when there is none.

    Raises NotRecordedError on a snapshot that did not record it, MissingError when it cannot be read.
    """
    if not host.exists(CONF):
        return None
    text = host.read_text(CONF)
    return text, parse_env_file(text)
