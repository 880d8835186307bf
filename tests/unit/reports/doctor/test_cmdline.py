"""Where the kernel command line is set: /etc/default/grub's GRUB_CMDLINE_LINUX_DEFAULT (a shell assignment),
/etc/kernel/cmdline; the IOMMU fix names the file and the exact line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fwman.reports.doctor.cmdline import BootCmdline, add_parameter_fix, parse_grub_default

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_=,.-", min_size=1, max_size=12)


def test_the_last_assignment_wins_quotes_removed_comments_skipped() -> None:
    text = (
        '# GRUB_CMDLINE_LINUX_DEFAULT="commented"\nGRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
        "GRUB_CMDLINE_LINUX_DEFAULT='quiet amd_iommu=on'  # the owner's\nGRUB_CMDLINE_LINUX=\"\"\n"
    )
    assert parse_grub_default(text) == "quiet amd_iommu=on"
    assert parse_grub_default("GRUB_CMDLINE_LINUX_DEFAULT=\n") == ""
    assert parse_grub_default("GRUB_TIMEOUT=5\n") is None
    assert parse_grub_default('GRUB_CMDLINE_LINUX_DEFAULT="quiet\n') is None  # unclosed: not rewritten by advice
    assert parse_grub_default("GRUB_CMDLINE_LINUX_DEFAULT=quiet splash\n") is None  # a command, not an assignment


@given(st.lists(WORD, max_size=6), st.sampled_from(['"', "'"]))
def test_a_quoted_value_reads_back_as_written(words: list[str], quote: str) -> None:
    value = " ".join(words)
    assert parse_grub_default(f"GRUB_CMDLINE_LINUX_DEFAULT={quote}{value}{quote}\n") == value


@given(st.text(max_size=300))
def test_any_text_parses_to_a_value_or_none_and_never_raises(text: str) -> None:
    value = parse_grub_default(text)
    assert value is None or isinstance(value, str)


def test_the_fix_names_the_file_and_the_exact_line() -> None:
    grub = BootCmdline("quiet amd_iommu=on", None, proxmox=False)
    assert add_parameter_fix(grub, "iommu=pt") == (
        'in /etc/default/grub make the line `GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt"`, then '
        "`update-grub`; reboot"
    )
    pve = BootCmdline(None, "root=ZFS=rpool/ROOT/pve-1 boot=zfs", proxmox=True)
    fix = add_parameter_fix(pve, "iommu=pt")
    assert fix == (
        "make /etc/kernel/cmdline read `root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt`, then `proxmox-boot-tool "
        "refresh`; reboot"
    )
    already = BootCmdline("quiet iommu=pt", None, proxmox=False)
    assert '`GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"`' in (add_parameter_fix(already, "iommu=pt") or "")
    assert add_parameter_fix(BootCmdline(None, None, False, known=False), "iommu=pt") is None
    assert add_parameter_fix(BootCmdline(None, None, proxmox=True), "iommu=pt") is None
