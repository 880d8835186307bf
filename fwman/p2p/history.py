"""The P2P verification record: what ``fwman p2p`` proved, and on exactly which configuration.

``fwman p2p`` writes it (:mod:`fwman.p2p.record` builds it from a test's report); the doctor and the
metrics (:mod:`fwman.reports`, one layer up) read it back and judge it.

Each run appends one :class:`P2PRecord` (JSON lines, ``/var/lib/fwman/p2p-history.jsonl``) holding its result
and a :class:`Fingerprint` of what it tested: kernel release, the loaded module (version, srcversion, and fwman's
manifest commit when fwman built it), the user-space driver version, each card's VBIOS and BAR1, the IOMMU mode
and the GPU set. ``fwman doctor`` compares the newest record with the configuration it reads now: a kernel
update, a driver rebuild or a firmware flash changes a field, so an old verification is never taken for a
current one. Pure apart from :func:`read_history` / :func:`append_record`, which go through the Host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import VerificationError
from fwman.core.jsonout import fields_of, meta
from fwman.core.units import human_bytes
from fwman.host.base import Host
from fwman.host.jsonl import append_json_line, read_json_lines

FORMAT = "fwman.p2p-record/1"
KIND_COPY = "copy"  # the CUDA peer copy test, every byte compared
KIND_NCCL = "nccl"  # the NCCL all-reduce tier: exact result, and which transport NCCL chose


@dataclass(frozen=True)
class CardPrint:
    """One GPU as the fingerprint sees it."""

    bus_id: str
    device: str  # "10de:2204"
    subsystem: str  # "3842:3987"
    vbios: str | None
    bar1_bytes: int | None


@dataclass(frozen=True)
class Fingerprint:
    """What a verification depends on. ``None`` means "could not be read" (and compares as its own value)."""

    kernel: str | None
    module_version: str | None
    module_srcversion: str | None
    module_flavour: str | None
    manifest: str | None  # "fork branch @ commit" from fwman's install manifest, None when fwman did not build it
    userspace: str | None  # the user-space driver version(s) on the host ("580.159.04")
    iommu: str | None  # translated, passthrough, off, not-visible, unknown
    gpus: tuple[CardPrint, ...] = ()
    #: the loaded module's P2P-relevant options (``fwman driver settings``' keys) as /proc/driver/nvidia/params
    #: gives them, (name, value) sorted; absent ones are not listed. None: not recorded (a record older than the
    #: field, or a module that was not loaded): then it is not compared
    module_options: tuple[tuple[str, str], ...] | None = field(default=None, metadata=meta(via=dict))
    #: each GPU's power limit in W as nvidia-smi reported it ((bus id, watts) sorted; `fwman driver power` sets
    #: them). None: not recorded (an older record, or nvidia-smi said none): then it is not compared
    power_limits: tuple[tuple[str, float], ...] | None = field(default=None, metadata=meta(via=dict))

    def to_json(self) -> dict[str, Any]:
        """Return the fingerprint as a JSON object (the options and power limits as objects)."""
        return fields_of(self)

    @classmethod
    def from_json(cls, doc: Any) -> Fingerprint:
        """Return the fingerprint in ``doc``. Raises ValueError when it is not one."""
        if not isinstance(doc, dict):
            raise ValueError("fingerprint is not an object")
        gpus = doc.get("gpus") or []
        if not isinstance(gpus, list):
            raise ValueError("fingerprint gpus is not a list")
        cards = []
        for g in gpus:
            if not isinstance(g, dict) or not isinstance(g.get("bus_id"), str):
                raise ValueError("fingerprint card without bus_id")
            bar1 = g.get("bar1_bytes")
            bar1 = bar1 if isinstance(bar1, int) and not isinstance(bar1, bool) else None
            cards.append(
                CardPrint(
                    g["bus_id"], str(g.get("device", "")), str(g.get("subsystem", "")), _opt(g.get("vbios")), bar1
                )
            )
        return cls(
            kernel=_opt(doc.get("kernel")),
            module_version=_opt(doc.get("module_version")),
            module_srcversion=_opt(doc.get("module_srcversion")),
            module_flavour=_opt(doc.get("module_flavour")),
            manifest=_opt(doc.get("manifest")),
            userspace=_opt(doc.get("userspace")),
            iommu=_opt(doc.get("iommu")),
            gpus=tuple(cards),
            module_options=_options(doc.get("module_options")),
            power_limits=_limits(doc.get("power_limits")),
        )


def _options(value: Any) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, dict):
        return None
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def _limits(value: Any) -> tuple[tuple[str, float], ...] | None:
    if not isinstance(value, dict):
        return None
    return tuple(
        sorted((str(k), float(v)) for k, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool))
    )


def _opt(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class FingerprintChange:
    """One fingerprint field that differs: ``what`` for people, ``was`` and ``now`` as text."""

    what: str
    was: str
    now: str

    def describe(self) -> str:
        """Return ``kernel changed (was 6.8.12-4-pve, now 6.8.12-5-pve)``."""
        return f"{self.what} changed (was {self.was}, now {self.now})"


def _text(value: str | int | None, bytes_: bool = False) -> str:
    if value is None:
        return "unknown"
    if bytes_ and isinstance(value, int):
        return human_bytes(value)
    return str(value)


def _options_text(options: tuple[tuple[str, str], ...]) -> str:
    return " ".join(f"NVreg_{k}={v}" for k, v in options) or "none set"


def _limits_text(limits: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{b} {w:g} W" for b, w in limits) or "none"


def changes(was: Fingerprint, now: Fingerprint) -> list[FingerprintChange]:
    """Return every field that differs between ``was`` (the record) and ``now`` (this configuration)."""
    out: list[FingerprintChange] = []
    scalar = (
        ("kernel", "kernel"),
        ("module_version", "loaded module version"),
        ("module_srcversion", "loaded module srcversion"),
        ("module_flavour", "loaded module flavour"),
        ("manifest", "fwman build of the module"),
        ("userspace", "user-space driver"),
        ("iommu", "IOMMU mode"),
    )
    for attr, what in scalar:
        a, b = getattr(was, attr), getattr(now, attr)
        if a != b:
            out.append(FingerprintChange(what, _text(a), _text(b)))
    if was.module_options is not None and now.module_options is not None and was.module_options != now.module_options:
        out.append(
            FingerprintChange("module options", _options_text(was.module_options), _options_text(now.module_options))
        )
    if was.power_limits is not None and now.power_limits is not None and was.power_limits != now.power_limits:
        out.append(FingerprintChange("power limits", _limits_text(was.power_limits), _limits_text(now.power_limits)))
    old = {g.bus_id: g for g in was.gpus}
    new = {g.bus_id: g for g in now.gpus}
    if set(old) != set(new):
        out.append(FingerprintChange("GPU set", ", ".join(sorted(old)) or "none", ", ".join(sorted(new)) or "none"))
    for bus in sorted(set(old) & set(new)):
        x, y = old[bus], new[bus]
        if (x.device, x.subsystem) != (y.device, y.subsystem):
            out.append(FingerprintChange(f"card at {bus}", f"{x.device} {x.subsystem}", f"{y.device} {y.subsystem}"))
        if x.vbios != y.vbios:
            out.append(FingerprintChange(f"VBIOS of {bus}", _text(x.vbios), _text(y.vbios)))
        if x.bar1_bytes != y.bar1_bytes:
            out.append(FingerprintChange(f"BAR1 of {bus}", _text(x.bar1_bytes, True), _text(y.bar1_bytes, True)))
    return out


@dataclass(frozen=True)
class P2PRecord:
    """One verification run: ``kind`` copy or nccl, its outcome and the fingerprint it was taken on."""

    time: str  # ISO 8601 UTC, "2026-12-01T10:41:07Z"
    kind: str
    ok: bool
    verdict: str
    fingerprint: Fingerprint
    gpus: int = 0
    slowest_gbps: float | None = None  # copy: slowest GPU pair (the on-device copy when there is one GPU)
    slowest_pair: str | None = None  # "GPU0 -> GPU1"
    every_byte_verified: bool = False  # copy: every byte of every copy compared and equal
    transport: str | None = None  # nccl: the transport class NCCL chose ("P2P", "SHM", "NET", mixed: "P2P+SHM")
    transports: dict[str, int] = field(default_factory=dict)  # nccl: transport as printed -> channel count
    nccl_version: str | None = None
    environment: dict[str, str] = field(default_factory=dict)  # NCCL_* variables in effect
    runner: str | None = None  # nccl: "torch.distributed" or "nccl-tests all_reduce_perf"
    prefix: tuple[str, ...] = ()  # the command prefix it ran under (`pct exec 101 --`)
    #: nccl: True when P2P was exact and faster than the NCCL_P2P_DISABLE=1 control at every size, False when it
    #: was slower somewhere, None when there was no comparison (no control run, one rank, a failed run)
    p2p_faster: bool | None = None
    advice: str | None = None  # nccl: the advice the comparison supports, as `p2p --nccl` printed it
    #: copy with --soak: the soak's JSON (rounds, seconds, findings, unread, verdict), None without a soak
    soak: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the record as one JSON object (the line written to the history)."""
        return {**fields_of(self), "format": FORMAT}

    @classmethod
    def from_json(cls, doc: Any) -> P2PRecord:
        """Return the record in ``doc``. Raises ValueError when it is not one."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a P2P record")
        if not isinstance(doc.get("time"), str) or doc.get("kind") not in (KIND_COPY, KIND_NCCL):
            raise ValueError("record without time or kind")
        slowest = doc.get("slowest_gbps")
        transports = doc.get("transports") or {}
        env = doc.get("environment") or {}
        prefix = doc.get("prefix") or []
        return cls(
            time=doc["time"],
            kind=doc["kind"],
            ok=doc.get("ok") is True,
            verdict=str(doc.get("verdict", "")),
            fingerprint=Fingerprint.from_json(doc.get("fingerprint")),
            gpus=int(doc["gpus"]) if isinstance(doc.get("gpus"), int) else 0,
            slowest_gbps=float(slowest) if isinstance(slowest, int | float) and not isinstance(slowest, bool) else None,
            slowest_pair=_opt(doc.get("slowest_pair")),
            every_byte_verified=doc.get("every_byte_verified") is True,
            transport=_opt(doc.get("transport")),
            transports={str(k): int(v) for k, v in transports.items() if isinstance(v, int)}
            if isinstance(transports, dict)
            else {},
            nccl_version=_opt(doc.get("nccl_version")),
            environment={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            runner=_opt(doc.get("runner")),
            prefix=tuple(str(p) for p in prefix) if isinstance(prefix, list) else (),
            p2p_faster=doc.get("p2p_faster") if isinstance(doc.get("p2p_faster"), bool) else None,
            advice=_opt(doc.get("advice")),
            soak=doc["soak"] if isinstance(doc.get("soak"), dict) else None,
        )

    @property
    def date(self) -> str:
        """Return the day of the run (``2026-12-01``)."""
        return self.time[:10]


def read_history(host: Host) -> list[P2PRecord]:
    """Return the records of the P2P history, oldest first; none when there is no history.

    Raises VerificationError naming the first damaged line (a verification record is evidence: never skipped),
    NotRecordedError on a snapshot that did not record the file.
    """
    records, damaged = read_json_lines(host, paths.P2P_HISTORY_FILE, P2PRecord.from_json)
    if damaged:
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        raise VerificationError(
            f"damaged P2P verification history: {damaged[0]}{more}",
            hint="inspect the line, repair or remove it by hand; `fwman p2p` appends a new record",
        )
    return records


def append_record(host: Host, record: P2PRecord) -> None:
    """Append ``record`` to the history (atomic rewrite of the whole file, so no half line is ever left)."""
    append_json_line(host, paths.P2P_HISTORY_FILE, json.dumps(record.to_json(), sort_keys=True).encode())


@dataclass(frozen=True)
class Standing:
    """Where verification stands for the configuration now: the record that applies and what changed since."""

    state: str  # "verified", "failed", "changed", "never"
    record: P2PRecord | None = None
    changed: tuple[FingerprintChange, ...] = ()


def standing(records: list[P2PRecord], now: Fingerprint, kind: str = KIND_COPY) -> Standing:
    """Return how ``kind`` verification stands on configuration ``now`` given the history ``records``.

    The newest record of ``kind`` taken on exactly this configuration decides (verified or failed); when none
    was, the newest record of ``kind`` says what changed since; with no record at all the state is "never".
    """
    of_kind = [r for r in records if r.kind == kind]
    if not of_kind:
        return Standing("never")
    same = [r for r in of_kind if not changes(r.fingerprint, now)]
    if same:
        last = same[-1]
        return Standing("verified" if last.ok else "failed", last)
    last = of_kind[-1]
    return Standing("changed", last, tuple(changes(last.fingerprint, now)))
