"""NVIDIA driver version strings (one owner: the kernel module, the user space, the forks and the reports).

A driver version is ``MAJOR.MINOR`` or ``MAJOR.MINOR.PATCH`` (``565.77``, ``570.86.16``, ``595.71.05``). The
text is kept as written (``05`` stays ``05``) because the kernel module, the user-space libraries and the
GSP firmware directory must carry *exactly* the same string; ordering is numeric. It lives in core/ because
gpu/ (``/proc/driver/nvidia/version``) and driver/ (the fork branches) both read versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from fwman.core.errors import ParseError

# Major versions have been 2-3 digits for two decades (96.43.23 .. 595.71.05); allow 4 for the future.
_VERSION_RE = re.compile(r"(\d{2,4})\.(\d{1,3})(?:\.(\d{1,3}))?")
#: what a P2P fork branch adds to the exact version it builds (``570.86.16-p2p``)
P2P_SUFFIX = "-p2p"


@total_ordering
@dataclass(eq=False, repr=False, slots=True)
class DriverVersion:
    """One NVIDIA driver version, ordered numerically, printed exactly as parsed."""

    major: int
    minor: int
    patch: int | None
    text: str

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        """Return the version in ``text`` (surrounding whitespace allowed).

        Raises ParseError when ``text`` is not ``MAJOR.MINOR[.PATCH]`` made of digits.
        """
        stripped = text.strip()
        m = _VERSION_RE.fullmatch(stripped)
        if m is None:
            raise ParseError("driver version", "version", f"{text!r} is not an NVIDIA driver version (like 570.86.16)")
        patch = int(m.group(3)) if m.group(3) is not None else None
        return cls(int(m.group(1)), int(m.group(2)), patch, stripped)

    @classmethod
    def search(cls, text: str) -> DriverVersion | None:
        """Return the first driver version found inside free text (``... Kernel Module  580.95.05  Release``).

        Returns None when there is none. Never raises.
        """
        for m in re.finditer(r"(?<![\w.])" + _VERSION_RE.pattern + r"(?![\w.])", text):
            return cls.parse(m.group(0))
        return None

    @property
    def key(self) -> tuple[int, int, int, str]:
        """Return the sort key: numeric parts (a missing patch sorts first), then the text as a tie-break."""
        return (self.major, self.minor, -1 if self.patch is None else self.patch, self.text)

    @property
    def branch_name(self) -> str:
        """Return the P2P fork branch name for this exact version (``570.86.16-p2p``)."""
        return self.text + P2P_SUFFIX

    @property
    def run_file(self) -> str:
        """Return NVIDIA's installer file name for this version (``NVIDIA-Linux-x86_64-570.86.16.run``)."""
        return f"NVIDIA-Linux-x86_64-{self.text}.run"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"DriverVersion({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self.key == other.key

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)
