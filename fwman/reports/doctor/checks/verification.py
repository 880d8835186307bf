"""The doctor's last step: was P2P verified on *this* configuration, or only on one that no longer exists?

Pure over the P2P history and the fingerprint of the configuration now (both facts): verified / failed / not
since X changed / never, for the copy test and, once it has been run, the NCCL tier.
"""

from __future__ import annotations

from fwman.core.findings import Finding, Severity, Topic
from fwman.p2p.history import KIND_COPY, KIND_NCCL, Fingerprint, P2PRecord, standing
from fwman.reports.doctor.facts import Facts


def _copy_line(r: P2PRecord) -> str:
    speed = f"{r.slowest_gbps:.1f} GB/s" if r.slowest_gbps is not None else "? GB/s"
    what = "slowest pair" if r.gpus >= 2 else "one GPU, on-device copy"
    verified = "every byte verified" if r.every_byte_verified else "bytes not all verified"
    return f"{r.date}, {what} {speed}, {verified}"


def _nccl_line(r: P2PRecord) -> str:
    transport = f"transport {r.transport}" if r.transport else "no peer connection (one GPU)"
    level = r.environment.get("NCCL_P2P_LEVEL")
    env = f", NCCL_P2P_LEVEL={level}" if level else ""
    return f"{r.date}, {r.runner or 'NCCL'}, {transport}{env}, all-reduce exact"


def _nccl_fix(r: P2PRecord) -> str | None:
    """Return the fix for an NCCL record that did not use P2P everywhere: a P2P level only where the measurement
    (the run against its NCCL_P2P_DISABLE=1 control) found P2P exact and faster."""
    if r.p2p_faster is False:
        return None
    if r.p2p_faster is True:
        return (
            "set NCCL_P2P_LEVEL=SYS where the model server runs (measured faster and exact with P2P) and run "
            "`fwman p2p --nccl` again"
        )
    return (
        "run `fwman p2p --nccl --nccl-env NCCL_P2P_LEVEL=SYS` where the model server runs: it times P2P "
        "against an NCCL_P2P_DISABLE=1 control, and only a P2P path that is exact and faster is worth setting"
    )


def verification_findings(records: list[P2PRecord], now: Fingerprint) -> list[Finding]:
    """Return the verification step: verified / failed / not since X changed / never, for the copy test and, once
    it has been run, the NCCL tier."""
    out: list[Finding] = []
    copy = standing(records, now, KIND_COPY)
    if copy.state == "never":
        out.append(
            Topic("p2p.verified").info(
                "P2P never verified on this machine (no `fwman p2p` record)",
                "run `fwman p2p`: it copies between every GPU pair, compares every byte and records the "
                "result against this configuration",
            )
        )
    elif copy.state == "verified" and copy.record:
        out.append(
            Topic("p2p.verified", {"time": copy.record.time, "verdict": copy.record.verdict}).ok(
                f"P2P verified on this configuration ({_copy_line(copy.record)})"
            )
        )
    elif copy.state == "failed" and copy.record:
        out.append(
            Topic("p2p.verified", {"time": copy.record.time}).block(
                f"P2P test FAILED on this configuration ({copy.record.date}): {copy.record.verdict}",
                "do not serve across GPUs until `fwman p2p` passes; check IOMMU (iommu=pt), the driver "
                "build and the links above",
            )
        )
    elif copy.record:
        first = copy.changed[0].describe() if copy.changed else "the configuration changed"
        more = f" (and {len(copy.changed) - 1} more change{'s' if len(copy.changed) > 2 else ''})" if len(
            copy.changed
        ) > 1 else ""  # fmt: skip
        out.append(
            Topic("p2p.verified", {c.what: f"was {c.was}, now {c.now}" for c in copy.changed}).warn(
                f"P2P not verified since {first}{more}: last verified {_copy_line(copy.record)}",
                "run `fwman p2p` again on this configuration",
            )
        )
    nccl = standing(records, now, KIND_NCCL)
    if nccl.state == "verified" and nccl.record:
        r = nccl.record
        shm = r.transport is not None and r.transport != "P2P"
        measured = f"; measured against NCCL_P2P_DISABLE=1: {r.advice}" if r.advice else ""
        out.append(
            Topic("p2p.nccl", {"time": r.time, **{k: str(v) for k, v in r.transports.items()}}).say(
                Severity.WARN if shm and r.p2p_faster is not False else Severity.OK,
                f"NCCL all-reduce verified on this configuration ({_nccl_line(r)})"
                + (f": NCCL did not use P2P on every connection ({r.verdict})" if shm else "")
                + measured,
                _nccl_fix(r) if shm else None,
            )
        )
    elif nccl.state == "failed" and nccl.record:
        out.append(
            Topic("p2p.nccl", {"time": nccl.record.time}).block(
                f"NCCL all-reduce FAILED on this configuration ({nccl.record.date}): {nccl.record.verdict}"
            )
        )
    elif nccl.state == "changed" and nccl.record:
        first = nccl.changed[0].describe() if nccl.changed else "the configuration changed"
        out.append(
            Topic("p2p.nccl").info(
                f"NCCL tier not run since {first} (last: {_nccl_line(nccl.record)})",
                "`fwman p2p --nccl` (with `--prefix` where the model server's NCCL lives)",
            )
        )
    return out


def check_verified(facts: Facts) -> list[Finding]:
    """Return where P2P verification stands for the configuration now."""
    return verification_findings(facts.p2p_history.get(), facts.fingerprint.get())
