"""``git ls-remote`` of a fork: its heads (branches) and an upstream's tags, and the pure parsers of its output."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.git import GIT_ENV, failure_text, git_target
from fwman.host.base import Host


def parse_ls_remote(text: str) -> list[str]:
    """Return the branch names in ``git ls-remote`` output; only ``refs/heads/`` lines count (tags do not).

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    return list(parse_ls_remote_commits(text))


def parse_ls_remote_commits(text: str) -> dict[str, str]:
    """Return {branch: commit} of the ``refs/heads/`` lines of ``git ls-remote`` output, in order.

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    return {ref.removeprefix("refs/heads/"): sha for sha, ref in _ls_remote_refs(text) if ref.startswith("refs/heads/")}


def _ls_remote_refs(text: str) -> Iterator[tuple[str, str]]:
    """Yield (commit, ref) of each ``<sha>\\t<ref>`` line of ``git ls-remote`` output (blank lines skipped).

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sha, sep, ref = line.partition("\t")
        if not sep or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha.strip()):
            raise ParseError("git ls-remote output", "line", f"{line[:60]!r} is not '<sha>\\t<ref>'", number)
        yield sha.strip(), ref.strip()


def parse_ls_remote_tags(text: str, tags: Sequence[str]) -> dict[str, str]:
    """Return {tag: commit} of the ``tags`` that ``git ls-remote --tags`` output ``text`` lists, in ``tags``' order:
    an annotated tag's peeled ``refs/tags/T^{}`` line (its commit) wins over the tag object's own line.

    Raises ParseError for a line that is not ``<sha>\\t<ref>``.
    """
    found: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for sha, ref in _ls_remote_refs(text):
        name = ref.removeprefix("refs/tags/")
        if name.endswith("^{}"):
            peeled[name[:-3]] = sha
        else:
            found[name] = sha
    return {t: peeled.get(t, found[t]) for t in tags if t in found}


def list_via_git(host: Host, url: str, timeout: float = 30.0) -> dict[str, str]:
    """Return {branch: commit} of ``url`` from ``git ls-remote --heads``.

    Raises FwmanError when git fails, its message ending with git's stderr (the last 40 lines, 4 KiB at most).
    """
    return parse_ls_remote_commits(_ls_remote(host, url, "--heads", [], timeout))


def list_tags(host: Host, url: str, tags: Sequence[str], timeout: float = 30.0) -> dict[str, str]:
    """Return {tag: commit} of the ``tags`` that ``url`` has (``git ls-remote --tags``; an annotated tag's
    commit is its peeled ``^{}`` line).

    Raises MissingError without git, FwmanError when git fails (git's message kept, bounded), ParseError for
    output that is not ``<sha>\\t<ref>`` lines.
    """
    # the peeled line is listed only when asked for by name: an annotated tag's own sha is not a commit
    refs = [ref for t in tags for ref in (f"refs/tags/{t}", f"refs/tags/{t}^{{}}")]
    return parse_ls_remote_tags(_ls_remote(host, url, "--tags", refs, timeout), tags)


def _ls_remote(host: Host, url: str, kind: str, refs: Sequence[str], timeout: float) -> str:
    """Return the output of ``git ls-remote KIND -- URL REFS``. Raises MissingError without git, FwmanError when
    git fails."""
    argv = ["git", "ls-remote", kind, "--", git_target(host, url), *refs]
    result = host.run(argv, timeout=timeout, env=GIT_ENV)
    if result.missing:
        raise MissingError("git is not installed")
    if not result.ok:  # git's whole reason (bounded): its last line alone can say the opposite of the truth
        raise FwmanError(failure_text(f"git ls-remote {url}", result.rc, result.stderr))
    return result.stdout
