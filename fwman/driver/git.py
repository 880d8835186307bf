"""What every git call of fwman shares: the environment that never prompts, and git's error kept whole.

git writes its reason over several lines, and the last one alone can read as the opposite of the truth
(``fatal: Could not read from remote repository.`` / ``Please make sure you have the correct access rights`` /
``and the repository exists.``), so a failure keeps the end of stderr, bounded: the last
:data:`MAX_LINES` lines and at most :data:`MAX_BYTES` of them.
"""

from __future__ import annotations

from fwman.core import names
from fwman.core.errors import MissingError
from fwman.host.base import Host

#: no terminal prompt, no askpass helper: a hook or the boot service must fail, never wait for a password
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true"}
MAX_LINES = 40
MAX_BYTES = 4096


def stderr_tail(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> str:
    """Return the end of git's ``text`` (its stderr): the last ``max_lines`` non-empty lines, cut to the last
    ``max_bytes`` bytes (whole lines where possible), with a ``[...]`` line first when anything was dropped.
    Returns "" for empty text. Never raises."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    kept = lines[-max_lines:]
    while len(kept) > 1 and len("\n".join(kept).encode()) > max_bytes:
        kept = kept[1:]
    joined = "\n".join(kept)
    if len(joined.encode()) > max_bytes:  # one line longer than the budget: keep its end
        joined = joined.encode()[-max_bytes:].decode("utf-8", errors="replace")
    if len(kept) < len(lines) or joined != "\n".join(kept):
        joined = "[...]\n" + joined
    return joined


def failure_text(what: str, rc: int, stderr: str) -> str:
    """Return ``what`` failed, with git's exit status and its stderr tail indented below (one line when git
    said nothing)."""
    tail = stderr_tail(stderr)
    if not tail:
        return f"{what} failed (exit {rc}, git printed nothing)"
    return f"{what} failed (exit {rc}):\n" + "\n".join(f"  {line}" for line in tail.splitlines())


def git_target(host: Host, url: str) -> str:
    """Return what git is handed for fork ``url``: a host path (``/srv/git/fork``) as the real path behind it
    (under ``--root``, inside the root), anything else as given.

    Raises UsageError for a URL git must not see (``names.fork_url``: an option, a remote helper), MissingError
    for a host path on a host without a local filesystem (a snapshot).
    """
    names.fork_url(url)  # never an option: checked where forks are parsed, and again here at the door to git
    if not url.startswith("/"):
        return url
    local = host.local_path(url)
    if local is None:
        raise MissingError(f"cannot use local repository {url} on {host.description}")
    return local
