"""`fwman upgrade --dry-run`: the plan on the example host, and the rules behind it on built cards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fwman.core.findings import Severity
from fwman.firmware.catalog.load import load_catalog, load_directory
from fwman.firmware.upgrade.model import UpgradePlan
from fwman.firmware.upgrade.plan import build_upgrade_plan
from fwman.gpu.card import Card
from fwman.host.live import LiveHost
from fwman.host.snapshot import SnapshotHost
from tests.support.catalog import (
    LAUNCH,
    REBAR,
    WITHDRAWN,
    board_toml,
    install_local,
    md5,
    rom,
    seed_images,
    write_catalog,
)
from tests.support.env import EXAMPLE_HOST, FwmanEnv

SNAP = str(EXAMPLE_HOST)


def card(bus: str, sub: str = "3987", vbios: str | None = LAUNCH, **kw: Any) -> Card:
    fields: dict[str, Any] = {
        "bus_id": bus,
        "vendor_id": "10de",
        "device_id": "2204",
        "subsystem_vendor_id": "3842",
        "subsystem_device_id": sub,
        "vbios_version": vbios,
        "vram_bytes": 24 * 1024**3,
        "bar1_bytes": 256 * 1024**2,
        "driver_version": "570.86.16",
    }
    fields.update(kw)
    return Card(**fields)


def by_bus(plan: UpgradePlan) -> dict[str, Any]:
    return {c.bus_id: c for c in plan.cards}


# -- the example host ------------------------------------------------------------------------------------------


def test_example_host_3987_pair_goes_to_80_27_and_3982_pair_is_left_alone(fwman: FwmanEnv) -> None:
    r = fwman("upgrade", "--dry-run", "--json", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.upgrade-plan/2" and doc["dry_run"] is True
    cards = {c["bus_id"]: c for c in doc["gpus"]}
    assert {b: (c["action"], c["target_version"]) for b, c in cards.items()} == {
        "0000:01:00.0": ("keep", None),
        "0000:21:00.0": ("keep", None),
        "0000:41:00.0": ("flash", REBAR),
        "0000:61:00.0": ("flash", REBAR),
    }
    skipped = {o["version"]: o for o in cards["0000:41:00.0"]["options"] if not o["chosen"]}
    assert skipped[WITHDRAWN]["status"] == "withdrawn" and "power limit" in skipped[WITHDRAWN]["why"]
    assert skipped[LAUNCH]["status"] == "superseded"
    # unverified: planned, but blocked until a vendor MD5 is supplied
    assert doc["ready"] is False
    assert [(f["id"], f["severity"]) for f in doc["findings"]] == [("upgrade.unverified-image", "block")]
    assert "--expect-md5" in doc["findings"][0]["fix"]
    assert doc["images"] == [
        {
            "ref": f"3842:3987/{REBAR}",
            "pci_key": "10de:2204:3842:3987",
            "version": REBAR,
            "status": "unverified",
            "bus_ids": ["0000:41:00.0", "0000:61:00.0"],
            "cache_path": f"/var/cache/fwman/images/10de-2204-3842-3987/{REBAR}.rom",
            "cached": None,  # the snapshot did not record the cache: unknown, not "absent"
            "urls": [],
            "hash_known": False,
            "hash_origin": "",
            "needs_md5": True,
        }
    ]


def test_example_host_plan_steps_in_order(fwman: FwmanEnv) -> None:
    doc = fwman("upgrade", "--dry-run", "--json", "--snapshot", SNAP).json()
    steps = doc["steps"]
    assert [s["id"] for s in steps] == [
        "backup", "image", "unload", "flash", "flash", "firmware-setup", "reboot", "post-check",
    ]  # fmt: skip
    assert steps[0]["bus_ids"] == ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]
    assert [s["bus_ids"] for s in steps if s["id"] == "flash"] == [["0000:41:00.0"], ["0000:61:00.0"]]
    setup = "\n".join(steps[5]["details"])
    assert "Above 4G Decoding" in setup and "Re-Size BAR Support" in setup
    assert steps[5]["commands"] == ["systemctl reboot --firmware-setup"]
    # the 3982 cards offer 32 GiB but run 256 MiB: the switch is off today, and the plan says so
    assert "01:00.0 offers a BAR1 of up to 32 GiB but has 256 MiB" in setup
    checks = "\n".join(steps[-1]["details"])
    assert f"41:00.0, 61:00.0: VBIOS {REBAR}" in checks
    assert "default power limit 420 W" in checks
    assert steps[1]["commands"] == [f"fwman fetch 3842:3987/{REBAR} --image FILE --expect-md5 HEX"]


def test_example_host_text_output_tells_the_story(fwman: FwmanEnv) -> None:
    r = fwman("upgrade", "--dry-run", "--snapshot", SNAP)
    assert r.code == 0, r.stderr
    out = r.stdout
    rows = {line.split()[0]: line for line in out.splitlines() if line[:2] in ("01", "21", "41", "61")}
    assert rows["41:00.0"].endswith(f"flash -> {REBAR}")
    # the 3982 pair keeps its firmware; it offers 32 GiB already and only lacks the firmware-setup switch
    assert rows["01:00.0"].endswith("keep (ReBAR: setup switch only)")
    assert "01:00.0, 21:00.0: BAR1 larger than 256 MiB too" in out
    assert f"skip {WITHDRAWN}  withdrawn" in out
    assert f"use  {REBAR}  unverified" in out
    # newest first in the catalog's order: .27 replaced the withdrawn .AD, whatever "27" < "AD" says as hex
    assert out.index(f"use  {REBAR}") < out.index(f"skip {WITHDRAWN}") < out.index(f"skip {LAUNCH}")
    assert "BLOCKED: 94.02.42.80.27 has no known hash: a vendor MD5 must be supplied (--expect-md5)" in out
    assert "Not ready: 1 gate above" in out
    assert "\x1b[" not in out  # no colour when not a terminal


def test_snapshot_with_a_recorded_override_is_ready(tmp_path: Path) -> None:
    """The same host, once the owner has imported the image with --expect-md5: nothing blocks."""
    image = rom()
    root = tmp_path / "root"
    boards = {
        "10de-2204-3842-3987": board_toml(seed_images()),
        "10de-2204-3842-3982": board_toml([{"version": "94.02.42.C0.05", "status": "unverified"}], "3982"),
    }
    install_local(root, write_catalog(tmp_path / "cat", boards))
    (root / "var/lib/fwman/overrides.toml").write_text(
        f'[[override]]\nboard = "10de:2204:3842:3987"\nversion = "{REBAR}"\nmd5 = "{md5(image)}"\n'
        'source = "EVGA download page"\n'
    )
    cache = root / f"var/cache/fwman/images/10de-2204-3842-3987/{REBAR}.rom"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(image)
    host = LiveHost(str(root))
    cards = SnapshotHost(EXAMPLE_HOST)
    from fwman.gpu.inventory import scan_cards

    plan = build_upgrade_plan(host, scan_cards(cards), load_catalog(host))
    assert plan.blocks == [] and plan.ready
    assert plan.images[0].hash_origin == "local override (EVGA download page)" and plan.images[0].cached
    assert [s.id for s in plan.steps][1] == "image" and plan.steps[1].by == "fwman"


# -- the rules -------------------------------------------------------------------------------------------------


def plan_for(tmp_path: Path, cards: list[Card], selected: tuple[str, ...] = ()) -> UpgradePlan:
    cat = load_directory(
        write_catalog(
            tmp_path / "cat",
            {
                "10de-2204-3842-3987": board_toml(seed_images()),
                "10de-2204-3842-3982": board_toml([{"version": "94.02.42.C0.05", "status": "unverified"}], "3982"),
            },
        )
    )
    return build_upgrade_plan(LiveHost(str(tmp_path / "root")), cards, cat, selected)


def test_a_card_on_the_withdrawn_image_is_moved_to_its_replacement(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, [card("0000:41:00.0", vbios=WITHDRAWN)])
    c = by_bus(plan)["0000:41:00.0"]
    assert (c.action, c.target_version, c.current_status) == ("flash", REBAR, "withdrawn")
    assert "was withdrawn (owners reported a lowered power limit)" in c.reason


def test_unknown_board_is_reported_never_guessed(tmp_path: Path) -> None:
    # same GPU (10de:2204), a maker the catalog does not know
    stranger = card("0000:81:00.0", vbios=LAUNCH, subsystem_vendor_id="1043", subsystem_device_id="87b0")
    plan = plan_for(tmp_path, [stranger, card("0000:41:00.0")])
    c = by_bus(plan)["0000:81:00.0"]
    assert (c.action, c.target_version, c.board) == ("unknown-board", None, None)
    assert [(f.id, f.severity) for f in plan.findings] == [
        ("upgrade.unknown-board", Severity.INFO),
        ("upgrade.unverified-image", Severity.BLOCK),
    ]
    assert "0000:81:00.0" in plan.steps[0].cards  # still backed up
    assert all("0000:81:00.0" not in s.cards for s in plan.steps if s.id == "flash")


def test_a_version_newer_than_the_catalog_knows_is_left_alone(tmp_path: Path) -> None:
    c = by_bus(plan_for(tmp_path, [card("0000:41:00.0", vbios="94.02.43.00.01")]))["0000:41:00.0"]
    assert c.action == "keep" and "newer than the catalog knows" in c.reason


def test_an_unknown_build_code_is_neither_newer_nor_flashed_over(tmp_path: Path) -> None:
    # 94.02.42.80.FF differs from the recommended .27 only in the board maker's build code: not "newer" (FF > 27
    # as numbers means nothing), and not flashed over either, since nothing says it is older
    c = by_bus(plan_for(tmp_path, [card("0000:41:00.0", vbios="94.02.42.80.FF")]))["0000:41:00.0"]
    assert c.action == "keep" and c.target_version is None
    assert "newer" not in c.reason and "only in the build code" in c.reason


def test_an_older_version_not_in_the_catalog_is_flashed(tmp_path: Path) -> None:
    c = by_bus(plan_for(tmp_path, [card("0000:41:00.0", vbios="94.02.30.00.01")]))["0000:41:00.0"]
    assert c.action == "flash" and c.target_version == "94.02.42.80.27"


def test_unreadable_version_blocks_instead_of_guessing(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, [card("0000:41:00.0", vbios=None)])
    assert by_bus(plan)["0000:41:00.0"].action == "check"
    assert "upgrade.version-unknown" in [f.id for f in plan.blocks]


def test_card_selection_limits_the_flash_not_the_backup(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, [card("0000:41:00.0"), card("0000:61:00.0")], selected=("0000:61:00.0",))
    assert [c.bus_id for c in plan.flash_cards] == ["0000:61:00.0"]
    assert plan.steps[0].cards == ["0000:41:00.0", "0000:61:00.0"]


def test_nothing_to_flash_plans_only_the_backup(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, [card("0000:01:00.0", sub="3982", vbios="94.02.42.C0.05")])
    assert [s.id for s in plan.steps] == ["backup"] and not plan.ready and plan.findings == []


def test_old_driver_is_warned(tmp_path: Path) -> None:
    cat_dir = write_catalog(
        tmp_path / "cat2",
        {"10de-2204-3842-3987": board_toml([{**seed_images()[0], "min_driver": "465.89"}, *seed_images()[1:]])},
    )
    plan = build_upgrade_plan(
        LiveHost(str(tmp_path)), [card("0000:41:00.0", driver_version="460.39")], load_directory(cat_dir)
    )
    assert [f.id for f in plan.findings if f.severity is Severity.INFO] == ["upgrade.driver"]


def test_cli_card_selection_and_usage(fwman: FwmanEnv) -> None:
    doc = fwman("upgrade", "--dry-run", "--json", "--card", "61:00.0", "--snapshot", SNAP).json()
    assert [c["bus_id"] for c in doc["gpus"] if c["action"] == "flash" and c["selected"]] == ["0000:61:00.0"]
    assert fwman("upgrade", "--dry-run", "--card", "99:00.0", "--snapshot", SNAP).code == 2
    r = fwman("upgrade", "--snapshot", SNAP)
    assert r.code == 2 and "--dry-run" in r.stderr
