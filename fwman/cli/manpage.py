"""Generate man pages from the commands' own --help: ``python -m fwman.cli.manpage DIR`` (used by the Debian
package build, debian/rules).

One page per top-level command, as git does: ``fwman(1)`` (the global help and the command list) and
``fwman-CMD(1)`` holding the help of ``fwman CMD`` and of every command below it. The help text is set as a
no-fill block, so what ``man`` shows is exactly what ``--help`` prints (the same text docs/cli.md is made of).
"""

from __future__ import annotations

import sys

from fwman import __version__
from fwman.cli.app import COMMANDS, cli
from fwman.cli.docgen import _walk, help_text

#: the width click wraps --help to: man indents the block by 7 columns, and 72 + 7 fits an 80-column
#: terminal (the ``\\b`` example blocks keep their own lines, as in --help)
WIDTH = 72


def roff_escape(text: str) -> str:
    """Return ``text`` safe for a roff no-fill block: backslashes and hyphens escaped, no line that starts a
    request (a leading ``.`` or ``'``), no blank line (roff keeps those, but lintian flags them in a page)."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip().replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line if line else ".sp")
    return "\n".join(out)


def _page(name: str, summary: str, sections: list[tuple[str, str]], see_also: list[str]) -> str:
    """Return one roff page: NAME, then each (heading, help text) as a no-fill block, then SEE ALSO."""
    title = roff_escape(name.upper())
    lines = [
        f'.TH {title} 1 "" "fwman {__version__}" "fwman manual"',
        ".SH NAME",
        f"{roff_escape(name)} \\- {roff_escape(summary)}",
    ]
    for heading, text in sections:
        lines += [f".SH {roff_escape(heading)}", ".nf", roff_escape(text), ".fi"]
    if see_also:
        lines += [".SH SEE ALSO", ",\n".join(f".BR {roff_escape(s)} (1)" for s in see_also)]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Return {file name: roff text}: ``fwman.1`` and ``fwman-CMD.1`` for every visible top-level command."""
    chains = _walk([("fwman", cli)])
    top = [c for c in chains if len(c) == 2]
    result = {
        "fwman.1": _page(
            "fwman",
            "firmware and patched-driver lifecycle manager for multi-GPU NVIDIA hosts",
            [("DESCRIPTION", help_text(chains[0], WIDTH))],
            [f"fwman-{c[1][0]}" for c in top],
        )
    }
    for chain in top:
        name = chain[1][0]
        below = [c for c in chains if len(c) > 2 and c[1][0] == name]
        summary = COMMANDS[name][1] if name in COMMANDS else chain[1][1].get_short_help_str(limit=70)
        sections = [("DESCRIPTION", help_text(chain, WIDTH))]
        sections += [(" ".join(n for n, _ in c).upper(), help_text(c, WIDTH)) for c in below]
        result[f"fwman-{name}.1"] = _page(f"fwman-{name}", summary.rstrip("."), sections, ["fwman"])
    return result


def main(argv: list[str] | None = None) -> int:
    """Write every page into the directory given as the only argument (it must exist); return the exit status
    (2: usage). Raises UsageError when a page cannot be written."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m fwman.cli.manpage DIR\n")
        return 2
    from fwman.app.manpages import write_pages

    write_pages(args[0], pages())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
