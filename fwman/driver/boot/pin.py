"""Never boot a kernel without working patched modules: which kernel boots next, and pinning a safe one.

A kernel is *safe to boot* when fwman's manifest for it exists, depmod resolves all five module names to
fwman's files, the files hash as recorded, and their ``vermagic`` names the kernel. When the kernel the machine
would boot next is not safe (its build failed, its headers never came), fwman pins the newest safe kernel:

- Proxmox (``proxmox-boot-tool`` present): ``proxmox-boot-tool kernel pin KVER``; undone with ``kernel unpin``.
- GRUB: ``grub-set-default`` (persistent; effective with ``GRUB_DEFAULT=saved``, which grub.cfg shows as
  ``set default="${saved_entry}"``); otherwise ``grub-reboot`` (``next_entry``, the next boot only: the
  boot-time catch-up pins again at every boot until the new kernel has working modules).
- systemd-boot: the ``default`` line of ``loader/loader.conf``.

What was done, and what to restore, is recorded in ``/var/lib/fwman/boot-pin.json``; a message of the day
(``/etc/motd.d/fwman``) and a journal line (``logger -t fwman``) say it loudly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.driver.build.install import check_installed, root_prefix
from fwman.driver.build.manifest import failed_path, load_manifest, now_iso, pending_path, read_marker
from fwman.host.base import Host

Report = Callable[[str], None]


def _nothing(_: str) -> None:
    return None


def version_key(kver: str) -> tuple[tuple[int, int | str], ...]:
    """Return a sort key ordering kernel releases as versions (``6.1.0-53-amd64`` after ``6.1.0-50-amd64``)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.findall(r"\d+|[^\d]+", kver))


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
        m = _ITEM_RE.match(line)
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


def _grub_state(host: Host) -> tuple[GrubMenu | None, dict[str, str]]:
    menu = parse_grub_cfg(host.read_text(paths.GRUB_CFG)) if host.exists(paths.GRUB_CFG) else None
    env: dict[str, str] = {}
    if host.exists(paths.GRUBENV):
        try:
            env = parse_grubenv(host.read_bytes(paths.GRUBENV))
        except ParseError:
            env = {}
    return menu, env


# -- systemd-boot -------------------------------------------------------------------------------------------
def _loader_dir(host: Host) -> str | None:
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


def _loader_entries(host: Host, loader: str) -> dict[str, str]:
    """Return {entry id: kernel release} of the systemd-boot entries under ``loader``."""
    found: dict[str, str] = {}
    directory = f"{loader}/entries"
    if not host.is_dir(directory):
        return found
    for name in host.listdir(directory):
        if name.endswith(".conf"):
            kver = parse_loader_entry(host.read_text(f"{directory}/{name}"))
            if kver:
                found[name[: -len(".conf")]] = kver
    return found


# -- which loader, which kernel boots next -------------------------------------------------------------------
def detect_bootloader(host: Host) -> str:
    """Return ``proxmox``, ``grub``, ``systemd-boot`` or ``unknown`` for ``host``."""
    if host.which("proxmox-boot-tool") and (
        host.exists("/etc/kernel/proxmox-boot-uuids") or host.exists(paths.PVE_BOOT_PIN)
    ):
        return "proxmox"
    if host.exists(paths.GRUB_CFG) or host.exists(paths.GRUBENV):
        return "grub"
    if _loader_dir(host) is not None:
        return "systemd-boot"
    if host.which("proxmox-boot-tool"):
        return "proxmox"
    return "unknown"


def installed_kernels(host: Host) -> list[str]:
    """Return the kernels with a module directory (and so bootable, in practice), oldest first."""
    from fwman.driver.kmod.depmod import installed_kernels as listed

    return sorted(listed(host), key=version_key)


@dataclass
class BootDefault:
    """The kernel the machine boots next, and how fwman knows."""

    kver: str | None
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
        menu, env = _grub_state(host)
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
        directory = _loader_dir(host)
        assert directory is not None
        entries = _loader_entries(host, directory)
        default = _loader_default(host.read_text(f"{directory}/loader.conf"))
        if default:
            import fnmatch

            for entry_id in sorted(entries, reverse=True):
                if fnmatch.fnmatch(entry_id, default.removesuffix(".conf")):
                    return BootDefault(entries[entry_id], loader, f"loader.conf default {default!r}")
        return BootDefault(newest, loader, "newest kernel (loader.conf names no default)")
    return BootDefault(newest, loader, "newest kernel (boot loader not recognised)")


def _loader_default(text: str) -> str | None:
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] == "default":
            return words[1].strip()
    return None


# -- safe to boot --------------------------------------------------------------------------------------------
@dataclass
class Safety:
    """Whether a kernel boots with working patched modules, and why (one line)."""

    kver: str
    safe: bool
    reason: str


def kernel_safety(host: Host, kver: str, hash_files: bool = True) -> Safety:
    """Return whether ``kver`` has working patched modules installed. Never raises for a broken state."""
    try:
        manifest = load_manifest(host, kver)
    except ParseError as e:
        return Safety(kver, False, f"manifest unreadable: {e.message}")
    if manifest is None:
        failed = read_marker(host, failed_path(kver))
        if failed is not None:
            where = failed.detail.get("file")
            return Safety(kver, False, f"build failed: {where + ': ' if where else ''}{failed.reason}")
        pending = read_marker(host, pending_path(kver))
        if pending is not None:
            return Safety(kver, False, f"pending: {pending.reason}")
        return Safety(kver, False, "no patched modules built for this kernel")
    bad = [c for c in check_installed(host, manifest, hash_files=hash_files) if not c.ok]
    if bad:
        return Safety(kver, False, f"{bad[0].name}: {bad[0].problem}")
    if hash_files:  # the full check (status, check-boot, builds): will they load under Secure Boot, initramfs?
        from fwman.driver.boot.loadable import load_problem

        problem = load_problem(host, kver, manifest)
        if problem is not None:
            return Safety(kver, False, problem)
    return Safety(kver, True, f"patched modules verified ({manifest.branch or manifest.source}, {manifest.commit})")


# -- pinning -------------------------------------------------------------------------------------------------
@dataclass
class PinRecord:
    """What fwman pinned, why, and what to restore."""

    kernel: str  # the safe kernel the box is pinned to
    avoided: str  # the kernel it must not boot
    reason: str
    method: str  # "proxmox" | "grub-saved" | "grub-next" | "systemd-boot"
    at: str = field(default_factory=now_iso)
    previous: dict[str, str] = field(default_factory=dict)
    warning: str | None = None


def read_pin(host: Host) -> PinRecord | None:
    """Return the current pin record, or None when fwman pinned nothing."""
    if not host.exists(paths.BOOT_PIN_STATE):
        return None
    try:
        doc = json.loads(host.read_bytes(paths.BOOT_PIN_STATE).decode())
        return PinRecord(**doc)
    except (ValueError, TypeError, UnicodeDecodeError, MissingError):
        return None


def _run_tool(host: Host, argv: list[str]) -> None:
    result = host.run(argv, timeout=300)
    if result.missing:
        raise MissingError(f"{argv[0]} not found")
    if not result.ok:
        raise FwmanError(f"{' '.join(argv)} failed: {(result.stderr or result.stdout).strip()}")


def _grub_tool_args(host: Host) -> list[str]:
    prefix = root_prefix(host)
    return [f"--boot-directory={prefix}/boot"] if prefix is not None else []


def _grubenv_local(host: Host) -> str:
    local = host.local_path(paths.GRUBENV)
    if local is None:
        raise FwmanError("no local path for the GRUB environment block")
    return local


def pin(host: Host, safe: str, avoided: str, reason: str) -> PinRecord:
    """Make ``host`` boot ``safe`` instead of ``avoided`` and record it. Raises FwmanError when it cannot."""
    loader = detect_bootloader(host)
    record: PinRecord
    if loader == "proxmox":
        if root_prefix(host) is not None:
            raise FwmanError("proxmox-boot-tool can only pin the running system, not a temp root")
        previous = {"pin": host.read_text(paths.PVE_BOOT_PIN).strip()} if host.exists(paths.PVE_BOOT_PIN) else {}
        _run_tool(host, ["proxmox-boot-tool", "kernel", "pin", safe])
        record = PinRecord(safe, avoided, reason, "proxmox", previous=previous)
    elif loader == "grub":
        menu, env = _grub_state(host)
        if menu is None:
            raise MissingError(f"{paths.GRUB_CFG} not found: cannot tell GRUB which entry boots {safe}")
        entry = grub_entry_for(menu, safe)
        if entry is None:
            raise FwmanError(
                f"{paths.GRUB_CFG} has no entry for {safe}", hint="run update-grub, then fwman modules catchup"
            )
        previous = {k: env[k] for k in ("saved_entry", "next_entry") if k in env}
        if menu.default == "${saved_entry}":
            _run_tool(host, ["grub-set-default", *_grub_tool_args(host), entry])
            record = PinRecord(safe, avoided, reason, "grub-saved", previous=previous)
        else:
            _run_tool(host, ["grub-reboot", *_grub_tool_args(host), entry])
            record = PinRecord(
                safe,
                avoided,
                reason,
                "grub-next",
                previous=previous,
                warning=(
                    f"GRUB's default is {menu.default!r}, not the saved entry: only the NEXT boot is pinned "
                    "(fwman pins again at every boot); set GRUB_DEFAULT=saved in /etc/default/grub and run "
                    "update-grub for a lasting pin"
                ),
            )
    elif loader == "systemd-boot":
        directory = _loader_dir(host)
        assert directory is not None
        entries = _loader_entries(host, directory)
        entry_id = next((e for e, k in sorted(entries.items()) if k == safe), None)
        if entry_id is None:
            raise FwmanError(f"no systemd-boot entry boots {safe} (in {directory}/entries)")
        conf_path = f"{directory}/loader.conf"
        text = host.read_text(conf_path)
        old = _loader_default(text)
        lines = [ln for ln in text.splitlines() if ln.split(None, 1)[:1] != ["default"]]
        host.write_bytes(conf_path, ("\n".join([f"default {entry_id}.conf", *lines]) + "\n").encode())
        record = PinRecord(safe, avoided, reason, "systemd-boot", previous={"default": old} if old else {})
    else:
        raise FwmanError(
            "boot loader not recognised (no proxmox-boot-tool, GRUB or systemd-boot): cannot pin a kernel",
            hint=f"choose {safe} in the boot menu by hand, or remove {avoided}",
        )
    earlier = read_pin(host)
    if earlier is not None:  # pinned again: what to restore in the end is what was there before fwman's first pin
        record.previous = earlier.previous
    host.write_bytes(paths.BOOT_PIN_STATE, (json.dumps(asdict(record), indent=2) + "\n").encode())
    return record


def unpin(host: Host) -> PinRecord | None:
    """Undo fwman's pin (restoring the previous default) and return what was undone, or None if nothing was."""
    record = read_pin(host)
    if record is None:
        return None
    if record.method == "proxmox":
        _run_tool(host, ["proxmox-boot-tool", "kernel", "unpin"])
        if record.previous.get("pin"):
            _run_tool(host, ["proxmox-boot-tool", "kernel", "pin", record.previous["pin"]])
    elif record.method in ("grub-saved", "grub-next"):
        env_file = _grubenv_local(host)
        if record.method == "grub-saved":
            if record.previous.get("saved_entry"):
                _run_tool(host, ["grub-set-default", *_grub_tool_args(host), record.previous["saved_entry"]])
            else:
                _run_tool(host, ["grub-editenv", env_file, "unset", "saved_entry"])
        _run_tool(host, ["grub-editenv", env_file, "unset", "next_entry"])
    elif record.method == "systemd-boot":
        directory = _loader_dir(host)
        if directory is not None:
            conf_path = f"{directory}/loader.conf"
            lines = [ln for ln in host.read_text(conf_path).splitlines() if ln.split(None, 1)[:1] != ["default"]]
            if record.previous.get("default"):
                lines.insert(0, f"default {record.previous['default']}")
            host.write_bytes(conf_path, ("\n".join(lines) + "\n").encode())
    host.unlink(paths.BOOT_PIN_STATE)
    host.unlink(paths.MOTD_FILE)
    return record


def announce(host: Host, lines: list[str]) -> None:
    """Say ``lines`` where an owner will see them: the message of the day and the journal (``logger``)."""
    text = "".join(f"fwman: {line}\n" for line in lines)
    host.write_bytes(paths.MOTD_FILE, text.encode())
    if host.which("logger"):
        for line in lines:
            host.run(["logger", "-t", "fwman", "-p", "user.warning", line], timeout=10)


@dataclass
class BootCheck:
    """The outcome of :func:`ensure_safe_boot`: the default kernel, its safety, and any pin made or kept."""

    default: BootDefault
    safety: Safety | None
    pinned: PinRecord | None = None
    released: PinRecord | None = None
    problem: str | None = None


def ensure_safe_boot(host: Host, report: Report = _nothing, hash_files: bool = True) -> BootCheck:
    """Release a pin whose reason is gone, then pin the newest safe kernel if the next boot is not safe.

    Every action is reported loudly (``report``, the motd and the journal). Never raises for a pin that
    cannot be made: the problem is reported and returned (a kernel install must not fail over it).
    ``hash_files=False`` checks sizes and depmod's resolution instead of hashing (the boot-time path).
    """
    check = BootCheck(default_boot_kernel(host), None)
    current = read_pin(host)
    if current is not None and kernel_safety(host, current.avoided, hash_files).safe:
        try:
            check.released = unpin(host)
            report(f"{current.avoided} now has working patched modules: boot pin to {current.kernel} released")
            if host.which("logger"):
                host.run(["logger", "-t", "fwman", f"boot pin released: {current.avoided} is safe"], timeout=10)
        except FwmanError as e:
            report(f"could not release the boot pin: {e.message}")
        check.default = default_boot_kernel(host)
    kver = check.default.kver
    if kver is None:
        return check
    check.safety = kernel_safety(host, kver, hash_files)
    if check.safety.safe:
        return check
    candidates = [k for k in reversed(installed_kernels(host)) if k != kver and kernel_safety(host, k, hash_files).safe]
    if not candidates:
        check.problem = f"the next boot ({kver}) has no working patched modules and no other kernel has them"
        report(f"WARNING: {check.problem}: {check.safety.reason}")
        return check
    safe = candidates[0]
    reason = f"{kver}: {check.safety.reason}"
    try:
        record = pin(host, safe, kver, reason)
    except FwmanError as e:
        check.problem = f"could not pin {safe}: {e.message}"
        report(f"WARNING: the next boot ({kver}) has no working patched modules, and {check.problem}")
        announce(host, [f"the next boot ({kver}) has NO working patched NVIDIA modules: {reason}", check.problem])
        return check
    check.pinned = record
    lines = [
        f"kernel {kver} has NO working patched NVIDIA modules ({check.safety.reason})",
        f"boot default pinned to {safe} ({record.method}); see `fwman modules status`, undo: `fwman modules unpin`",
    ]
    if record.warning:
        lines.append(record.warning)
    for line in lines:
        report(f"WARNING: {line}")
    announce(host, lines)
    check.default = default_boot_kernel(host)
    check.safety = kernel_safety(host, check.default.kver) if check.default.kver else None
    return check
