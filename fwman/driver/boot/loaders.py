"""Reading the boot loaders: GRUB's grub.cfg and grubenv, systemd-boot's entries, Proxmox's pin files.

Pure parsers plus the readers that answer two questions: which loader does this host boot with
(:func:`detect_bootloader`), and which kernel does it boot next (:func:`default_boot_kernel`). Nothing here
changes the host; pinning lives in :mod:`fwman.driver.boot.pin`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import ParseError
from fwman.core.jsonout import meta
from fwman.driver.kernels import installed_kernels
from fwman.host.base import Host


# -- GRUB ---------------------------------------------------------------------------------------------------
@dataclass
class GrubItem:
    """A menu entry (``kver`` from its ``linux`` line) or a submenu (``children``) of grub.cfg."""

    title: str
    id: str | None
    kver: str | None = None
    children: list[GrubItem] | None = None


@dataclass
class GrubMenu:
    """The parsed grub.cfg: top-level items and the configured default (``"${saved_entry}"``, ``"0"``...)."""

    items: list[GrubItem]
    default: str


_ITEM_RE = re.compile(r"^(menuentry|submenu)\s+(?:'((?:[^']|'\\'')*)'|\"([^\"]*)\")(.*)\{\s*$")
_ID_RE = re.compile(r"\$menuentry_id_option\s+'([^']*)'")
_LINUX_RE = re.compile(r"^linux\S*\s+\S*/vmlinuz-(\S+)")
_DEFAULT_RE = re.compile(r"^set\s+default=\"?([^\"\s]*)\"?")


def parse_grub_cfg(text: str) -> GrubMenu:
    """Return the menu of a grub.cfg. Lines it does not understand are skipped; never raises."""
    top: list[GrubItem] = []
    stack: list[GrubItem | None] = []  # None: a block that is not a menu item (function, if {...})
    defaults: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        # a menu line ends with "{"; without one the pattern would fail only after backtracking through every
        # '\'' of the title (quadratic), and with one its first way through the title matches
        m = _ITEM_RE.match(line) if line.endswith("{") else None
        if m:
            title = (m.group(2) if m.group(2) is not None else m.group(3) or "").replace("'\\''", "'")
            ident = _ID_RE.search(m.group(4))
            item = GrubItem(title, ident.group(1) if ident else None, None, [] if m.group(1) == "submenu" else None)
            parent = next((s for s in reversed(stack) if s is not None), None)
            if parent is not None and parent.children is not None:
                parent.children.append(item)
            elif parent is None:
                top.append(item)
            stack.append(item)
            continue
        if line.endswith("{"):
            stack.append(None)
            continue
        if line == "}":
            if stack:
                stack.pop()
            continue
        lm = _LINUX_RE.match(line)
        if lm and stack and stack[-1] is not None and stack[-1].children is None:
            stack[-1].kver = lm.group(1)
            continue
        dm = _DEFAULT_RE.match(line)
        if dm and "next_entry" not in dm.group(1):
            defaults.append(dm.group(1))
    return GrubMenu(top, defaults[-1] if defaults else "0")


def parse_grubenv(data: bytes) -> dict[str, str]:
    """Return the variables of a GRUB environment block. Raises ParseError when it is not one."""
    text = data.decode("utf-8", errors="replace")
    if not text.startswith("# GRUB Environment Block"):
        raise ParseError("GRUB environment block", "header", "missing '# GRUB Environment Block'", 0)
    env: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def grub_lookup(menu: GrubMenu, spec: str) -> GrubItem | None:
    """Return the item a GRUB entry spec names (``2``, ``1>3``, ids, titles, joined by ``>``), or None."""
    items: list[GrubItem] | None = menu.items
    found: GrubItem | None = None
    for part in spec.split(">"):
        if items is None:
            return None
        found = None
        if part.isdigit():
            index = int(part)
            found = items[index] if index < len(items) else None
        else:
            found = next((i for i in items if part in (i.id, i.title)), None)
        if found is None:
            return None
        items = found.children
    return found


def grub_entry_for(menu: GrubMenu, kver: str) -> str | None:
    """Return the saved_entry spec (``submenu-id>entry-id``, titles where there is no id) booting ``kver``."""

    def walk(items: list[GrubItem], path: list[str]) -> str | None:
        for item in items:
            name = item.id or item.title
            if item.children is not None:
                found = walk(item.children, [*path, name])
                if found:
                    return found
            elif item.kver == kver and "recovery" not in (item.id or item.title).lower():
                return ">".join([*path, name])
        return None

    return walk(menu.items, [])


def grub_state(host: Host) -> tuple[GrubMenu | None, dict[str, str]]:
    """Return (the parsed grub.cfg or None when absent, the grubenv variables or {} when absent/corrupt)."""
    menu = parse_grub_cfg(host.read_text(paths.GRUB_CFG)) if host.exists(paths.GRUB_CFG) else None
    env: dict[str, str] = {}
    if host.exists(paths.GRUBENV):
        with contextlib.suppress(ParseError):
            env = parse_grubenv(host.read_bytes(paths.GRUBENV))
    return menu, env


# -- systemd-boot -------------------------------------------------------------------------------------------
def loader_dir(host: Host) -> str | None:
    """Return the systemd-boot ``loader`` directory that holds a ``loader.conf``, or None."""
    return next((d for d in paths.SYSTEMD_BOOT_LOADER_DIRS if host.exists(f"{d}/loader.conf")), None)


def parse_loader_entry(text: str) -> str | None:
    """Return the kernel release a systemd-boot entry boots (``version`` line, else the ``linux`` path)."""
    version = None
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] == "version":
            version = words[1].strip()
        elif len(words) == 2 and words[0] == "linux" and version is None:
            m = re.search(r"vmlinuz-(\S+)", words[1])
            if m:
                version = m.group(1)
    return version


def loader_entries(host: Host, loader: str) -> dict[str, str]:
    """Return {entry id: kernel release} of the systemd-boot entries under ``loader``."""
    directory = f"{loader}/entries"
    if not host.is_dir(directory):
        return {}
    confs = [name for name in host.listdir(directory) if name.endswith(".conf")]
    found = {name[: -len(".conf")]: parse_loader_entry(host.read_text(f"{directory}/{name}")) for name in confs}
    return {entry: kver for entry, kver in found.items() if kver}


# -- which loader, which kernel boots next -------------------------------------------------------------------
def detect_bootloader(host: Host) -> str:
    """Return ``proxmox``, ``grub``, ``systemd-boot`` or ``unknown`` for ``host``."""
    if host.which("proxmox-boot-tool") and (host.exists(paths.PVE_BOOT_UUIDS) or host.exists(paths.PVE_BOOT_PIN)):
        return "proxmox"
    if host.exists(paths.GRUB_CFG) or host.exists(paths.GRUBENV):
        return "grub"
    if loader_dir(host) is not None:
        return "systemd-boot"
    if host.which("proxmox-boot-tool"):
        return "proxmox"
    return "unknown"


@dataclass
class BootDefault:
    """The kernel the machine boots next, and how fwman knows."""

    kver: str | None = field(metadata=meta(key="kernel"))
    loader: str
    how: str


def default_boot_kernel(host: Host) -> BootDefault:
    """Return the kernel ``host`` boots next (the newest installed one when the loader says nothing else)."""
    kernels = installed_kernels(host)
    newest = kernels[-1] if kernels else None
    loader = detect_bootloader(host)
    if loader == "proxmox":
        for path, how in ((paths.PVE_NEXT_BOOT_PIN, "next-boot pin"), (paths.PVE_BOOT_PIN, "proxmox-boot-tool pin")):
            if host.exists(path):
                pinned = host.read_text(path).strip()
                if pinned:
                    return BootDefault(pinned, loader, f"{how} ({path})")
        return BootDefault(newest, loader, "newest kernel (not pinned)")
    if loader == "grub":
        menu, env = grub_state(host)
        if menu is None:
            return BootDefault(newest, loader, "newest kernel (no grub.cfg)")
        spec, how = menu.default, f"grub.cfg default {menu.default!r}"
        if env.get("next_entry"):
            spec, how = env["next_entry"], "grubenv next_entry (next boot only)"
        elif spec == "${saved_entry}":
            spec, how = env.get("saved_entry", "0") or "0", "grubenv saved_entry"
        item = grub_lookup(menu, spec)
        if item is not None and item.children is None and item.kver:
            return BootDefault(item.kver, loader, how)
        return BootDefault(newest, loader, f"{how} names no kernel entry: assuming the newest kernel")
    if loader == "systemd-boot":
        directory = loader_dir(host)
        assert directory is not None
        entries = loader_entries(host, directory)
        default = loader_default(host.read_text(f"{directory}/loader.conf"))
        if default:
            for entry_id in sorted(entries, reverse=True):
                if fnmatch.fnmatch(entry_id, default.removesuffix(".conf")):
                    return BootDefault(entries[entry_id], loader, f"loader.conf default {default!r}")
        return BootDefault(newest, loader, "newest kernel (loader.conf names no default)")
    return BootDefault(newest, loader, "newest kernel (boot loader not recognised)")


def loader_default(text: str) -> str | None:
    """Return the ``default`` pattern of a ``loader.conf`` text, or None when it names none."""
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] == "default":
            return words[1].strip()
    return None
