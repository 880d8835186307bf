"""core.findings: a Topic says the same Finding a spelled-out constructor gives, and the flags work on it."""

from __future__ import annotations

from fwman.core.findings import Finding, Severity, Topic, blocking, worst


def test_a_topic_gives_the_finding_spelled_out() -> None:
    ev = {"bus_id": "01:00.0"}
    t = Topic("pcie.link", ev)
    assert t.ok("fine") == Finding(id="pcie.link", severity=Severity.OK, message="fine", evidence=ev)
    assert t.info("idle", "load it") == Finding(
        id="pcie.link", severity=Severity.INFO, message="idle", evidence=ev, fix="load it"
    )
    assert t.block("narrow", evidence={"x": "1"}) == Finding(
        id="pcie.link", severity=Severity.BLOCK, message="narrow", evidence={"x": "1"}
    )
    # no evidence named: the same empty evidence (and JSON) as a Finding given none
    assert (
        Topic("gpus.count").ok("2 GPUs").model_dump()
        == Finding(id="gpus.count", severity=Severity.OK, message="2 GPUs").model_dump()
    )


def test_a_topics_warn_is_accepted_only_by_its_flag() -> None:
    w = Topic("rom.version").warn("older", "on purpose only", override="--allow-downgrade")
    b = Topic("rom.kind").block("stripped")
    assert worst([w, b]) is Severity.BLOCK
    assert blocking([w, b]) == [w, b]
    assert blocking([w, b], ["--allow-downgrade"]) == [b]  # a block never yields to a flag
