"""The real H200 host: replaying its snapshot prints what fwman printed live on that machine.

fixtures/hosts/h200-1gpu/live/ was written on the machine, right after `fwman capture`; nothing here is
constructed. Only the host description differs ("live host" there, "snapshot <dir>" here).
"""

from __future__ import annotations

import json
from typing import Any

import click
import pytest

from tests.support.env import HOSTS, FwmanEnv, without_host

H200 = HOSTS / "h200-1gpu"
LIVE = H200 / "live"


def _normalise(text: str) -> str:
    return text.replace(f"snapshot {H200}", "live host")


@pytest.mark.parametrize(
    ("argv", "name", "code"),
    [
        (["scan"], "scan", 0),
        (["audit", "--offline"], "audit_--offline", 0),
        (["doctor"], "doctor", 0),
    ],
)
def test_text_replay_equals_live(fwman: FwmanEnv, argv: list[str], name: str, code: int) -> None:
    r = fwman("--snapshot", str(H200), *argv)
    assert r.code == code, r.stderr
    assert _normalise(r.stdout) == _text_as_current((LIVE / f"{name}.txt").read_text())


def _text_as_current(text: str) -> str:
    """Return text recorded live by an older fwman with the option spellings renamed since (docs/cli.md's table of
    old spellings; the old ones still run, with a deprecation line): the hints print the new spelling."""
    from fwman.cli.app import cli
    from fwman.cli.vocabulary import renamed_in

    driver = cli.get_command(click.Context(cli), "driver")
    assert isinstance(driver, click.Group)
    branches = driver.get_command(click.Context(driver), "branches")
    assert branches is not None
    for old, new in renamed_in(branches).items():
        text = text.replace(f"`fwman driver branches {old} ", f"`fwman driver branches {new} ")
    return text


def _as_current(doc: dict[str, Any]) -> dict[str, Any]:
    """Return a document recorded live by an older fwman under its current version's names: exactly the renames
    docs/json.md's version history lists (the recording itself stays as the machine printed it)."""
    if doc.get("schema") == "fwman.scan/1":  # scan/2: max_rebar_bytes, as upgrade --dry-run names it
        gpus = [{("max_rebar_bytes" if k == "rebar_max_bytes" else k): v for k, v in g.items()} for g in doc["gpus"]]
        doc = {**doc, "schema": "fwman.scan/2", "gpus": gpus}
    if doc.get("schema") == "fwman.doctor/1":  # doctor/2: the counts got their _count names
        verdict = dict(doc["verdict"])
        verdict["blocker_count"], verdict["warning_count"] = verdict.pop("blockers"), verdict.pop("warnings")
        doc = {("gpu_count" if k == "gpus" else k): v for k, v in doc.items()}
        doc.update(schema="fwman.doctor/2", verdict=verdict)
    return doc


@pytest.mark.parametrize("argv", [["scan", "--json"], ["audit", "--offline", "--json"], ["doctor", "--json"]])
def test_json_replay_equals_live(fwman: FwmanEnv, argv: list[str]) -> None:
    r = fwman("--snapshot", str(H200), *argv)
    assert r.code == 0, r.stderr
    live = _as_current(json.loads(_text_as_current((LIVE / ("_".join(argv) + ".txt")).read_text())))
    assert without_host(json.loads(_normalise(r.stdout))) == without_host(live)


def test_what_the_real_host_reported(fwman: FwmanEnv) -> None:
    """fwman's replay finds the facts the real machine showed: its own analysis of the recorded files."""
    audit = fwman("--snapshot", str(H200), "audit", "--offline")
    assert audit.code == 0, audit.stderr
    assert "loaded kernel module                      580.159.04  match" in audit.stdout
    # the real case: the CUDA forward-compatibility libcuda is another version than the driver, reported as compat
    assert "CUDA compat libcuda.so                    580.95.05   info" in audit.stdout
    # the live P2P run (CUDA, on the machine) and the replayed scan (sysfs + nvidia-smi) name the same GPU
    p2p = (LIVE / "p2p.txt").read_text()
    assert "verdict: every byte verified" in p2p
    gpus = fwman("--snapshot", str(H200), "scan", "--json").json()["gpus"]
    assert [f"  GPU0  {g['bus_id']}  {g['name']}" for g in gpus] == [p2p.splitlines()[1]]
