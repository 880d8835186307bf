"""What P2P depends on before anything is built: the module options, which GPU combinations peer, the windows.

- :func:`check_settings`: the NVreg_* options recommended for these GPUs (``fwman driver settings``), each with
  its source, whether it is in effect in the loaded module, and whether the initramfs carries fwman's file;
- :func:`check_matrix`: what the sources say about P2P between this host's GPUs (:mod:`fwman.driver.peering`);
- :func:`check_windows`: the prefetchable bridge window above each card against the BAR1 it could have.
"""

from __future__ import annotations

from fwman.core.findings import Finding, Severity, Topic
from fwman.driver import settings as nv
from fwman.driver.peering import FAILS, OK, peering
from fwman.reports.doctor.facts import Facts

_GIB = 1 << 30


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / _GIB:g} GiB" if n >= _GIB else f"{n >> 20} MiB"


def check_settings(facts: Facts) -> list[Finding]:
    """Return one finding per recommended option (and the sources' silence where they name none)."""
    if facts.driver_settings is None:
        return []
    report = facts.driver_settings.get()
    out: list[Finding] = []
    for s, state, loaded in report.states():
        ok = state == nv.IN_EFFECT
        ev = {"why": s.why, "file": "current" if report.file_ok else "absent or different"}
        out.append(
            Topic("driver.settings", ev).say(
                Severity.OK if ok else Severity.WARN,
                f"{s.option}: {state}"
                + (f" (loaded {loaded})" if loaded is not None and not ok else "")
                + f" (source: {s.source})",
                None
                if ok
                else "`fwman driver settings --apply`, then reboot"
                + (
                    ""
                    if state != nv.UNKNOWN_OPTION
                    else " into the P2P fork's module (the loaded one has no such option)"
                ),
            )
        )
    out += [Topic("driver.settings").info(f"{gen}: {note}") for gen, note in report.silent().items()]
    if report.settings and report.image and report.initramfs != "carries fwman's file as written":
        out.append(
            Topic("driver.settings.initramfs").warn(
                f"the initramfs {report.image} {report.initramfs}: the options do not apply at boot",
                "`fwman driver settings --apply` (regenerates it)",
            )
        )
    return out


def check_matrix(facts: Facts) -> list[Finding]:
    """Return what the sources say about P2P between this host's GPUs."""
    p = peering([c.name for c in facts.cards])
    severity = Severity.OK if p.state == OK else Severity.BLOCK if p.state == FAILS else Severity.INFO
    return [
        Topic("p2p.matrix").say(
            severity,
            p.message + (f" (source: {p.source})" if p.source else " (source: none)"),
            "use GPUs of one model (or the same-generation mixes the sources report working)"
            if p.state == FAILS
            else None,
        )
    ]


def check_windows(facts: Facts) -> list[Finding]:
    """Return, per card, the port's prefetchable window against the BAR1 the card could have."""
    if facts.windows is None:
        return []
    out: list[Finding] = []
    for w in facts.windows.get():
        if w.problem:
            out.append(Topic("pcie.window").info(f"{w.bus_id}: {w.problem}"))
            continue
        text = (
            f"{w.bus_id}: port {w.port} prefetchable window {_size(w.window_bytes)}, card BAR1 {_size(w.bar1_bytes)}"
            f" (offers up to {_size(w.wanted_bytes)})"
        )
        out.append(
            Topic("pcie.window", {"source": "noonghunna/club-3090 docs/PCIE_P2P.md section 4a"}).say(
                Severity.WARN if w.limits else Severity.OK,
                text
                + (
                    ": the window is smaller than the BAR1 the card offers; once Resizable BAR is on in the firmware "
                    "setup, a BAR1 that stays small means the bridge window is the limit"
                    if w.limits and (w.bar1_bytes or 0) < (w.wanted_bytes or 0)
                    else ": the bridge window is the limit"
                    if w.limits
                    else ""
                ),
                "add `pci=realloc` to the kernel command line (xCuri0/ReBarUEFI issue 119), or "
                "`pci=realloc,hpmemsize=8G` to grow the prefetchable windows, then reboot and run `fwman doctor`"
                if w.limits
                else None,
            )
        )
    return out


__all__ = ["check_matrix", "check_settings", "check_windows"]
