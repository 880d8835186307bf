"""``fwman p2p --soak``: the health counters a soak reads before and after, and what changed.

Under sustained P2P load the failures are not in the copies' bytes but in the kernel's account: a hard reset
only with P2P on (club-3090 PR 1335), NVRM assertions (tinygrad/open-gpu-kernel-modules#29), IO_PAGE_FAULT with
zeroed tensors (tinygrad#18). So a soak takes a :class:`Health` snapshot before and after and names each new
event or counter step, with the GPU it belongs to. The formats (none invented):

- **Xid**: ``NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus`` (NVIDIA/NVSentinel#155), also with
  ``pid=..., name=...`` after the code (ggml-org/llama.cpp#21908 logs Xid 31 so): the bus id in parentheses has
  no function number; the code is the decimal number after ``): ``.
- **AMD-Vi**: ``nvidia 0000:81:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x001c address=0x2bee0314000
  flags=0x0020]`` (ggml-org/llama.cpp#21908, NVIDIA/cuda-samples#48), and the older form that names the
  device inside the brackets, ``IO_PAGE_FAULT device=05:00.0 domain=0x0012 ...`` (pcengines/apu2-documentation
  #240).
- **Intel DMAR**: ``DMAR: [DMA Read NO_PASID] Request device [03:00.0] fault addr 0x100000 [fault reason 0x71]
  ...`` (tenstorrent/tt-umd#1814, thesofproject/sof-test#744) and the older ``DMAR: [DMA Read] Request device
  [00:02.0] PASID ffffffff fault addr ...`` (patmagauran/i915ovmfPkg#23).
- **AER counters**: ``/sys/bus/pci/devices/<dev>/aer_dev_correctable``, ``aer_dev_nonfatal``,
  ``aer_dev_fatal``, one ``<name> <count>`` per line ending with ``TOTAL_ERR_COR`` / ``TOTAL_ERR_NONFATAL`` /
  ``TOTAL_ERR_FATAL``; names have spaces (``Receiver Error 2``, ``RELAY_NUM Rollover 0``) (the kernel's
  Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, since 4.19). The
  ABI doc says an endpoint's errors "may increment at its link partner (e.g. root port)", so the GPU's upstream
  port is read too.

The kernel log is read through the Host with ``journalctl -k -b`` (monotonic timestamps make each line unique,
so "new" is the lines the second read has that the first had not). Where journalctl is absent or fails (a host
or container without systemd's journal), the kernel's ``/dev/kmsg`` is read instead, non-blocking, through the
Host (:mod:`fwman.p2p.kmsg` parses it, Documentation/ABI/testing/dev-kmsg): its records carry microseconds
since boot, and the second read keeps only those stamped from the soak's start on (the newest record the first
read saw). Reading it needs CAP_SYSLOG where ``kernel.dmesg_restrict`` is 1; when neither can be read, the
report says "not read" with both reasons. Both reads use the source the first one used.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fwman.core import paths
from fwman.core.clock import monotonic
from fwman.core.errors import FwmanError, ParseError
from fwman.core.jsonout import fields_of, meta
from fwman.gpu.pci_path import upstream_bridge
from fwman.host.base import Host
from fwman.p2p.kmsg import kernel_lines, parse_kmsg

XID = "xid"
IO_PAGE_FAULT = "amd-vi"
DMAR = "dmar"
AER_FILES = ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")
#: the kernel log as the soak reads it (systemd's journal of this boot, kernel messages only)
JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic")
#: bounds of --soak: at least one round, at most a day (a longer soak is a service, not a command)
MAX_SOAK_SECONDS = 86400.0

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)")
_AMDVI = re.compile(
    r"(?:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): )?AMD-Vi: Event logged \[IO_PAGE_FAULT"
    r"(?: device=([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))?"
)
#: older kernels print "AMD-Vi: Event logged [" and the event on a line of its own (pcengines#240)
_AMDVI_SPLIT = re.compile(r"(?:^|\s)IO_PAGE_FAULT device=([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_DMAR = re.compile(
    r"DMAR: \[DMA (?:Read|Write)[^\]]*\] Request device \[(?:0x)?([0-9a-fA-F]{2}):(?:0x)?([0-9a-fA-F]{2})\.([0-7])\]"
)
#: "Receiver Error 2", "RELAY_NUM Rollover 0", "TOTAL_ERR_COR 2": the name has spaces, the count is last
_AER_LINE = re.compile(r"(\S(?:.*\S)?)\s+(\d{1,20})")


@dataclass(frozen=True)
class KernelEvent:
    """One line of the kernel log that matters to P2P: ``kind`` (:data:`XID`, :data:`IO_PAGE_FAULT`,
    :data:`DMAR`), the PCI device it names (``0000:81:00`` for Xid, which prints no function; ``03:00.0`` where
    the line has no domain), the Xid code, and the line itself."""

    kind: str
    device: str
    code: int | None
    line: str


def parse_kernel_events(text: str) -> list[KernelEvent]:
    """Return the Xid, AMD-Vi IO_PAGE_FAULT and DMAR fault lines of a kernel log, in order. Lines of other
    kinds are skipped: a log is not a document that can be malformed, so this never raises."""
    out: list[KernelEvent] = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := _XID.search(line):
            out.append(KernelEvent(XID, m.group(1).lower(), int(m.group(2)[:9]), line))
        elif m := _AMDVI.search(line):
            out.append(KernelEvent(IO_PAGE_FAULT, (m.group(1) or m.group(2) or "unknown").lower(), None, line))
        elif m := _AMDVI_SPLIT.search(line):
            out.append(KernelEvent(IO_PAGE_FAULT, m.group(1).lower(), None, line))
        elif m := _DMAR.search(line):
            out.append(KernelEvent(DMAR, f"{m.group(1)}:{m.group(2)}.{m.group(3)}".lower(), None, line))
    return out


def parse_aer_counters(text: str, path: str) -> dict[str, int]:
    """Return the counters of one ``aer_dev_*`` file (``{"Receiver Error": 2, ..., "TOTAL_ERR_COR": 2}``).

    Raises ParseError naming the line when a line is not ``<name> <count>``.
    """
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _AER_LINE.fullmatch(line.strip())
        if not m:
            raise ParseError("AER counters", path, f"line {n} is not '<name> <count>': {line[:60]!r}", n)
        out[m.group(1)] = int(m.group(2))
    return out


def same_device(event_device: str, bus_id: str) -> bool:
    """Return True when the device a kernel line names is the PCI function ``bus_id`` (``0000:01:00.0``).

    An Xid names the device without its function, AMD-Vi's older form and DMAR without its domain.
    """
    bus = bus_id.lower()
    dev = event_device.lower()
    if dev.count(":") == 2 and "." not in dev:  # Xid: domain:bus:device, 8-digit domains from CUDA too
        domain, rest = dev.split(":", 1)
        return bus.rsplit(".", 1)[0].split(":", 1)[-1] == rest and int(domain, 16) == int(bus.split(":")[0], 16)
    if dev.count(":") == 1:
        return bus.split(":", 1)[-1] == dev
    return bus == dev


@dataclass
class Health:
    """A snapshot: the kernel log's relevant lines (or why it could not be read) and the AER counters of each
    device read (``{"0000:01:00.0": {"aer_dev_fatal": {"TOTAL_ERR_FATAL": 0, ...}}}``)."""

    log_lines: list[str] | None = None  # None: the log could not be read (``log_error`` says why)
    log_error: str | None = None
    log_source: str | None = None  # what was read: JOURNAL_ARGV's command or paths.KMSG
    kmsg_usec: int = 0  # /dev/kmsg: the newest record's timestamp (microseconds since boot) when it was read
    aer: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    aer_missing: list[str] = field(default_factory=list)  # devices without AER statistics in sysfs


def _bdf(bus_id: str) -> str:
    """Return a sysfs name ``0000:01:00.0`` for a CUDA bus id (``00000000:01:00.0`` has an 8-digit domain)."""
    domain, _, rest = bus_id.lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest and all(c in "0123456789abcdef" for c in domain) else bus_id


def watched_devices(host: Host, bus_ids: list[str]) -> list[tuple[str, str]]:
    """Return ``(device, gpu)`` for each GPU and the port directly above it (``gpu`` is the GPU's bus id)."""
    out: list[tuple[str, str]] = []
    for bus in bus_ids:
        bdf = _bdf(bus)
        out.append((bdf, bdf))
        try:
            real = host.realpath(f"{paths.PCI_DEVICES_DIR}/{bdf}")
        except (FwmanError, OSError):
            continue
        port = upstream_bridge(real)
        if port and (port, bdf) not in out:
            out.append((port, bdf))
    return out


def _read_journal(host: Host, health: Health) -> None:
    """Fill ``health``'s log from ``journalctl -k -b``, or say in ``log_error`` why it could not."""
    try:
        result = host.run(list(JOURNAL_ARGV), timeout=60.0)
        if result.missing:
            health.log_error = "journalctl is not installed"
        elif not result.ok:
            health.log_error = f"journalctl -k exited {result.rc}: {(result.stderr or '').strip()[:120]}"
        else:
            health.log_lines = [e.line for e in parse_kernel_events(result.stdout)]
            health.log_source = " ".join(JOURNAL_ARGV)
    except FwmanError as e:
        health.log_error = e.message


def _read_kmsg(host: Host, health: Health, since_usec: int) -> str | None:
    """Fill ``health``'s log from ``/dev/kmsg`` (records from ``since_usec`` on); return why not, or None."""
    try:
        records = parse_kmsg(host.read_records(paths.KMSG), paths.KMSG)
    except ParseError as e:
        return e.message
    except FwmanError as e:  # absent, EPERM, not recorded by a replay
        denied = "not permitted" in e.message or "denied" in e.message
        return f"{e.message} (it needs root or CAP_SYSLOG)" if denied else e.message
    health.log_lines = [e.line for e in parse_kernel_events("\n".join(kernel_lines(records, since_usec)))]
    health.log_source = paths.KMSG
    health.log_error = None
    health.kmsg_usec = max((r.usec for r in records), default=since_usec)
    return None


def read_health(host: Host, devices: list[str], start: Health | None = None) -> Health:
    """Return a :class:`Health` snapshot of the kernel log and the AER counters of ``devices``. Never raises:
    what cannot be read is said in the snapshot.

    ``start`` is the snapshot taken before the soak: this one reads the log from the source that one did, and
    from /dev/kmsg only the records stamped from its newest record on.
    """
    health = Health()
    if start is None or start.log_source != paths.KMSG:
        _read_journal(host, health)
    if health.log_lines is None and (start is None or start.log_source in (None, paths.KMSG)):
        why = _read_kmsg(host, health, start.kmsg_usec if start is not None else 0)
        if why is not None:
            health.log_error = f"{health.log_error}; {why}" if health.log_error else why
    for dev in devices:
        counters: dict[str, dict[str, int]] = {}
        for name in AER_FILES:
            path = f"{paths.PCI_DEVICES_DIR}/{dev}/{name}"
            try:
                counters[name] = parse_aer_counters(host.read_text(path), path)
            except (FwmanError, OSError):
                continue
        if counters:
            health.aer[dev] = counters
        else:
            health.aer_missing.append(dev)
    return health


@dataclass(frozen=True)
class SoakFinding:
    """Something new between the two snapshots: ``gpu`` (bus id), what (``Xid 79``, ``aer_dev_fatal
    TOTAL_ERR_FATAL +1 on the upstream port 0000:00:01.1``) and the evidence (the log line)."""

    gpu: str | None
    what: str
    evidence: str | None = None  # the first log line of this kind (a fault storm is one finding, counted)
    count: int = 1  # how many new log lines of this kind


def compare(before: Health, after: Health, devices: list[tuple[str, str]]) -> list[SoakFinding]:
    """Return every new kind of kernel event (with its count and first line) and every AER counter that grew,
    each naming its GPU (None where a kernel line names no GPU of ``devices``), in the order first seen."""
    gpus = sorted({gpu for _, gpu in devices})
    out: list[SoakFinding] = []
    if before.log_lines is not None and after.log_lines is not None:
        new = Counter(after.log_lines) - Counter(before.log_lines)
        lines: list[str] = []
        for line in after.log_lines:  # each new line as often as it is new, in log order
            if new[line] > 0:
                new[line] -= 1
                lines.append(line)
        kinds: dict[tuple[str | None, str], SoakFinding] = {}
        for event in parse_kernel_events("\n".join(lines)):
            gpu = next((g for g in gpus if same_device(event.device, g)), None)
            what = {XID: f"Xid {event.code}", IO_PAGE_FAULT: "IOMMU IO_PAGE_FAULT (AMD-Vi)", DMAR: "IOMMU DMAR fault"}
            key = (gpu, f"{what[event.kind]} from {event.device}")
            seen = kinds.get(key)
            kinds[key] = SoakFinding(gpu, key[1], event.line) if seen is None else replace(seen, count=seen.count + 1)
        out.extend(kinds.values())
    for dev, gpu in devices:
        was, now = before.aer.get(dev, {}), after.aer.get(dev, {})
        where = "" if dev == gpu else f" on its upstream port {dev}"
        for name, counters in now.items():
            grown = [
                (counter, was[name][counter], value)
                for counter, value in counters.items()
                if counter in was.get(name, {}) and value > was[name][counter]
            ]
            # TOTAL_ERR_* counts messages, which may carry several errors (the ABI doc): name the errors, and
            # the total only when no single counter moved
            named = [g for g in grown if not g[0].startswith("TOTAL_")] or grown
            for counter, old, value in named:
                out.append(SoakFinding(gpu, f"{name} {counter} +{value - old} (was {old}, now {value}){where}"))
    return out


def _watched(devices: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"device": d, "gpu": g} for d, g in devices]


@dataclass
class SoakReport:
    """The soak's outcome: rounds run, seconds, the rounds' verdicts that failed, the findings, and what could
    not be read (a soak that could not read the log says so; it is not silently clean)."""

    duration: float = field(metadata=meta(key="duration_s"))
    rounds: int = 0
    seconds: float = field(default=0.0, metadata=meta(via=lambda s: round(s, 3)))
    failed_rounds: list[str] = field(default_factory=list)
    findings: list[SoakFinding] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    #: (device read, the GPU it belongs to): the GPUs and the port above each
    devices: list[tuple[str, str]] = field(default_factory=list, metadata=meta(key="watched", via=_watched))

    @property
    def ok(self) -> bool:
        """Return True when every round verified and nothing new appeared."""
        return self.rounds > 0 and not self.failed_rounds and not self.findings

    def verdict(self) -> str:
        """Return one line: clean, or the first failure and the count of findings."""
        head = f"{self.rounds} round{'s' if self.rounds != 1 else ''} in {self.seconds:.0f} s"
        if self.failed_rounds:
            return f"FAILED under load: {head}, round {self.failed_rounds[0]}"
        if self.findings:
            first = self.findings[0]
            gpu = f"GPU {first.gpu}: " if first.gpu else ""
            return (
                f"FAILED under load: {head}, {len(self.findings)} new kernel/AER finding(s) (first: {gpu}{first.what})"
            )
        checked = "kernel log" if not any("kernel log" in u for u in self.unread) else "kernel log NOT read"
        return f"soak clean: {head}, every byte verified; no new Xid, IOMMU fault or AER error ({checked})"

    def to_json(self) -> dict[str, Any]:
        """Return the soak as JSON (``soak`` of ``p2p --json`` and of the record)."""
        return {**fields_of(self), "ok": self.ok, "verdict": self.verdict()}


def unread_of(before: Health, after: Health) -> list[str]:
    """Return what the soak could not compare: the kernel log, devices without AER statistics."""
    error = before.log_error or after.log_error
    missing = sorted(set(before.aer_missing) | set(after.aer_missing))
    lines = [f"{dev}: no AER statistics in sysfs (aer_dev_*)" for dev in missing]
    return [f"kernel log: {error}", *lines] if error else lines


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?")
_UNIT_SECONDS = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Return the seconds of ``--soak`` (``60``, ``60s``, ``10m``, ``1.5h``).

    Raises ParseError when it is not a number with an optional unit, or not from 1 s to a day.
    """
    m = _DURATION.fullmatch(text.strip().lower())
    if not m:
        raise ParseError("--soak", text[:40], "give a duration such as 60s, 10m or 1h")
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    if not 1.0 <= seconds <= MAX_SOAK_SECONDS:
        raise ParseError("--soak", text[:40], f"give 1 s to {MAX_SOAK_SECONDS:g} s (a day)")
    return seconds


def run_soak(
    host: Host,
    run_round: Callable[[], tuple[bool, str, list[str]]],
    duration: float,
    progress: Callable[[str], None],
    bus_ids: list[str],
) -> SoakReport:
    """Repeat ``run_round`` (one whole verification; returns ``(ok, verdict, the GPUs' bus ids)``) for
    ``duration`` seconds, between two :class:`~fwman.p2p.soak.Health` snapshots of the GPUs ``bus_ids`` (from
    sysfs; when empty, the GPUs the first round listed, read after it) and the port above each.

    At least one round runs; a round that fails ends the soak (a pair that hung once hangs again, and each
    retry costs its whole deadline). ``progress`` gets one line per round. Returns the report; never raises
    for what it could not read (the report's ``unread`` says it).
    """
    report = SoakReport(duration=duration)
    report.devices = watched_devices(host, bus_ids)
    before = read_health(host, [d for d, _ in report.devices])
    start = monotonic()
    rounds = 0
    while True:
        ok, verdict, listed = run_round()
        rounds += 1
        if not report.devices and listed:
            report.devices = watched_devices(host, listed)
            before.aer = read_health(host, [d for d, _ in report.devices]).aer
        elapsed = monotonic() - start
        progress(f"soak round {rounds}: {verdict} ({elapsed:.0f} of {duration:.0f} s)")
        if not ok:
            report.failed_rounds.append(f"{rounds}: {verdict}")
            break
        if elapsed >= duration:
            break
    report.rounds = rounds
    report.seconds = monotonic() - start
    after = read_health(host, [d for d, _ in report.devices], start=before)
    report.findings = compare(before, after, report.devices)
    report.unread = unread_of(before, after)
    return report
