"""Keep the NVIDIA user space in lockstep with the patched module: an apt hold, and the upgrades it blocks.

The patched module carries one exact driver version; the user-space driver (``libnvidia-*``, ``nvidia-*``,
``libcuda1``...) must carry the same, on the host and in every container, or NVML fails with
"Driver/library version mismatch" while the module stays loaded. An unattended upgrade of those packages is the
usual way that happens. ``fwman userspace hold``:

- pins every installed NVIDIA user-space package to its installed version in
  ``/etc/apt/preferences.d/fwman-nvidia-userspace`` (``Pin: version <installed>``, ``Pin-Priority: 1001``: the
  installed version stays apt's candidate even when a newer one is in the lists);
- adds each to unattended-upgrades' ``Unattended-Upgrade::Package-Blacklist`` in
  ``/etc/apt/apt.conf.d/51fwman-nvidia-userspace`` (apt merges list entries across files; unattended-upgrades
  reads the entries as Python regular expressions, so each is anchored: ``^name$``);
- records what it did in ``/var/lib/fwman/userspace-hold.json``. ``release`` removes the two files and the
  record, and nothing else.

The DKMS packages (``*-dkms``) are left to ``fwman dkms block``, and the container toolkit
(``libnvidia-container*``, ``nvidia-container-*``) has its own version line, so neither is held here. When
the libraries came from NVIDIA's ``.run`` installer there is no package to pin: :func:`read_status` says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fwman.core import aptprefs, paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host
from fwman.host.capped import MAX_RECORD, read_capped
from fwman.platform import dpkg

if TYPE_CHECKING:  # the actions are imported where a hold is planned: audit reads the status only
    from fwman.host.actions import Action

PIN_FILE = paths.APT_USERSPACE_PIN
BLACKLIST_FILE = paths.APT_USERSPACE_BLACKLIST
STATE_FILE = paths.USERSPACE_HOLD_STATE
RUN_INSTALLER_MARKERS = paths.NVIDIA_RUN_INSTALLER_MARKERS
SCHEMA = "fwman.userspace-hold/1"

_NVIDIA_PACKAGE = re.compile(
    r"(libnvidia-[a-z0-9.+-]+|nvidia-[a-z0-9.+-]+|libcuda1|libcudadebugger1|libnvcuvid1|libnvoptix1"
    r"|lib(?:gl|egl|gles|glx)(?:1|2)?-nvidia[a-z0-9.+-]*|xserver-xorg-video-nvidia[a-z0-9.+-]*"
    r"|firmware-nvidia-gsp[a-z0-9.+-]*|cuda-drivers[a-z0-9.+-]*)"
)
_NOT_HELD = re.compile(r".*dkms.*|libnvidia-container.*|nvidia-container-.*|nvidia-docker.*|nvidia-kernel-source.*")
#: `apt-get -s` lines: "Inst libnvidia-ml1 [570.86.16-1] (575.57.08-1 Debian:12/stable [amd64])"
_INST = re.compile(r"^Inst (\S+) \[([^\]]+)\] \((\S+)")


def is_userspace_package(name: str) -> bool:
    """Return True for an NVIDIA user-space driver package that moves with the driver version."""
    bare = name.split(":", 1)[0]
    return bool(_NVIDIA_PACKAGE.fullmatch(bare)) and not _NOT_HELD.fullmatch(bare)


def parse_dpkg_query(text: str) -> dict[str, str]:
    """Return {package: version} of installed packages from ``dpkg-query -W`` (package, version, status; tabs).

    Lines that are not three tab-separated fields, or whose status is not "installed", are skipped.
    """
    rows = [line.split("\t") for line in text.splitlines()]
    return {p[0]: p[1] for p in rows if len(p) == 3 and p[2].strip() == "installed" and p[0] and p[1]}


def parse_simulated_upgrade(text: str) -> dict[str, tuple[str, str]]:
    """Return {package: (installed, new)} from ``apt-get -s`` output ("Inst" lines with an installed version)."""
    found = (_INST.match(line) for line in text.splitlines())
    return {m.group(1).split(":", 1)[0]: (m.group(2), m.group(3)) for m in found if m}


def render_pin(packages: dict[str, str]) -> bytes:
    """Return the apt preferences file pinning each package to its version.

    Raises ParseError for a name or version apt preferences cannot hold (it came from dpkg: never written).
    """
    return aptprefs.render(
        [aptprefs.Pin((name,), "version", version, 1001) for name, version in sorted(packages.items())],
        header=(
            "written by `fwman userspace hold`: the NVIDIA user space stays at the version the patched module has.",
            "Undo with `fwman userspace release` (do not edit: fwman rewrites it).",
        ),
    )


def render_blacklist(packages: dict[str, str]) -> bytes:
    """Return the apt.conf fragment adding each package (anchored regex) to unattended-upgrades' blacklist."""
    lines = [
        "// written by `fwman userspace hold` (undo: `fwman userspace release`).",
        "// unattended-upgrades must not move the NVIDIA user space away from the patched module's version.",
        "Unattended-Upgrade::Package-Blacklist {",
        *(f'    "^{re.escape(name)}$";' for name in sorted(packages)),
        "};",
    ]
    return ("\n".join(lines) + "\n").encode()


@dataclass
class HoldRecord:
    """What ``hold`` did: the packages and versions it pinned, and the files it wrote."""

    packages: dict[str, str]
    at: str
    files: list[str] = field(default_factory=lambda: [PIN_FILE, BLACKLIST_FILE])

    def to_json(self) -> bytes:
        """Return the record as JSON bytes."""
        return (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()


def read_record_checked(host: Host) -> HoldRecord | None:
    """Return the hold record, or None when there is none.

    Raises ParseError naming the file when it is there but unreadable: a damaged record is evidence of a
    hold (its pin may well be in place), never "no hold".
    """
    try:
        if not host.exists(STATE_FILE):
            return None
    except NotRecordedError:
        return None
    try:
        doc = parse_json(read_capped(host, STATE_FILE, MAX_RECORD, "user-space hold record"), STATE_FILE)
        if not isinstance(doc, dict) or not isinstance(doc.get("packages"), dict):
            raise ParseError(STATE_FILE, "packages", "not a table of package: version")
        packages = {str(k): str(v) for k, v in doc["packages"].items()}
        files = doc.get("files", [])
        return HoldRecord(packages, str(doc.get("at", "")), [str(f) for f in files] if isinstance(files, list) else [])
    except (MissingError, NotRecordedError) as e:
        raise ParseError(STATE_FILE, "file", e.message) from e


def read_record(host: Host) -> HoldRecord | None:
    """Return the hold record, or None when fwman holds nothing or the record is unreadable (``hold`` then
    writes it anew and ``release`` removes it; status reports the damage: :func:`read_record_checked`)."""
    try:
        return read_record_checked(host)
    except ParseError:
        return None


def pin_in_place(host: Host) -> bool:
    """Return True when fwman's apt pin file is there (apt holds the packages whatever the record says)."""
    try:
        return host.exists(PIN_FILE)
    except NotRecordedError:
        return False


def _which(host: Host, tool: str) -> str | None:
    """Return ``host.which(tool)``; None where a snapshot did not record it (a replay never guesses)."""
    try:
        return host.which(tool)
    except NotRecordedError:
        return None


def _prefix(host: Host) -> str | None:
    """Return the directory a temp-root host maps ``/`` to (dpkg and apt are pointed there), None for ``/``."""
    local = host.local_path("/")
    return None if local is None or local == "/" else local.rstrip("/")


def dpkg_query_argv(host: Host) -> list[str]:
    """Return the ``dpkg-query`` command that lists every package (on a temp root: its own dpkg database)."""
    prefix = _prefix(host)
    admindir = [f"--admindir={prefix}/var/lib/dpkg"] if prefix else []
    return ["dpkg-query", *admindir, "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n"]


def apt_simulate_argv(host: Host) -> list[str]:
    """Return the ``apt-get -s dist-upgrade`` command (on a temp root: its lists, status and preferences)."""
    prefix = _prefix(host)
    root = ["-o", f"Dir={prefix}/", "-o", f"Dir::State::status={prefix}/var/lib/dpkg/status"] if prefix else []
    return ["apt-get", "-s", "-o", "Debug::NoLocking=1", *root, "dist-upgrade"]


def installed_packages(host: Host) -> dict[str, str] | None:
    """Return {package: version} of installed NVIDIA user-space packages, None when dpkg is not there."""
    if _which(host, "dpkg-query") is None:
        return None
    if dpkg.has_database(host) is False:  # None: a replay that did not look; the recorded dpkg-query answers
        return {}  # no package database in this tree (a bare --root): dpkg has installed nothing here
    try:
        result = host.run(dpkg_query_argv(host), timeout=60)
    except NotRecordedError:
        return None
    if result.missing:
        return None
    return {n: v for n, v in parse_dpkg_query(result.stdout).items() if is_userspace_package(n)}


def pending_upgrades(host: Host) -> dict[str, tuple[str, str]] | None:
    """Return {package: (installed, new)} for NVIDIA user-space upgrades apt would make now, changing nothing.

    Runs ``apt-get -s dist-upgrade`` (a simulation: no lock, no change). None when apt-get is not there.
    """
    if _which(host, "apt-get") is None:
        return None
    try:
        result = host.run(apt_simulate_argv(host), timeout=120)
    except NotRecordedError:
        return None
    if result.missing or not result.ok:
        return None
    return {n: v for n, v in parse_simulated_upgrade(result.stdout).items() if is_userspace_package(n)}


def run_installer_present(host: Host) -> str | None:
    """Return the file that shows NVIDIA's ``.run`` installer put the user space here, or None."""
    for path in RUN_INSTALLER_MARKERS:
        try:
            if host.exists(path):
                return path
        except NotRecordedError:
            continue
    return None


RUN_INSTALLER_NOTE = (
    "the NVIDIA user space came from NVIDIA's .run installer ({marker}): no package owns it, so apt has "
    "nothing to pin. It is fragile: it stays until something overwrites it (a distribution package that pulls "
    "libnvidia-*, another .run, `nvidia-uninstall`), and nothing warns before that happens. Keep "
    "NVIDIA-Linux-x86_64-<version>.run of the module's exact version and reinstall it with --no-kernel-modules "
    "(inside each container too) whenever the module's version changes."
)


@dataclass
class HoldStatus:
    """``fwman userspace status``: what is installed, what fwman holds, and what apt would upgrade."""

    installed: dict[str, str] | None  # None: no dpkg
    record: HoldRecord | None
    pending: dict[str, tuple[str, str]] | None
    run_installer: str | None
    drift: dict[str, tuple[str, str]] = field(default_factory=dict)  # package: (held, installed now)
    #: why the record is unreadable (None: read, or absent)
    record_error: str | None = None
    #: fwman's apt pin file is in place
    pin: bool = False

    @property
    def held(self) -> bool:
        """Return True when fwman's hold is in place: its record, or its apt pin (the record damaged or lost)."""
        return self.record is not None or self.pin

    def hold_line(self) -> str:
        """Return the one ``hold:`` line of the status: in place, none, or what is wrong with the record."""
        if self.record_error:
            pin = f"the apt pin {PIN_FILE} is in place" if self.pin else f"no apt pin at {PIN_FILE}"
            return f"UNREADABLE record: {self.record_error} ({pin})"
        if self.record is not None:
            return f"in place since {self.record.at}"
        if self.pin:
            return f"the apt pin {PIN_FILE} is in place but fwman's record {STATE_FILE} is missing"
        return "none (run `fwman userspace hold`)"

    def warnings(self) -> list[str]:
        """Return the lines an owner must read (pending upgrades, drift, the .run installer)."""
        out: list[str] = []
        if self.record_error:
            out.append(f"fwman's user-space hold record is unreadable: {self.hold_line().removeprefix('UNREADABLE ')}")
        if self.pending:
            names = ", ".join(f"{n} {a} -> {b}" for n, (a, b) in sorted(self.pending.items()))
            hint = "" if self.held else " (run `fwman userspace hold`)"
            out.append(f"an upgrade of the NVIDIA user space is pending: {names}{hint}")
        for name, (held, now) in sorted(self.drift.items()):
            out.append(f"{name} is {now} but fwman held {held}: the user space moved away from the hold")
        if self.run_installer and not self.installed:
            out.append(RUN_INSTALLER_NOTE.format(marker=self.run_installer))
        return out

    def to_dict(self) -> dict[str, object]:
        """Return the JSON form (schema in :data:`SCHEMA`)."""
        return {
            "schema": SCHEMA,
            "held": self.held,
            "pin": self.pin,
            "record_error": self.record_error,
            "packages": self.record.packages if self.record else {},
            "held_at": self.record.at if self.record else None,
            "installed": self.installed,
            "pending_upgrades": {n: {"installed": a, "new": b} for n, (a, b) in (self.pending or {}).items()},
            "drift": {n: {"held": a, "installed": b} for n, (a, b) in self.drift.items()},
            "run_installer": self.run_installer,
            "warnings": self.warnings(),
        }


def read_status(host: Host, simulate: bool = True) -> HoldStatus:
    """Return the hold status (``simulate``: also ask apt which upgrades are pending). Never changes anything."""
    installed = installed_packages(host)
    error = None
    try:
        record = read_record_checked(host)
    except ParseError as e:
        record, error = None, e.message
    # apt reports an upgrade only of an installed package: with none of NVIDIA's installed (or no dpkg) there is
    # none to ask about (and apt's simulation is the slowest read of the status)
    pending = (pending_upgrades(host) if installed else {}) if simulate else None
    status = HoldStatus(installed, record, pending, run_installer_present(host))
    status.record_error, status.pin = error, pin_in_place(host)
    if record is not None and installed is not None:
        status.drift = {
            n: (v, installed[n]) for n, v in record.packages.items() if n in installed and installed[n] != v
        }
    return status


def hold_actions(packages: dict[str, str], at: str) -> list[Action]:
    """Return the actions that write the pin, the blacklist and the record for ``packages``."""
    from fwman.host.actions import WriteFile

    return [
        WriteFile(PIN_FILE, render_pin(packages)),
        WriteFile(BLACKLIST_FILE, render_blacklist(packages)),
        WriteFile(STATE_FILE, HoldRecord(packages, at).to_json()),
    ]


def release_actions() -> list[Action]:
    """Return the actions that undo :func:`hold_actions`."""
    from fwman.host.actions import RemoveFile

    return [RemoveFile(PIN_FILE), RemoveFile(BLACKLIST_FILE), RemoveFile(STATE_FILE)]


def hold_plan(host: Host, at: str) -> tuple[dict[str, str], list[Action]]:
    """Return (the packages to hold, the actions that hold them: the pin, the blacklist, the record); nothing
    is changed here. A hold of the same packages keeps its date, so a second hold (and its dry run) changes
    nothing.

    Raises MissingError without dpkg, and when no NVIDIA user-space package is installed (the message says when
    NVIDIA's .run installer is the reason).
    """
    packages = installed_packages(host)
    if packages is None:
        raise MissingError("dpkg-query not found: `fwman userspace hold` pins Debian packages through apt")
    if not packages:
        marker = run_installer_present(host)
        if marker is not None:
            raise MissingError("no NVIDIA user-space package to hold", hint=RUN_INSTALLER_NOTE.format(marker=marker))
        raise MissingError("no NVIDIA user-space package is installed: nothing to hold")
    previous = read_record(host)
    stamp = previous.at if previous is not None and previous.packages == packages else at
    return packages, hold_actions(packages, stamp)
