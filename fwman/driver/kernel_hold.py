"""Keep a kernel the patched modules will not build for from landing: fwman's own apt pin, and its record.

``fwman modules preflight --hold`` writes ``/etc/apt/preferences.d/fwman-kernel-preflight``: one record per
held kernel release, ``Pin-Priority: -1`` on every version of its packages. apt_preferences(5) (apt 2.6.1):
"P < 0 prevents the version from being installed"; the ``Package`` field may list several names separated by
whitespace; lines beginning with ``Explanation:`` are comments. A metapackage that depends on the held kernel
(``linux-image-amd64``) then cannot be upgraded either, and apt keeps it back.

Why a pin file and not ``apt-mark hold``: a dpkg selection is shared with the owner (a hold the owner placed
and one fwman placed look the same, so fwman could not lift its own without risking the owner's), while this
file is fwman's alone: releasing is removing it, and no hold fwman did not place is ever touched. What is held
is recorded in ``/var/lib/fwman/kernel-hold.json`` (with the versions apt offered, so that a held kernel is
pre-flighted again even though apt no longer offers it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fwman.core import aptprefs, names, paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.core.jsonout import fields_of, meta
from fwman.core.jsontext import parse_json
from fwman.host.actions import Action, RemoveFile, WriteFile
from fwman.host.base import Host

PIN_FILE = paths.APT_KERNEL_PREFLIGHT_PIN
STATE_FILE = paths.KERNEL_HOLD_STATE
SCHEMA = "fwman.kernel-hold/1"


@dataclass
class HeldKernel:
    """One kernel release fwman holds back: its packages (name: version apt offered) and why."""

    kernel: str
    packages: dict[str, str] = field(metadata=meta(via=lambda p: dict(sorted(p.items()))))
    reason: str
    at: str
    commit: str | None = None


@dataclass
class HoldRecord:
    """Every kernel fwman holds, by release."""

    kernels: dict[str, HeldKernel] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """Return the record file's bytes."""
        doc = {"schema": SCHEMA, "kernels": {k: fields_of(self.kernels[k]) for k in sorted(self.kernels)}}
        return (json.dumps(doc, indent=2) + "\n").encode()


def read_record(host: Host) -> HoldRecord:
    """Return fwman's kernel hold record (empty when there is none).

    Raises ParseError naming the file when it is there but damaged: a damaged record is evidence of a hold (the
    pin may well be in place), never "nothing held".
    """
    try:
        if not host.exists(STATE_FILE):
            return HoldRecord()
        doc = parse_json(host.read_bytes(STATE_FILE), STATE_FILE)
    except NotRecordedError:
        return HoldRecord()
    except MissingError as e:
        raise ParseError(STATE_FILE, "file", e.message) from e
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, dict):
        raise ParseError(STATE_FILE, "kernels", "not a table of kernel releases")
    return HoldRecord({kver: _held_kernel(kver, entry) for kver, entry in kernels.items()})


def _held_kernel(kver: str, entry: object) -> HeldKernel:
    """Return one entry of the record, its names checked as the command line checks them: the kernel release
    becomes the pre-flight's scratch directory (removed afterwards) and, with the packages and the date, a
    record of the apt pin. Raises ParseError naming the file and the entry otherwise."""
    if not names.is_kernel_release(kver):
        raise ParseError(STATE_FILE, f"kernels.{kver!r}", "not a kernel release (as --kernel checks one)")
    if not isinstance(entry, dict) or not isinstance(entry.get("packages"), dict):
        raise ParseError(STATE_FILE, f"kernels.{kver}", "not an entry with packages")
    packages = {str(n): str(v) for n, v in entry["packages"].items()}
    for name, version in packages.items():
        if not aptprefs.is_package_name(name) or not aptprefs.is_version(version):
            raise ParseError(STATE_FILE, f"kernels.{kver}.packages", f"{name!r}: {version!r} is not a package version")
    at = str(entry.get("at", ""))
    if aptprefs.one_line(at) != at:
        raise ParseError(STATE_FILE, f"kernels.{kver}.at", f"{at[:40]!r} is not one line")
    commit = entry.get("commit")
    return HeldKernel(kver, packages, str(entry.get("reason", "")), at, str(commit) if commit is not None else None)


def render_pin(record: HoldRecord) -> bytes:
    """Return the apt preferences file holding every package of every kernel in ``record`` (priority -1).

    Raises ParseError for a package name the format cannot hold (:mod:`fwman.core.aptprefs` refuses it).
    """
    pins = [
        # the explanation is one line: the serializer makes it so
        aptprefs.Pin(
            tuple(sorted(held.packages)), "version", "*", -1, explanation=f"fwman {held.at}: {kver}: {held.reason}"
        )
        for kver, held in sorted(record.kernels.items())
    ]
    return aptprefs.render(
        pins,
        header=(
            "written by `fwman modules preflight --hold`: the patched NVIDIA modules do not build for these kernels.",
            "A pre-flight that passes removes a kernel from it; `fwman modules preflight --release` removes it all.",
            "Do not edit: fwman rewrites it (see docs/preflight.md).",
        ),
    )


def hold_actions(record: HoldRecord) -> list[Action]:
    """Return the actions that make the pin file and the record say ``record`` (both removed when it is empty)."""
    if not record.kernels:
        return [RemoveFile(PIN_FILE), RemoveFile(STATE_FILE)]
    return [WriteFile(PIN_FILE, render_pin(record)), WriteFile(STATE_FILE, record.to_bytes())]


def pin_in_place(host: Host) -> bool:
    """Return True when fwman's kernel pin file is there."""
    try:
        return host.exists(PIN_FILE)
    except NotRecordedError:
        return False
