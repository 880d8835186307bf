"""Writing the man pages (``python -m fwman.cli.manpage DIR``, the Debian package build): the CLI renders them from the
commands' own ``--help`` (click's); this writes them where the packager says, through the user-file door."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from fwman.host.userfiles import write_user_file


def write_pages(directory: str, pages: Mapping[str, str]) -> None:
    """Write each page (file name -> roff text) into ``directory`` (a directory the user names; it must exist).

    Raises UsageError when a page cannot be written.
    """
    for name, text in pages.items():
        write_user_file(posixpath.join(directory, name), text.encode())
