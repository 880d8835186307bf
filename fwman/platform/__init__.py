"""What the host's platform says about GPU workloads, read once for audit and doctor.

One owner per file format: :mod:`.distro` (``/etc/os-release`` and the Proxmox markers: Debian, Ubuntu or
Proxmox VE), :mod:`.dpkg` (dpkg's status file and file lists), :mod:`.proxmox` (LXC container and QEMU VM configs
under /etc/pve), :mod:`.envfile` (``KEY=VALUE`` environment files), :mod:`.systemd` (unit
``Environment=``/``EnvironmentFile=``/``ExecStart=``),
:mod:`.nccl` (``/etc/nccl.conf``), :mod:`.virt` (is this a VM guest: CPU flags, DMI, systemd-detect-virt),
:mod:`.engines` (Docker/Podman ``ps -a`` and ``inspect`` JSON), :mod:`.cdi` (CDI specs, JSON or YAML),
:mod:`.userspace` (which NVIDIA user-space driver libraries a root holds: the host's, a container's),
:mod:`.containers` (LXC, Docker and Podman containers' filesystems: their driver libraries, NCCL, CUDA compat
libraries, environment and mounts).
Pure parsers take text and never raise (the engine and CDI parsers raise ParseError only); readers take a
Host and raise the FwmanError they meet (MissingError, NotRecordedError), leaving the caller to say what an
unreadable file means, except the user-space and container readers, which list what they could not read in
the caller's ``unreadable`` and go on. This package imports only fwman.core and fwman.host (and PyYAML, for
CDI specs; pydantic, for the container models ``fwman audit`` dumps).
"""
