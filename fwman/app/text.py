"""Text a result shows people, as pieces with a style name: the result says what is shown and what stands out,
the CLI (``fwman.cli.render``) turns each style name into its terminal colours, or none.

A piece's text may come from outside (a ROM's strings, a catalog note): it is never markup, so it cannot forge a
style; the CLI makes its control characters visible as it does for every line.
"""

from __future__ import annotations

#: one piece of a line: (text, style); style "" is plain, else a name of ``fwman.cli.render.STYLES``
Piece = tuple[str, str]
#: a line: plain text, or pieces written one after the other
Line = str | list[Piece]
