"""`p2p --soak`: the copy test repeated under load, the kernel log (Xid, AMD-Vi, DMAR) and the PCIe AER
counters of each GPU and its upstream port read before and after; anything new fails the test naming the GPU."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from fwman.core.errors import ParseError
from fwman.p2p.soak import (
    DMAR,
    IO_PAGE_FAULT,
    XID,
    parse_aer_counters,
    parse_duration,
    parse_kernel_events,
    same_device,
)
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.gpus import MemoryGpus, all_pairs, memory_driver

# the lines as the public threads show them (cited in fwman/p2p/soak.py and docs/p2p-test.md)
XID_LINE = "[ 1843.308145] NVRM: Xid (PCI:0000:21:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
AMDVI_LINE = (
    "[ 7460.483919] nvidia 0000:21:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x001c "
    "address=0x2bee0314000 flags=0x0020]"
)
AMDVI_OLD = "kernel: [  221.565929] IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff6101b0 flags=0x0070]"
DMAR_LINE = (
    "[ 6611.206544] DMAR: [DMA Read NO_PASID] Request device [03:00.0] fault addr 0x100000 [fault reason 0x71] "
    "SM: Present bit in first-level paging entry is clear"
)
# the sample output of the kernel's Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, counters zeroed
AER_CLEAN = (
    "Receiver Error 0\nBad TLP 0\nBad DLLP 0\nRELAY_NUM Rollover 0\nReplay Timer Timeout 0\nAdvisory Non-Fatal 0\n"
    "Corrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 0\n"
)


def test_kernel_lines_are_read_with_their_device_and_code() -> None:
    events = parse_kernel_events("\n".join(["[ 1.0] unrelated", XID_LINE, AMDVI_LINE, DMAR_LINE]))
    assert [(e.kind, e.device, e.code) for e in events] == [
        (XID, "0000:21:00", 79),
        (IO_PAGE_FAULT, "0000:21:00.0", None),
        (DMAR, "03:00.0", None),
    ]
    assert same_device("0000:21:00", "0000:21:00.0") and not same_device("0000:21:00", "0000:01:00.0")
    assert same_device("03:00.0", "0000:03:00.0") and same_device("0000:21:00.0", "0000:21:00.0")
    # CUDA prints 8-digit domains; the Xid line 4
    assert same_device("00000000:21:00", "0000:21:00.0")


def test_the_old_amd_vi_form_names_the_device_inside_the_brackets() -> None:
    [event] = parse_kernel_events("kernel: [  221.562629] AMD-Vi: Event logged [\n" + AMDVI_OLD)
    assert event.kind == IO_PAGE_FAULT and event.device == "05:00.0" and event.line == AMDVI_OLD


@given(st.text(max_size=300))
def test_any_kernel_log_gives_events_never_an_exception(text: str) -> None:
    for e in parse_kernel_events(text):
        assert e.kind in (XID, IO_PAGE_FAULT, DMAR) and e.line in text


def test_aer_counters_parse_and_reject_a_foreign_file() -> None:
    counters = parse_aer_counters(AER_CLEAN.replace("Bad TLP 0", "Bad TLP 3"), "x")
    assert counters["Bad TLP"] == 3 and counters["RELAY_NUM Rollover"] == 0 and counters["TOTAL_ERR_COR"] == 0
    assert len(counters) == 9
    with pytest.raises(ParseError, match="line 2"):
        parse_aer_counters("Receiver Error 0\nnot a counter line\n", "/sys/x/aer_dev_correctable")


@given(st.text(max_size=200))
def test_any_aer_file_is_counters_or_a_parse_error(text: str) -> None:
    try:
        counters = parse_aer_counters(text, "p")
    except ParseError:
        return
    assert all(isinstance(v, int) and v >= 0 for v in counters.values())


def test_durations() -> None:
    assert parse_duration("60s") == 60 and parse_duration("10m") == 600 and parse_duration("1.5h") == 5400
    assert parse_duration("90") == 90
    for bad in ("", "0s", "2d", "-5", "1e9", "25h"):
        with pytest.raises(ParseError):
            parse_duration(bad)


@given(st.text(max_size=20))
def test_any_duration_is_seconds_or_a_parse_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ParseError:
        return
    assert 1 <= seconds <= 86400


# --- the command, on the bundled 4x3090 rig with a stand-in journalctl that prints the rig's kernel log ---

LOG = "var/log/kern-standin.log"


@pytest.fixture
def rig(tmp_path: Path) -> tuple[Path, Path]:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / LOG).parent.mkdir(parents=True, exist_ok=True)
    (root / LOG).write_text("[    1.000000] kernel: Linux version 6.8.12-4-pve\n" + XID_LINE.replace("79", "13") + "\n")
    for dev in ("0000:01:00.0", "0000:21:00.0", "0000:20:01.1", "0000:00:01.1"):
        d = root / paths.PCI_DEVICES_DIR.lstrip("/") / dev
        (d / "aer_dev_correctable").write_text(AER_CLEAN)
        (d / "aer_dev_nonfatal").write_text("Undefined 0\nData Link Protocol 0\nTOTAL_ERR_NONFATAL 0\n")
        (d / "aer_dev_fatal").write_text("Undefined 0\nData Link Protocol 0\nTOTAL_ERR_FATAL 0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "journalctl"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/journalctl.argv\ncat {root / LOG}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return root, bin_dir


@dataclass
class NoisyGpus(MemoryGpus):
    """GPUs whose copy from GPU0 to GPU1 logs what a broken P2P path does: an AMD-Vi fault and Xid 31 from
    GPU1, and a correctable bad TLP counted at GPU1's upstream port (the stand-in's hardware side effects)."""

    root: Path | None = None

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        super().copy(dst_device, dst, src_device, src, size)
        if self.root is not None and (src_device, dst_device) == (0, 1):
            with (self.root / LOG).open("a") as log:
                log.write(AMDVI_LINE + "\n" + XID_LINE.replace("79", "31") + "\n")
            port = self.root / paths.PCI_DEVICES_DIR.lstrip("/") / "0000:20:01.1" / "aer_dev_correctable"
            port.write_text(AER_CLEAN.replace("Bad TLP 0", "Bad TLP 2").replace("TOTAL_ERR_COR 0", "TOTAL_ERR_COR 2"))


def test_a_clean_soak_repeats_rounds_reads_before_and_after_and_records_it(rig: tuple[Path, Path]) -> None:
    root, bin_dir = rig
    gpus = MemoryGpus(2, peer=all_pairs(2))
    r = FwmanEnv(cuda_driver=memory_driver(gpus), path_prepend=[bin_dir])(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1s"
    )
    assert r.code == 0, r.stderr
    assert "soak round 1: every byte verified" in r.stderr
    # the Xid 13 that was in the log before the soak is not a finding
    assert "soak verdict: soak clean:" in r.stdout and "NEW" not in r.stdout
    assert "watched 0000:01:00.0, 0000:00:01.1 (above 0000:01:00.0)" in r.stdout
    argv = (root.parent / "journalctl.argv").read_text().splitlines()
    assert argv == ["-k -b --no-pager -o short-monotonic"] * 2  # before and after
    [line] = (root / paths.P2P_HISTORY_FILE.lstrip("/")).read_text().splitlines()
    record = json.loads(line)
    assert record["ok"] is True and record["soak"]["rounds"] >= 1 and record["soak"]["findings"] == []


def test_new_faults_and_a_grown_aer_counter_fail_the_soak_naming_the_gpu(rig: tuple[Path, Path]) -> None:
    root, bin_dir = rig
    gpus = NoisyGpus(2, peer=all_pairs(2), root=root)
    r = FwmanEnv(cuda_driver=memory_driver(gpus), path_prepend=[bin_dir])(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1", "--json"
    )
    assert r.code == 4, r.stderr
    soak = json.loads(r.stdout)["soak"]
    assert soak["ok"] is False
    whats = {(f["gpu"], f["what"]) for f in soak["findings"]}
    # every copy GPU0 -> GPU1 logged the same two lines: one finding per kind, counted, never one per line
    assert len(soak["findings"]) == 3
    fault, xid, aer = (f["count"] for f in soak["findings"])
    assert fault == xid > 1 and aer == 1
    assert ("0000:21:00.0", "IOMMU IO_PAGE_FAULT (AMD-Vi) from 0000:21:00.0") in whats
    assert ("0000:21:00.0", "Xid 31 from 0000:21:00") in whats
    assert any(
        g == "0000:21:00.0" and w.startswith("aer_dev_correctable Bad TLP +2 (was 0, now 2)") and "0000:20:01.1" in w
        for g, w in whats
    )
    assert not any("Xid 13" in w for _, w in whats)  # the old line
    [line] = (root / paths.P2P_HISTORY_FILE.lstrip("/")).read_text().splitlines()
    assert json.loads(line)["ok"] is False and json.loads(line)["verdict"].startswith("FAILED under load")
    # and doctor's verification step reads it back as a failed test on this configuration
    doctor = json.loads(FwmanEnv()("--root", str(root), "doctor", "--json").stdout)
    [step] = [s for s in doctor["steps"] if s["id"] == "p2p.verified"]
    [verified] = [f for f in step["findings"] if f["id"] == "p2p.verified"]
    assert verified["severity"] == "block" and "FAILED under load" in verified["message"]


def test_a_failing_round_ends_the_soak(rig: tuple[Path, Path]) -> None:
    root, bin_dir = rig
    gpus = MemoryGpus(2, peer=all_pairs(2), corrupt={(0, 1): [5]})
    r = FwmanEnv(cuda_driver=memory_driver(gpus), path_prepend=[bin_dir])(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1h", "--no-record"
    )
    assert r.code == 4
    assert "soak round 1: FAILED" in r.stderr and "soak round 2" not in r.stderr
    assert "soak: 1 round(s)" in r.stdout


def test_an_unreadable_kernel_log_is_said_not_passed_over(rig: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = rig
    empty = tmp_path / "nobin"
    empty.mkdir()
    failing = empty / "journalctl"
    failing.write_text("#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n")
    failing.chmod(0o755)
    r = FwmanEnv(cuda_driver=memory_driver(MemoryGpus(2, peer=all_pairs(2))), path_prepend=[empty])(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1", "--no-record"
    )
    assert r.code == 0, r.stderr
    assert "not read: kernel log: journalctl -k exited 1: No journal files were found." in r.stdout
    assert "(kernel log NOT read)" in r.stdout


def test_soak_is_for_the_copy_test_and_wants_a_duration() -> None:
    run = FwmanEnv()
    assert run("p2p", "--soak", "forever").code == 2
    r = run("p2p", "--nccl", "--soak", "60s")
    assert r.code == 2 and "--soak repeats the copy test" in r.stderr


def test_a_total_that_grew_alone_is_named_and_a_counter_is_named_instead_of_its_total() -> None:
    from fwman.p2p.soak import Health, compare

    devices = [("0000:01:00.0", "0000:01:00.0")]
    was = Health(log_lines=[], aer={"0000:01:00.0": {"aer_dev_fatal": {"Poisoned TLP": 0, "TOTAL_ERR_FATAL": 0}}})
    total_only = Health(
        log_lines=[], aer={"0000:01:00.0": {"aer_dev_fatal": {"Poisoned TLP": 0, "TOTAL_ERR_FATAL": 1}}}
    )
    both = Health(log_lines=[], aer={"0000:01:00.0": {"aer_dev_fatal": {"Poisoned TLP": 1, "TOTAL_ERR_FATAL": 1}}})
    assert [f.what for f in compare(was, total_only, devices)] == ["aer_dev_fatal TOTAL_ERR_FATAL +1 (was 0, now 1)"]
    assert [f.what for f in compare(was, both, devices)] == ["aer_dev_fatal Poisoned TLP +1 (was 0, now 1)"]
    assert compare(was, was, devices) == []


# --- without journalctl: the kernel's /dev/kmsg (a regular file under --root stands in for the device) ---

KMSG = "dev/kmsg"


def _kmsg(prio: int, seq: int, usec: int, text: str) -> str:
    """Return one record as /dev/kmsg gives it (Documentation/ABI/testing/dev-kmsg)."""
    return f"{prio},{seq},{usec},-;{text}\n"


@dataclass
class KmsgNoisyGpus(MemoryGpus):
    """GPUs whose copy from GPU0 to GPU1 puts an AMD-Vi fault and Xid 31 from GPU1 in the kernel's buffer, and a
    program writes a forged Xid into /dev/kmsg (facility user: the kernel never lets user space log as it)."""

    root: Path | None = None
    seq: int = 100

    def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
        super().copy(dst_device, dst, src_device, src, size)
        if self.root is not None and (src_device, dst_device) == (0, 1):
            self.seq += 3
            usec = 9_000_000_000 + self.seq
            strip = lambda line: line.split("] ", 1)[1]  # noqa: E731  (the text without journalctl's stamp)
            with (self.root / KMSG).open("a") as log:
                log.write(_kmsg(3, self.seq, usec, strip(AMDVI_LINE)) + " SUBSYSTEM=pci\n DEVICE=+pci:0000:21:00.0\n")
                log.write(_kmsg(4, self.seq + 1, usec + 1, strip(XID_LINE).replace("79", "31")))
                log.write(_kmsg(12, self.seq + 2, usec + 2, strip(XID_LINE).replace("79", "48")))  # 12: user.warn


@pytest.fixture
def kmsg_rig(rig: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """The rig with no journalctl on PATH and its kernel's buffer in ROOT/dev/kmsg (an old Xid 13 in it)."""
    root, _ = rig
    (root / "dev").mkdir(exist_ok=True)
    (root / KMSG).write_text(
        _kmsg(6, 1, 1_000_000, "Linux version 6.8.12-4-pve")
        + _kmsg(4, 2, 1_843_308_145, XID_LINE.split("] ", 1)[1].replace("79", "13"))
    )
    nobin = tmp_path / "nobin"
    nobin.mkdir()
    return root, nobin


def test_without_journalctl_the_soak_reads_the_kernels_buffer(kmsg_rig: tuple[Path, Path]) -> None:
    root, nobin = kmsg_rig
    gpus = KmsgNoisyGpus(2, peer=all_pairs(2), root=root)
    r = FwmanEnv(cuda_driver=memory_driver(gpus), variables={"PATH": str(nobin)})(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1", "--json", "--no-record"
    )
    assert r.code == 4, r.stderr
    soak = json.loads(r.stdout)["soak"]
    assert not any("kernel log" in u for u in soak["unread"]) and soak["ok"] is False
    whats = [(f["gpu"], f["what"], f["count"]) for f in soak["findings"]]
    fault, xid = whats[0], whats[1]
    assert fault[:2] == ("0000:21:00.0", "IOMMU IO_PAGE_FAULT (AMD-Vi) from 0000:21:00.0") and fault[2] > 1
    assert xid[:2] == ("0000:21:00.0", "Xid 31 from 0000:21:00") and xid[2] == fault[2]
    # the evidence is the record as dmesg prints it: its timestamp (microseconds since boot) and text
    assert (
        soak["findings"][1]["evidence"].startswith("[ 9000.000")
        and "Xid (PCI:0000:21:00): 31" in (soak["findings"][1]["evidence"])
    )
    # the Xid 13 from before the soak, and the forged Xid 48 a program wrote, are no findings
    assert not any("Xid 13" in w or "Xid 48" in w for _, w, _ in whats)


def test_kmsg_records_stamped_before_the_soaks_start_are_not_considered(kmsg_rig: tuple[Path, Path]) -> None:
    root, nobin = kmsg_rig

    @dataclass
    class LateOldRecord(MemoryGpus):
        """A record stamped before the soak began shows up during it (the buffer is the kernel's to order)."""

        def copy(self, dst_device: int, dst: int, src_device: int, src: int, size: int) -> None:
            super().copy(dst_device, dst, src_device, src, size)
            with (root / KMSG).open("a") as log:
                log.write(_kmsg(4, 3, 1_500_000_000, XID_LINE.split("] ", 1)[1].replace("79", "62")))

    r = FwmanEnv(cuda_driver=memory_driver(LateOldRecord(2, peer=all_pairs(2))), variables={"PATH": str(nobin)})(
        "--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1", "--no-record"
    )
    assert r.code == 0, r.stdout + r.stderr
    assert "soak verdict: soak clean:" in r.stdout and "(kernel log)" in r.stdout and "Xid 62" not in r.stdout


def test_a_kernel_buffer_that_cannot_be_read_is_said_not_read(kmsg_rig: tuple[Path, Path]) -> None:
    root, nobin = kmsg_rig
    (root / KMSG).write_text("this is no kmsg record\n")
    env = FwmanEnv(cuda_driver=memory_driver(MemoryGpus(2, peer=all_pairs(2))), variables={"PATH": str(nobin)})
    argv = ("--root", str(root), "p2p", "--size", "1", "--repeats", "1", "--soak", "1", "--no-record")
    r = env(*argv)
    assert r.code == 0, r.stderr
    assert "not read: kernel log: journalctl is not installed; kernel log record: /dev/kmsg: record 1" in r.stdout
    assert "(kernel log NOT read)" in r.stdout
    (root / KMSG).unlink()
    r = env(*argv)
    assert "not read: kernel log: journalctl is not installed; cannot read /dev/kmsg" in r.stdout
