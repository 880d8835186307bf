"""What the host's platform says about GPU workloads, read once for audit and doctor.

One owner per file format: :mod:`.distro` (``/etc/os-release`` and the Proxmox markers: Debian, Ubuntu or
Proxmox VE), :mod:`.dpkg` (dpkg's status file and file lists), :mod:`.proxmox` (LXC container and QEMU VM configs
under /etc/pve), :mod:`.envfile` (``KEY=VALUE`` environment files), :mod:`.systemd` (unit
``Environment=``/``EnvironmentFile=``/``ExecStart=``),
:mod:`.nccl` (``/etc/nccl.conf``), :mod:`.virt` (is this a VM guest: CPU flags, DMI, systemd-detect-virt),
:mod:`.engines` (Docker/Podman ``ps -a`` and ``inspect`` JSON), :mod:`.cdi` (CDI specs, JSON or YAML).
Pure parsers take text and never raise (the engine and CDI parsers raise ParseError only); readers take a
Host and raise the FwmanError they meet (MissingError, NotRecordedError), leaving the caller to say what an
unreadable file means. This package imports only fwman.core and fwman.host (and PyYAML, for CDI specs).
"""
