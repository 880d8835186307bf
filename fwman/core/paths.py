"""Every host path fwman reads or writes, in one place (standard library only, so hooks can import it cheaply).

Paths are absolute *host* paths; a :class:`~fwman.host.base.Host` maps them under ``--root`` or into a
snapshot. Nothing here touches the machine. Grouped by who owns the file: fwman's own configuration, state,
cache and logs first, then the system files fwman writes into (hooks, units, boot loaders), then the system
files it only reads.
"""

from __future__ import annotations

# --- fwman's configuration (root's, trusted) ---------------------------------------------------------------
ETC_DIR = "/etc/fwman"
CONFIG_FILE = f"{ETC_DIR}/config.toml"
#: catalog signing keys an administrator trusts directly on this host (beside those the keys document names)
CATALOG_KEYS_DIR = f"{ETC_DIR}/keys.d"
#: root keys an administrator adds on this host (beside fwman/keys/): they may sign a catalog keys document
CATALOG_ROOT_KEYS_DIR = f"{ETC_DIR}/root-keys.d"
CATALOG_URL_FILE = f"{ETC_DIR}/catalog-url"
CATALOG_ETC_OVERRIDES = f"{ETC_DIR}/catalog-overrides.toml"
#: the roots a board maker's signed update program must chain to (PEM; an administrator's choice), else SYSTEM_CA_BUNDLE
AUTHENTICODE_ROOTS = f"{ETC_DIR}/authenticode-roots.pem"
#: Debian's ca-certificates bundle: the default roots for Authenticode (docs/fetch.md, "Signed update programs")
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
#: local catalog entries for boards the curated catalog does not know (``fwman catalog add-local``; unsigned)
LOCAL_CATALOG_ENTRIES_DIR = f"{ETC_DIR}/catalog.d"
#: public keys module bundles are accepted from (`fwman modules import`); the catalog's keys are not used
BUNDLE_KEYS_DIR = f"{ETC_DIR}/bundle-keys.d"

# --- fwman's state (/var/lib/fwman): kept across upgrades, backups kept forever ---------------------------
STATE_DIR = "/var/lib/fwman"
LOCAL_CATALOG_DIR = f"{STATE_DIR}/catalog"
CATALOGS_DIR = f"{STATE_DIR}/catalogs"
CATALOG_STATE_OVERRIDES = f"{STATE_DIR}/overrides.toml"
BACKUPS_DIR = f"{STATE_DIR}/backups"
BACKUPS_MANIFEST = f"{BACKUPS_DIR}/manifest.json"
FLASH_JOURNAL_DIR = f"{STATE_DIR}/journal"
FLASH_HISTORY_FILE = f"{STATE_DIR}/history.jsonl"
FLASH_STAGING_DIR = f"{STATE_DIR}/staging"
FLASH_LOGS_DIR = f"{STATE_DIR}/logs"
MODULES_STATE_DIR = f"{STATE_DIR}/modules"
MODULES_SOURCE_RECORD = f"{MODULES_STATE_DIR}/source.json"
MODULES_STAMP = f"{MODULES_STATE_DIR}/current.stamp"
BOOT_PIN_STATE = f"{STATE_DIR}/boot-pin.json"
#: left by a kernel hook's boot check; apt's Post-Invoke hook (APT_BOOT_CHECK) checks again when it is there
BOOT_CHECK_PENDING = f"{STATE_DIR}/boot-check.pending"
#: what `fwman p2p` verified, one JSON line per run, with the fingerprint of the configuration it ran on
P2P_HISTORY_FILE = f"{STATE_DIR}/p2p-history.jsonl"
DKMS_BLOCK_STATE = f"{STATE_DIR}/dkms-block.json"
SIGNING_CONFIG = f"{STATE_DIR}/signing.json"
SIGNING_KEY_DIR = f"{STATE_DIR}/signing"
USERSPACE_HOLD_STATE = f"{STATE_DIR}/userspace-hold.json"
#: `fwman modules preflight`: the verdict per (kernel, headers, source commit, patches) and the last run
PREFLIGHT_STATE = f"{STATE_DIR}/preflight.json"
#: the kernels `fwman modules preflight --hold` holds back with APT_KERNEL_PREFLIGHT_PIN, and why
KERNEL_HOLD_STATE = f"{STATE_DIR}/kernel-hold.json"
#: `fwman driver move`: the record of the last driver version move (from, to, stage) and its working directory
#: (the staged new set, the kept previous one)
MOVE_RECORD = f"{STATE_DIR}/driver-move.json"
MOVE_DIR = f"{STATE_DIR}/move"
#: one flash, restore, backup or upgrade apply at a time: flock(2) on this file, which records the holder
FLASH_LOCK_FILE = f"{STATE_DIR}/flash.lock"

# --- fwman's caches and logs (safe to delete) --------------------------------------------------------------
CACHE_DIR = "/var/cache/fwman"
IMAGE_CACHE_DIR = f"{CACHE_DIR}/images"
BRANCH_CACHE_FILE = f"{CACHE_DIR}/branches.json"
OBJECT_CACHE_DIR = f"{CACHE_DIR}/objects"
SOURCE_CACHE_DIR = f"{CACHE_DIR}/src"
#: donor patches of ``[forks.NAME]`` tables, kept by their verified sha256 (fwman.driver.build.donor)
DONOR_PATCH_DIR = f"{CACHE_DIR}/donor-patches"
BUILD_DIR = f"{CACHE_DIR}/build"
#: the pre-flight's scratch space: per kernel, the downloaded header packages, their unpacked root, the build
PREFLIGHT_DIR = f"{CACHE_DIR}/preflight"
#: per-kernel compatibility patches (fwman.driver.build.patches), like DKMS PATCH[#]/PATCH_MATCH[#]
KERNEL_PATCHES_DIR = f"{ETC_DIR}/patches.d"
LOG_DIR = "/var/log/fwman"
LOCK_FILE = "/run/lock/fwman.lock"

# --- system files fwman writes (hooks, units, overrides, messages) ----------------------------------------
KERNEL_POSTINST_DIR = "/etc/kernel/postinst.d"
KERNEL_HEADER_POSTINST_DIR = "/etc/kernel/header_postinst.d"
POSTINST_HOOK = f"{KERNEL_POSTINST_DIR}/fwman"
HEADER_POSTINST_HOOK = f"{KERNEL_HEADER_POSTINST_DIR}/fwman"
CATCHUP_UNIT_NAME = "fwman-catchup.service"
CATCHUP_UNIT = f"/etc/systemd/system/{CATCHUP_UNIT_NAME}"
CATCHUP_UNIT_WANTS = f"/etc/systemd/system/multi-user.target.wants/{CATCHUP_UNIT_NAME}"
#: `fwman driver power`: the unit that reapplies persistence mode and power limits at every boot
POWER_UNIT_NAME = "fwman-gpu-power.service"
POWER_UNIT = f"/etc/systemd/system/{POWER_UNIT_NAME}"
POWER_UNIT_WANTS = f"/etc/systemd/system/multi-user.target.wants/{POWER_UNIT_NAME}"
#: the unit's command: a shell fast path that starts Python only when something changed
CATCHUP_SCRIPT = "/usr/local/lib/fwman/fwman-catchup"
DEPMOD_OVERRIDE = "/etc/depmod.d/fwman.conf"
APT_DKMS_PIN = "/etc/apt/preferences.d/fwman-nvidia-dkms"
APT_USERSPACE_PIN = "/etc/apt/preferences.d/fwman-nvidia-userspace"
APT_USERSPACE_BLACKLIST = "/etc/apt/apt.conf.d/51fwman-nvidia-userspace"
#: `fwman modules preflight --hold`: the kernels the patched modules will not build for, kept from landing
APT_KERNEL_PREFLIGHT_PIN = "/etc/apt/preferences.d/fwman-kernel-preflight"
POSTRM_HOOK = "/etc/kernel/postrm.d/fwman"
KERNEL_INSTALL_PLUGIN = "/etc/kernel/install.d/50-fwman.install"
#: the final boot check, after the boot loader's own hook (run-parts: C byte order, "zz-update-grub" < "zzz-fwman";
#: kernel-install: `sort -V`, 90-loaderentry < 99-zz-fwman), see docs/boot-safety.md
POSTINST_BOOT_CHECK = f"{KERNEL_POSTINST_DIR}/zzz-fwman"
POSTRM_BOOT_CHECK = "/etc/kernel/postrm.d/zzz-fwman"
KERNEL_INSTALL_BOOT_CHECK = "/etc/kernel/install.d/99-zz-fwman.install"
#: apt's DPkg::Post-Invoke: the boot check once more after apt's dpkg run, when a kernel hook asked for it
APT_BOOT_CHECK = "/etc/apt/apt.conf.d/99fwman-boot-check"
#: apt's configuration directory and its tool: where neither is, there is no apt to run APT_BOOT_CHECK
APT_GET = "/usr/bin/apt-get"
#: apt's sources: where they are, apt is (fwman never writes them, unlike its own pins under /etc/apt)
APT_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d")
MOTD_FILE = "/etc/motd.d/fwman"
#: the default output of `fwman metrics write`; node_exporter's textfile collector reads *.prom from the directory
#: its --collector.textfile.directory names (point -o there when it is another one)
METRICS_FILE = "/var/lib/prometheus/node-exporter/fwman.prom"
METRICS_UNIT_NAME = "fwman-metrics.service"
METRICS_UNIT = f"/etc/systemd/system/{METRICS_UNIT_NAME}"
METRICS_TIMER_NAME = "fwman-metrics.timer"
METRICS_TIMER = f"/etc/systemd/system/{METRICS_TIMER_NAME}"
METRICS_TIMER_WANTS = f"/etc/systemd/system/timers.target.wants/{METRICS_TIMER_NAME}"

# --- boot loaders ------------------------------------------------------------------------------------------
GRUB_CFG = "/boot/grub/grub.cfg"
GRUBENV = "/boot/grub/grubenv"
PVE_BOOT_PIN = "/etc/kernel/proxmox-boot-pin"
PVE_NEXT_BOOT_PIN = "/etc/kernel/next-boot-pin"
#: the ESPs proxmox-boot-tool keeps in sync; with it, `kernel pin` only writes the pin file until a `refresh`
PVE_BOOT_UUIDS = "/etc/kernel/proxmox-boot-uuids"
SYSTEMD_BOOT_LOADER_DIRS = ("/boot/efi/loader", "/efi/loader", "/boot/loader")

# --- module options (`fwman driver settings`) -------------------------------------------------------------------
#: fwman's own modprobe file of NVreg_* options (nothing else in /etc/modprobe.d is touched)
MODPROBE_OPTIONS_FILE = "/etc/modprobe.d/fwman-nvidia-p2p.conf"
#: where modprobe reads its configuration (modprobe.d(5)): a ``blacklist`` line in any ``*.conf`` here counts
MODPROBE_CONFIG_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d",
                        "/lib/modprobe.d")  # fmt: skip
#: the loaded modules' directories (``/sys/module/NAME``)
SYS_MODULE_DIR = "/sys/module"

# --- DKMS ---------------------------------------------------------------------------------------------------
#: DKMS's tree: ``M/V/KVER/ARCH/module/`` holds what it built
DKMS_TREE = "/var/lib/dkms"
DKMS_MOK_KEY = "/var/lib/dkms/mok.key"
DKMS_MOK_CERT = "/var/lib/dkms/mok.pub"
#: DKMS's own settings, where ``mok_signing_key=`` / ``mok_certificate=`` may name another key (dkms 3.x)
DKMS_FRAMEWORK_CONF = "/etc/dkms/framework.conf"
DKMS_FRAMEWORK_CONF_DIR = "/etc/dkms/framework.conf.d"
#: Ubuntu's Machine Owner Key: made by shim-signed's `update-secureboot-policy --new-key` and used by Ubuntu's
#: DKMS when framework.conf names no key (docs/ubuntu.md)
SHIM_MOK_KEY = "/var/lib/shim-signed/mok/MOK.priv"
SHIM_MOK_CERT = "/var/lib/shim-signed/mok/MOK.der"

# --- kernel and driver state (read only) --------------------------------------------------------------------
PCI_DEVICES_DIR = "/sys/bus/pci/devices"
#: the kernel's printk buffer, one record per read() (Documentation/ABI/testing/dev-kmsg); needs CAP_SYSLOG
#: where kernel.dmesg_restrict is 1
KMSG = "/dev/kmsg"
PROC_MODULES = "/proc/modules"
#: UEFI variables as efivarfs shows them (4 attribute bytes, then the value); the global variables' vendor GUID
#: is EFI_GLOBAL_VARIABLE of the UEFI specification
EFIVARS_DIR = "/sys/firmware/efi/efivars"
EFI_GLOBAL_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
SECUREBOOT_VAR = f"{EFIVARS_DIR}/SecureBoot-{EFI_GLOBAL_GUID}"
SETUPMODE_VAR = f"{EFIVARS_DIR}/SetupMode-{EFI_GLOBAL_GUID}"
#: the kernel's module trees, one directory per kernel release (``modules_dir(kver)``)
MODULES_ROOT = "/lib/modules"


def donor_patch_file(sha256: str) -> str:
    """Return where the donor patch of digest ``sha256`` is kept once verified."""
    return f"{DONOR_PATCH_DIR}/{sha256}.patch"


#: where Debian, Ubuntu and Proxmox install each kernel, its System.map and its configuration
BOOT_DIR = "/boot"


def kernel_config(kver: str) -> str:
    """Return ``/boot/config-KVER``: the configuration Debian, Ubuntu and Proxmox install beside each kernel."""
    return f"{BOOT_DIR}/config-{kver}"


def modules_dir(kver: str) -> str:
    """Return ``/lib/modules/KVER``: the module tree (build/, updates/, modules.dep) of kernel release ``kver``."""
    return f"{MODULES_ROOT}/{kver}"


PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
#: the loaded nvidia module's options, ``Name: value`` per line (the sysfs parameters read empty)
PROC_DRIVER_PARAMS = "/proc/driver/nvidia/params"
NVIDIA_MODULE_VERSION = "/sys/module/nvidia/version"
NVIDIA_MODULE_SRCVERSION = "/sys/module/nvidia/srcversion"
KERNEL_RELEASE = "/proc/sys/kernel/osrelease"
#: changes at every boot: a lock record from another boot is stale whatever its pid says
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
DEPMOD_CONFIG_DIRS = ("/etc/depmod.d", "/run/depmod.d", "/usr/local/lib/depmod.d", "/usr/lib/depmod.d", "/lib/depmod.d")
FIRMWARE_SEARCH_DIRS = ("/lib/firmware/updates", "/lib/firmware")
FIRMWARE_CLASS_PATH_PARAM = "/sys/module/firmware_class/parameters/path"
VFIO_PCI_DRIVER_DIR = "/sys/bus/pci/drivers/vfio-pci"
IOMMU_GROUPS_DIR = "/sys/kernel/iommu_groups"

# --- the package manager's database (read only: whether the Debian package owns the hooks) ------------------
DPKG_INFO_DIR = "/var/lib/dpkg/info"
#: every package dpkg knows, in deb822 paragraphs (Package, Status, Version, Provides, ...)
DPKG_STATUS = "/var/lib/dpkg/status"

# --- NVIDIA's .run installer leaves these behind (read only) ----------------------------------------------
NVIDIA_RUN_INSTALLER_MARKERS = (
    "/usr/bin/nvidia-installer",
    "/var/log/nvidia-installer.log",
    "/usr/bin/nvidia-uninstall",
)

# --- platform configuration (read only) ---------------------------------------------------------------------
PVE_LXC_DIR = "/etc/pve/lxc"
PVE_QEMU_DIR = "/etc/pve/qemu-server"
NCCL_CONF = "/etc/nccl.conf"

#: the host's name: the kernel's (what `hostname` prints), else the one the system sets at boot
KERNEL_HOSTNAME = "/proc/sys/kernel/hostname"
HOSTNAME_FILE = "/etc/hostname"

#: where CDI specs live (CDI SPEC.md; /var/run/cdi is cleared at boot, nvidia-cdi-refresh writes there)
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
#: the character device majors the running kernel gave each driver (``MAJOR NAME`` lines)
PROC_DEVICES = "/proc/devices"
#: nvidia-container-toolkit's refresh of the CDI spec (1.18.0 and later): a path unit and its service
CDI_REFRESH_UNITS = tuple(f"{d}/nvidia-cdi-refresh.{kind}" for d in ("/etc/systemd/system", "/usr/lib/systemd/system",
                          "/lib/systemd/system") for kind in ("path", "service"))  # fmt: skip
