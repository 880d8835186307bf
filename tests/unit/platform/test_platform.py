"""fwman.platform: environment files, systemd units, Proxmox LXC/QEMU configs, /etc/nccl.conf (shared by audit
and doctor). Parsers: real formats, and hypothesis (any text gives a value, never an exception). Readers: on a
snapshot host, where an unrecorded file raises instead of being taken as absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import NotRecordedError
from fwman.host.recording import SnapshotWriter
from fwman.host.snapshot import SnapshotHost
from fwman.platform import nccl, proxmox
from fwman.platform.envfile import parse_env_file, uncommented
from fwman.platform.proxmox import hostpci_lines, lxc_uses_gpu, parse_lxc_environment
from fwman.platform.systemd import parse_unit_environment

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


def test_env_file_forms() -> None:
    text = (
        "# comment\n\nexport NCCL_P2P_LEVEL=SYS\nA='x y'\nB=\"q # not a comment\"\nC=plain # trailing\n"
        "not an assignment\n1BAD=x\nEMPTY=\n"
    )
    assert parse_env_file(text) == {
        "NCCL_P2P_LEVEL": "SYS",
        "A": "x y",
        "B": "q # not a comment",
        "C": "plain",
        "EMPTY": "",
    }


def test_unit_environment_quotes_continuations_and_files() -> None:
    unit = (
        "[Unit]\nDescription=vLLM\n[Service]\n"
        'Environment="NCCL_DEBUG=INFO" NCCL_P2P_LEVEL=SYS "CUDA_VISIBLE_DEVICES=0,1"\n'
        "Environment=HF_HOME=/models\n# Environment=NCCL_P2P_LEVEL=LOC\n"
        "EnvironmentFile=-/etc/default/vllm\n"
        "ExecStart=/opt/bin/vllm serve m \\\n  --disable-custom-all-reduce\n"
    )
    env, files, execs = parse_unit_environment(unit)
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_P2P_LEVEL": "SYS", "CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": "/models"}
    assert files == ["/etc/default/vllm"]
    assert len(execs) == 1 and "--disable-custom-all-reduce" in execs[0] and "vllm" in execs[0]
    # bad quoting falls back to whitespace-separated words instead of failing; the broken word is skipped
    assert parse_unit_environment('Environment="A=1 B=2\n')[0] == {"B": "2"}


def test_lxc_environment_current_section_only() -> None:
    conf = (
        "arch: amd64\nlxc.environment: NCCL_P2P_LEVEL=SYS\nlxc.environment = NCCL_DEBUG=INFO\n"
        "lxc.environment: garbage\n[snap1]\nlxc.environment: NCCL_P2P_LEVEL=LOC\n"
    )
    assert parse_lxc_environment(conf) == {"NCCL_P2P_LEVEL": "SYS", "NCCL_DEBUG": "INFO"}


def test_hostpci_lines_current_section_only() -> None:
    conf = "boot: order=scsi0\nhostpci0: 0000:81:00.0,pcie=1\nhostpci1 : 82:00\n[pending]\nhostpci2: 0000:83:00.0\n"
    assert hostpci_lines(conf) == ["hostpci0: 0000:81:00.0,pcie=1", "hostpci1 : 82:00"]


def test_uncommented_drops_comment_lines_only() -> None:
    assert uncommented("# vllm serve\n; vllm\nrun vllm # here\n") == "run vllm # here"


def test_lxc_gpu_device_forms_and_hook() -> None:
    assert lxc_uses_gpu("lxc.cgroup2.devices.allow: c 195:* rwm\n") == (True, False)
    assert lxc_uses_gpu("lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n") == (True, False)
    assert lxc_uses_gpu("lxc.hook.mount: /usr/share/lxc/hooks/nvidia\n") == (False, True)
    # hyphenated hook keys and the raw LXC ``key = value`` form
    assert lxc_uses_gpu("lxc.hook.pre-start: sh -c 'nvidia-modprobe -u -c=0'\n") == (False, True)
    assert lxc_uses_gpu("lxc.hook.start-host = /usr/local/bin/nvidia-bind\n") == (False, True)
    assert lxc_uses_gpu("lxc.cgroup2.devices.allow = c 195:* rwm\n") == (True, False)
    assert lxc_uses_gpu("lxc.hook.pre-start: /usr/local/bin/mount-zfs\n") == (False, False)
    assert lxc_uses_gpu("lxc.cgroup2.devices.allow: c 226:* rwm\nmemory: 4096\n") == (False, False)


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_parsers_never_raise(text: str) -> None:
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parse_env_file(text).items())
    env, files, execs = parse_unit_environment(text)
    assert isinstance(env, dict) and isinstance(files, list) and isinstance(execs, list)
    assert all(isinstance(v, str) for v in parse_lxc_environment(text).values())
    assert all(line.startswith("hostpci") for line in hostpci_lines(text))
    device, hook = lxc_uses_gpu(text)
    assert isinstance(device, bool) and isinstance(hook, bool)


def _host(tmp_path: Path, recorded: bool = True) -> SnapshotHost:
    w = SnapshotWriter(redact=False, constructed=True, note="platform readers")
    w.add_dir("/etc/pve/lxc", ["101.conf", "notes.txt", "99.conf", "102.conf"])
    w.add_file("/etc/pve/lxc/101.conf", "dev0: /dev/nvidia0\n")
    w.add_absent("/etc/pve/lxc/99.conf")
    w.add_absent("/etc/pve/qemu-server")
    if recorded:
        w.add_file("/etc/nccl.conf", "NCCL_P2P_LEVEL=SYS\n")
    return SnapshotHost(w.write(tmp_path / "snap"))


def test_readers_list_configs_in_listing_order_and_say_absent(tmp_path: Path) -> None:
    host = _host(tmp_path)
    assert proxmox.lxc_config_names(host) == ["101.conf", "102.conf", "99.conf"]
    assert proxmox.qemu_config_names(host) == []
    assert proxmox.read_config(host, proxmox.lxc_config_path("101")) == "dev0: /dev/nvidia0\n"
    assert proxmox.read_config(host, "/etc/pve/lxc/99.conf") is None
    assert nccl.read_nccl_conf(host) == ("NCCL_P2P_LEVEL=SYS\n", {"NCCL_P2P_LEVEL": "SYS"})


def test_readers_raise_for_what_a_snapshot_did_not_record(tmp_path: Path) -> None:
    host = _host(tmp_path, recorded=False)
    with pytest.raises(NotRecordedError):
        nccl.read_nccl_conf(host)
    # reading several configs: the unrecorded one carries its error, the others are still read
    configs = proxmox.read_configs(host, proxmox.LXC_DIR, ["102.conf", "101.conf", "99.conf"])
    assert [(c.guest_id, c.text, type(c.error).__name__) for c in configs] == [
        ("102", "", "NotRecordedError"),
        ("101", "dev0: /dev/nvidia0\n", "NoneType"),
        ("99", "", "NoneType"),
    ]
