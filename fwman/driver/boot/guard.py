"""The boot check that runs after the boot loader's own hook: the pin decided on the loader's final menu.

The kernel hook (``/etc/kernel/postinst.d/fwman``) builds before ``initramfs-tools`` and ``zz-update-grub``, so
when it checks the next boot, grub.cfg does not list the new kernel yet: judged there, a kernel whose build just
failed looks harmless (the menu still boots the old one) and ``zz-update-grub`` then makes it the default. The
final check runs where the menu is final:

- ``/etc/kernel/postinst.d/zzz-fwman`` and ``/etc/kernel/postrm.d/zzz-fwman``: run-parts orders names by C-locale
  bytes, so ``zzz-fwman`` comes after ``zz-update-grub``, ``zz-proxmox-boot`` and ``zz-systemd-boot``, in every
  kernel package's own postinst and postrm, whatever order dpkg configures image and headers in;
- ``/etc/kernel/install.d/99-zz-fwman.install``: kernel-install sorts plugin names with ``sort -V``, so it comes
  after ``90-loaderentry.install``;
- apt's ``DPkg::Post-Invoke`` (``/etc/apt/apt.conf.d/99fwman-boot-check``): once more after apt's dpkg run, for
  what changes the menu later in that run without a kernel hook (a boot loader installed after the kernel). It
  runs only when a kernel hook left :data:`~fwman.core.paths.BOOT_CHECK_PENDING`, so other apt runs start no
  Python.

Each is :func:`final_check`: :func:`fwman.driver.boot.pin.ensure_safe_boot` under the module lock.
"""

from __future__ import annotations

from fwman.core import paths
from fwman.driver.boot.pin import BootCheck, ensure_safe_boot
from fwman.driver.build.lock import module_lock
from fwman.host.actions import Tell, silent
from fwman.host.base import Host

#: the callers that run inside a kernel package's (or kernel-install's) hooks: apt may run more after them
KERNEL_HOOKS = ("postinst", "postrm", "kernel-install")


def request_recheck(host: Host) -> None:
    """Leave the marker that makes apt's Post-Invoke hook check the boot once more after dpkg returns."""
    host.write_bytes(paths.BOOT_CHECK_PENDING, b"a kernel hook ran: apt's Post-Invoke hook checks the boot again\n")


def final_check(
    host: Host,
    origin: str,
    removed: frozenset[str] = frozenset(),
    tell: Tell = silent,
    lock_timeout: float = 300.0,
    under_apt: bool = False,
) -> BootCheck:
    """Pin the newest safe kernel if the kernel the loader boots next has no working modules; return the check.

    ``under_apt``: dpkg runs under apt (``DPKG_FRONTEND_LOCKED`` in the environment), whose Post-Invoke check
    follows. ``removed`` are kernels being removed (a removal hook names its kernel: its files may still be under
    /lib/modules). From a kernel hook the Post-Invoke marker is left for apt; from apt it is consumed. Raises
    LockTimeout when a build holds the module lock longer than ``lock_timeout``.
    """
    with module_lock(host, lock_timeout):
        # inside an apt run a kernel hook leaves an unpinnable next boot to apt's check, and apt's check says it
        # in its one line (CheckBootResult): so once per apt run, at its end
        defer = origin == "apt" or (under_apt and origin in KERNEL_HOOKS)
        check = ensure_safe_boot(host, tell, gone=removed, defer=defer)
        if origin in KERNEL_HOOKS:
            request_recheck(host)
        elif origin == "apt" and host.exists(paths.BOOT_CHECK_PENDING):
            host.unlink(paths.BOOT_CHECK_PENDING)
    return check
