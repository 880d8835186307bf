"""docs/architecture.md against the tree: its picture of ``fwman/`` names every package that exists and nothing
that does not; and the repository paths that docs and code cite (``tests/...``, ``fwman/...``) exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fwman"
DOC = REPO / "docs" / "architecture.md"
#: one name the picture lists: ``cli/``, ``__main__.py``; a line may list several (``forks.py, versions.py``)
_ENTRY = re.compile(r"[\w.]+(?:/|\.py)")
_LISTED = re.compile(r"(?P<indent> *)(?P<names>[\w.]+(?:/|\.py)(?:, [\w.]+(?:/|\.py))*)(?: {2,}|$)")


def picture(text: str) -> set[str]:
    """Return the paths (``reports/audit/``, ``driver/forks.py``) the first ``fwman/`` block of ``text`` lists.

    Raises AssertionError when the page has no such block.
    """
    lines = text.split("\n")
    start = lines.index("fwman/")
    listed: set[str] = set()
    parents: list[tuple[int, str]] = []  # (indent, path) of the enclosing directories
    for line in lines[start + 1 :]:
        if line.startswith("```") or (line and not line.startswith(" ")):
            break  # the end of the block, or the data next to fwman/ (catalog/  hooks/)
        m = _LISTED.match(line)
        if m is None:
            continue  # a continuation of the description column
        indent = len(m.group("indent"))
        while parents and parents[-1][0] >= indent:
            parents.pop()
        prefix = parents[-1][1] if parents else ""
        for name in _ENTRY.findall(m.group("names")):
            listed.add(prefix + name)
            if name.endswith("/"):
                parents.append((indent, prefix + name))
    return listed


def packages(depth: int) -> set[str]:
    """Return the packages of fwman down to ``depth`` levels, named as the picture names them (``reports/audit/``)."""
    found = set()
    for init in PACKAGE.rglob("__init__.py"):
        rel = init.parent.relative_to(PACKAGE)
        if rel.parts and len(rel.parts) <= depth:
            found.add("/".join(rel.parts) + "/")
    return found


def test_the_picture_names_every_package_and_nothing_that_is_gone() -> None:
    listed = picture(DOC.read_text())
    missing = sorted(packages(2) - listed)
    assert not missing, f"packages docs/architecture.md does not show in its picture: {missing}"
    gone = sorted(p for p in listed if not (PACKAGE / p).exists())
    assert not gone, f"docs/architecture.md shows what is not in fwman/: {gone}"


def test_the_picture_parser_reads_nesting_and_lists() -> None:
    text = "x\nfwman/\n  cli/    the CLI\n          (app.py: a note)\n  driver/\n    kmod/   .ko\n"
    text += "    forks.py, dkms.py\n  core/\ncatalog/\n"
    assert picture(text) == {"cli/", "driver/", "driver/kmod/", "driver/forks.py", "driver/dkms.py", "core/"}


#: a repository path cited in prose: not part of a longer path (``/etc/fwman/config.toml`` is a host path)
_CITED = re.compile(r"(?<![/\w.-])((?:tests|fwman)/[\w./-]+\.(?:py|md|sh|toml|json))\b")


def test_cited_repository_files_exist() -> None:
    stale = []
    sources = [*REPO.joinpath("docs").glob("*.md"), REPO / "README.md", *PACKAGE.rglob("*.py")]
    sources += [*REPO.joinpath("tests").rglob("*.py"), *REPO.joinpath("fixtures").rglob("README.md")]
    for source in sources:
        for n, line in enumerate(source.read_text().splitlines(), 1):
            stale += [
                f"{source.relative_to(REPO)}:{n}: {ref}" for ref in _CITED.findall(line) if not (REPO / ref).exists()
            ]
    assert not stale, "references to files that do not exist:\n" + "\n".join(stale)
