"""`fwman metrics write`: the node_exporter textfile on the recorded 4x3090 host and on temp roots."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fwman.core.termtext import visible
from fwman.reports.metrics import Family, Sample, escape_label, format_value, render
from tests.support.env import EXAMPLE_HOST, HOSTS, FwmanEnv

SERIES = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


def _series(text: str) -> dict[str, str]:
    """Return {name{labels}: value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SERIES.match(line)
        assert m, line
        out[line.rsplit(" ", 1)[0]] = m.group("value")
    return out


def test_the_recorded_host_as_metrics(fwman: FwmanEnv) -> None:
    result = fwman("metrics", "write", "--stdout", "--snapshot", str(EXAMPLE_HOST))
    assert result.code == 0, result.stderr
    series = _series(result.stdout)
    info = (
        'fwman_gpu_info{bus_id="0000:41:00.0",name="NVIDIA GeForce RTX 3090",pci_id="10de:2204",'
        'subsystem="3842:3987",vbios_version="94.02.26.48.15"}'
    )
    assert series[info] == "1"
    assert series['fwman_gpu_bar1_bytes{bus_id="0000:41:00.0"}'] == "268435456"
    assert series['fwman_gpu_bar1_covers_vram{bus_id="0000:41:00.0"}'] == "0"
    assert series['fwman_gpu_pcie_link_width{bus_id="0000:01:00.0"}'] == "16"
    assert series['fwman_gpu_pcie_link_transfers_per_second{bus_id="0000:01:00.0"}'] == "16000000000"
    assert series['fwman_kernel_safe_to_boot{kernel="6.8.12-4-pve"}'] == "0"
    assert series['fwman_next_boot_safe{kernel="6.8.12-4-pve"}'] == "0"
    assert series["fwman_driver_components_matched"] == "1"
    assert series['fwman_driver_info{version="570.86.16"}'] == "1"
    assert all(series[f'fwman_metrics_source_up{{source="{s}"}}'] == "1" for s in ("gpus", "kernels", "driver"))
    assert float(series["fwman_last_check_timestamp_seconds"]) > 1.7e9
    # every family has HELP and TYPE once, before its samples
    names = [line.split()[2] for line in result.stdout.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names)) and all(n.startswith("fwman_") for n in names)


def test_write_puts_the_file_in_place_atomically_and_a_missing_source_is_not_an_error(
    tmp_path: Path, fwman: FwmanEnv
) -> None:
    (tmp_path / "lib/modules/6.1.0-50-amd64").mkdir(parents=True)
    result = fwman("metrics", "write", "--root", str(tmp_path))
    assert result.code == 0, result.stderr
    assert "note: gpus: not readable: no NVIDIA GPU found" in result.stderr
    directory = tmp_path / "var/lib/prometheus/node-exporter"
    assert os.listdir(directory) == ["fwman.prom"]  # no temporary file left behind
    prom = directory / "fwman.prom"
    assert prom.stat().st_mode & 0o777 == 0o644
    series = _series(prom.read_text())
    assert series['fwman_metrics_source_up{source="gpus"}'] == "0"
    assert not any(k.startswith("fwman_gpu_") for k in series)
    assert series['fwman_kernel_modules_installed{kernel="6.1.0-50-amd64"}'] == "0"

    other = fwman("metrics", "write", "-o", "/srv/metrics/fwman.prom", "--root", str(tmp_path))
    assert other.code == 0 and (tmp_path / "srv/metrics/fwman.prom").is_file()


def test_write_on_a_snapshot_refuses_like_every_changing_command(fwman: FwmanEnv) -> None:
    r = fwman("metrics", "write", "--snapshot", str(EXAMPLE_HOST))
    assert r.code == 2
    assert r.stderr.startswith("fwman: error: fwman metrics write changes a machine: it cannot run on a --snapshot")
    assert "wrote" not in r.stderr and r.stdout == ""
    assert fwman("metrics", "write", "-o", "/tmp/x.prom", "--snapshot", str(EXAMPLE_HOST)).code == 2
    assert fwman("metrics", "write", "--stdout", "--snapshot", str(EXAMPLE_HOST)).code == 0  # the replay's mode


def test_an_output_path_the_user_typed_that_cannot_be_written_is_a_usage_error(tmp_path: Path, fwman: FwmanEnv) -> None:
    (tmp_path / "var/x.prom").mkdir(parents=True)
    (tmp_path / "afile").write_text("a file\n")
    for output, says in [
        ("/var/x.prom", "-o /var/x.prom: cannot write: Is a directory"),
        ("/afile/sub.prom", "-o /afile/sub.prom: cannot write: "),
        ("", "-o '': not a host file path"),
        ("fwman.prom", "-o 'fwman.prom': not a host file path"),
        ("/srv/", "-o '/srv/': not a host file path"),
        ("/srv/../etc/x.prom", "not a host file path"),
    ]:
        r = fwman("metrics", "write", "-o", output, "--root", str(tmp_path))
        assert r.code == 2, (output, r.stderr)
        line = next(ln for ln in r.stderr.splitlines() if ln.startswith("fwman: error: "))
        assert says in line and "unexpected" not in r.stderr and "report it" not in r.stderr
        assert str(tmp_path) not in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile", "var", "x.prom"]  # nothing written
    # the default path is not the user's typo: a directory in its place is the host's problem (exit 1, no "bug")
    (tmp_path / "var/lib/prometheus/node-exporter/fwman.prom").mkdir(parents=True)
    r = fwman("metrics", "write", "--root", str(tmp_path))
    assert r.code == 1 and "cannot write /var/lib/prometheus/node-exporter/fwman.prom: Is a directory" in r.stderr
    assert "report it" not in r.stderr


def test_metrics_install_writes_an_enabled_timer_once(tmp_path: Path, fwman: FwmanEnv) -> None:
    dry = fwman("metrics", "install", "--dry-run", "--root", str(tmp_path))
    assert "would write /etc/systemd/system/fwman-metrics.timer" in dry.stdout and not (tmp_path / "etc").exists()
    assert fwman("metrics", "install", "--root", str(tmp_path)).stdout == "installed\n"
    service = (tmp_path / "etc/systemd/system/fwman-metrics.service").read_text()
    assert " -m fwman metrics write\n" in service and "@PYTHON@" not in service
    wants = tmp_path / "etc/systemd/system/timers.target.wants/fwman-metrics.timer"
    assert os.readlink(wants) == "/etc/systemd/system/fwman-metrics.timer"
    again = fwman("metrics", "install", "--root", str(tmp_path))
    assert again.stdout == "metrics timer already installed and current\n"
    assert fwman("metrics", "remove", "--root", str(tmp_path)).stdout == "removed\n"
    assert not wants.is_symlink() and not (tmp_path / "etc/systemd/system/fwman-metrics.service").exists()


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


@given(st.text())
def test_any_label_value_stays_on_one_line_and_comes_back(value: str) -> None:
    escaped = escape_label(value)
    assert "\n" not in escaped and re.fullmatch(r'(?:[^"\\]|\\[n"\\])*', escaped, re.DOTALL)
    assert _unescape(escaped) == visible(value)  # what the format cannot hold (a CR) comes back written out
    assert "\r" not in escaped


def test_render_groups_series_and_drops_duplicates() -> None:
    fam = Family("fwman_test_bytes", "A test.\nSecond line \\ here.")
    text = render([Sample(fam, 1, {"a": 'x"y'}), Sample(fam, 2.5, {"a": "z"}), Sample(fam, 3, {"a": 'x"y'})])
    assert text == (
        "# HELP fwman_test_bytes A test.\\nSecond line \\\\ here.\n"
        "# TYPE fwman_test_bytes gauge\n"
        'fwman_test_bytes{a="x\\"y"} 1\n'
        'fwman_test_bytes{a="z"} 2.5\n'
    )
    assert format_value(float("nan")) == "NaN" and format_value(float("inf")) == "+Inf"


def test_the_p2p_record_becomes_series_only_when_there_is_one(fwman: FwmanEnv) -> None:
    recorded = _series(fwman("metrics", "write", "--stdout", "--snapshot", str(HOSTS / "h200-1gpu")).stdout)
    assert recorded['fwman_p2p_verified{kind="nccl"}'] == "1"  # recorded on this very configuration
    assert recorded['fwman_p2p_last_check_ok{kind="nccl"}'] == "1"
    assert float(recorded['fwman_p2p_last_check_timestamp_seconds{kind="nccl"}']) > 1.7e9
    assert not any(k.startswith("fwman_p2p_slowest_pair") for k in recorded)  # NCCL: a bus bandwidth, no pair
    never = _series(fwman("metrics", "write", "--stdout", "--snapshot", str(EXAMPLE_HOST)).stdout)
    assert not any(k.startswith("fwman_p2p_") for k in never)
