"""`fwman driver settings`: the recommended NVreg_* options per GPU generation with their sources, fwman's own
modprobe file, /proc/driver/nvidia/params read back, and the initramfs regenerated to carry the file.

Hosts: the bundled 4x3090 rig, and a constructed 2x RTX 5090 host (10de:2b85) built with the same generator, both
materialised into temp roots. The initramfs generator is a stand-in on PATH that packs the root's
/etc/modprobe.d/*.conf into a real newc archive with the real cpio, as mkinitramfs does (its lines 406-407).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver import settings as nv
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.settings_rig import H200_PARAMS, KVER, initramfs_generator, settings_host, write_params

FILE = "etc/modprobe.d/fwman-nvidia-p2p.conf"


def test_2x5090_recommends_the_two_keys_with_their_source_writes_them_and_regenerates_the_initramfs(
    tmp_path: Path,
) -> None:
    root = settings_host(tmp_path, "2x5090")
    write_params(root, RMForceStaticBar1="0", PeerMappingOverride="1")
    (root / "boot").mkdir(exist_ok=True)
    (root / f"boot/initrd.img-{KVER}").write_bytes(b"")  # an image without the file
    env = FwmanEnv(path_prepend=[initramfs_generator(tmp_path, root)])
    r = env("--root", str(root), "driver", "settings", "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["generations"] == {"blackwell": ["0000:01:00.0", "0000:21:00.0"]}
    assert [(s["option"], s["state"], s["loaded"]) for s in doc["settings"]] == [
        ("NVreg_RMForceStaticBar1=1", "not in effect", "0"),
        ("NVreg_PeerMappingOverride=1", "in effect", "1"),
    ]
    assert all(s["source"] == "github.com/noonghunna/club-3090 issue 873, PR 875" for s in doc["settings"])
    assert doc["file_ok"] is False and doc["changed"] is False
    dry = env("--root", str(root), "driver", "settings", "--apply", "--dry-run")
    assert "would write /etc/modprobe.d/fwman-nvidia-p2p.conf" in dry.stdout
    assert f"would run update-initramfs -u -k {KVER}" in dry.stdout
    assert not (root / FILE).exists()
    done = env("--root", str(root), "driver", "settings", "--apply", "--json")
    assert done.code == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["changed"] is True and out["file_ok"] is True
    assert out["initramfs"]["state"] == "carries fwman's file as written"
    text = (root / FILE).read_text()
    assert text.splitlines()[-1] == "options nvidia NVreg_RMForceStaticBar1=1 NVreg_PeerMappingOverride=1"
    assert "(github.com/noonghunna/club-3090 issue 873, PR 875)" in text
    assert (tmp_path / "argv").read_text().split() == ["-u", "-k", KVER]
    again = json.loads(env("--root", str(root), "driver", "settings", "--apply", "--json").stdout)
    assert again["changed"] is False  # the second run has nothing to do
    assert (tmp_path / "argv").read_text().count("\n") == 1


def test_4x3090_recommends_nothing_and_says_the_sources_are_silent(tmp_path: Path) -> None:
    root = settings_host(tmp_path, "4x3090")
    r = FwmanEnv()("--root", str(root), "driver", "settings")
    assert r.code == 0, r.stderr
    assert "GPUs: ampere (4 GPUs)" in r.stdout
    assert "ampere: no NVreg option is named for 3090 P2P over BAR1" in r.stdout
    assert "/etc/modprobe.d/fwman-nvidia-p2p.conf: absent (nothing to write)" in r.stdout


def test_rebar_adds_enable_resizable_bar_with_its_source_and_unknown_options_are_named() -> None:
    params = nv.parse_params(H200_PARAMS.read_text())
    assert params["EnableResizableBar"] == "0" and params["RegistryDwords"] == ""
    [rebar] = [s for s in nv.recommended({nv.AMPERE}, rebar=True)]
    assert rebar.option == "NVreg_EnableResizableBar=1" and "ReBarUEFI" in rebar.source
    assert nv.state(rebar, params) == (nv.NOT_IN_EFFECT, "0")
    # the stock module of the H200 has no RMForceStaticBar1 line: the option is not the loaded module's
    static = nv.recommended({nv.BLACKWELL})[0]
    assert nv.state(static, params) == (nv.UNKNOWN_OPTION, None)
    assert nv.state(static, None) == (nv.NOT_LOADED, None)


@pytest.mark.parametrize(
    ("name", "gen"),
    [("NVIDIA GeForce RTX 3090", "ampere"), ("RTX 4090", "ada"), ("NVIDIA RTX PRO 6000 Blackwell", "blackwell"),
     ("NVIDIA GeForce RTX 5090", "blackwell"), ("NVIDIA H200", "other"), (None, "other")],
)  # fmt: skip
def test_generations(name: str | None, gen: str) -> None:
    assert nv.generation(name) == gen


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_params_of_any_text_is_a_dict_or_a_parse_error(text: str) -> None:
    try:
        out = nv.parse_params(text)
    except ParseError:
        return
    assert isinstance(out, dict)


def test_modules_status_shows_each_option_and_whether_it_is_in_effect(tmp_path: Path) -> None:
    root = settings_host(tmp_path, "2x5090")
    write_params(root, RMForceStaticBar1="0", PeerMappingOverride="1")
    env = FwmanEnv()
    text = env("--root", str(root), "modules", "status").stdout
    assert "module option NVreg_RMForceStaticBar1=1: not in effect (loaded 0) (`fwman driver settings`)" in text
    assert "module option NVreg_PeerMappingOverride=1: in effect" in text
    doc = json.loads(env("--root", str(root), "modules", "status", "--json").stdout)
    assert [s["state"] for s in doc["driver_settings"]["settings"]] == ["not in effect", "in effect"]


def test_the_p2p_fingerprint_holds_the_options_and_a_change_unverifies_the_record() -> None:
    from dataclasses import replace

    from fwman.p2p.history import Fingerprint, changes
    from fwman.reports.doctor.checks.verification import verification_findings
    from tests.support.p2p_records import FP, copy_record

    on = replace(FP, module_options=(("PeerMappingOverride", "1"), ("RMForceStaticBar1", "1")))
    off = replace(FP, module_options=(("PeerMappingOverride", "1"), ("RMForceStaticBar1", "0")))
    assert Fingerprint.from_json(on.to_json()) == on  # through the history's JSON
    [change] = changes(on, off)
    assert change.describe() == (
        "module options changed (was NVreg_PeerMappingOverride=1 NVreg_RMForceStaticBar1=1, "
        "now NVreg_PeerMappingOverride=1 NVreg_RMForceStaticBar1=0)"
    )
    [f] = verification_findings([copy_record(fp=on)], off)
    assert f.severity.value == "warn" and "since module options changed" in f.message
    # a record from before the field (None) still counts: the options were not recorded, not different
    assert changes(FP, off) == []


def test_a_replay_says_what_its_recording_lacks_instead_of_guessing_absent() -> None:
    """The example recording has no /proc/driver/nvidia/params recorded, while scan and audit of it say 570.86.16 is
    loaded: settings must not call the module unloaded. The real H200 capture did not record fwman's modprobe file:
    settings must not call it absent."""
    r = FwmanEnv()("--snapshot", str(EXAMPLE_HOST), "driver", "settings")
    assert r.code == 0, r.stderr
    assert "/proc/driver/nvidia/params: not recorded in this recording (unknown: fwman does not guess)" in r.stdout
    assert "not loaded" not in r.stdout
    doc = FwmanEnv()("--snapshot", str(EXAMPLE_HOST), "driver", "settings", "--json").json()
    assert doc["params_error"].startswith("not recorded")
    h200 = FwmanEnv()("--snapshot", str(EXAMPLE_HOST.parent / "h200-1gpu"), "driver", "settings")
    assert "/etc/modprobe.d/fwman-nvidia-p2p.conf: not recorded in this recording" in h200.stdout, h200.stdout
    assert "absent" not in h200.stdout
    h200_doc = FwmanEnv()("--snapshot", str(EXAMPLE_HOST.parent / "h200-1gpu"), "driver", "settings", "--json").json()
    assert h200_doc["file_error"].startswith("not recorded")
    assert "570.86.16" in FwmanEnv()("--snapshot", str(EXAMPLE_HOST), "scan").stdout  # what the recording does say
