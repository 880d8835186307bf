"""Never boot a kernel without working patched modules: pinning a safe kernel, and releasing the pin.

Whether a kernel is *safe to boot* is :func:`fwman.driver.boot.safety.kernel_safety`. When the kernel the
machine would boot next is not safe (its build failed, its headers never came), fwman pins the newest safe
kernel:

- Proxmox (``proxmox-boot-tool`` present): ``proxmox-boot-tool kernel pin KVER``; undone with ``kernel unpin``;
  either followed by ``proxmox-boot-tool refresh`` when ESPs are configured (else the ESPs change only at the
  next refresh).
- GRUB: ``grub-set-default`` (persistent; effective with ``GRUB_DEFAULT=saved``, which grub.cfg shows as
  ``set default="${saved_entry}"``); otherwise ``grub-reboot`` (``next_entry``, the next boot only: the
  boot-time catch-up pins again at every boot until the new kernel has working modules).
- systemd-boot: the ``default`` line of ``loader/loader.conf``.

Which kernel boots next is read by :mod:`fwman.driver.boot.loaders`. The pin and its release are actions
(:class:`PinBoot`, :class:`UnpinBoot`): the hook, the boot service and ``fwman modules build`` re-run them and
report a change only when one was made. What was done, and what to restore, is recorded in
``/var/lib/fwman/boot-pin.json``; a message of the day (``/etc/motd.d/fwman``) and a journal line
(``logger -t fwman``) say it loudly.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from fwman.core import names, paths
from fwman.core.errors import FwmanError, MissingError, ParseError
from fwman.core.jsonout import OMIT
from fwman.core.jsontext import parse_json
from fwman.driver.boot.loaders import (
    BootDefault,
    default_boot_kernel,
    detect_bootloader,
    grub_entry_for,
    grub_state,
    loader_default,
    loader_dir,
    loader_entries,
)
from fwman.driver.boot.safety import Safety, kernel_safety
from fwman.driver.build.manifest import failed_path, now_iso, pending_path, read_marker, sha256_hex
from fwman.driver.build.toolchain import package_of
from fwman.driver.kernels import installed_kernels
from fwman.driver.localfs import local_dir, root_prefix
from fwman.host.actions import Tell, apply_all, silent
from fwman.host.base import Host, is_this_machine


# -- pinning -------------------------------------------------------------------------------------------------
@dataclass
class PinRecord:
    """What fwman pinned, why, and what to restore (the pin file holds every field; the ``pin`` of
    ``fwman.modules-status/1`` all but ``previous`` and ``warning``)."""

    kernel: str  # the safe kernel the box is pinned to
    avoided: str  # the kernel it must not boot
    reason: str
    method: str  # "proxmox" | "grub-saved" | "grub-next" | "systemd-boot"
    at: str = field(default_factory=now_iso)
    previous: dict[str, str] = field(default_factory=dict, metadata=OMIT)
    warning: str | None = field(default=None, metadata=OMIT)


def read_pin(host: Host) -> PinRecord | None:
    """Return the current pin record, or None when fwman pinned nothing.

    Raises ParseError (exit 4) when the record exists but cannot be read: it is the only note of what the
    boot loader's default was before fwman's pin, so "no pin" would be a guess that loses it.
    """
    if not host.exists(paths.BOOT_PIN_STATE):
        return None
    try:
        doc = parse_json(host.read_bytes(paths.BOOT_PIN_STATE), "boot pin record")
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        record = PinRecord(**doc)
        if not all(isinstance(getattr(record, f), str) for f in ("kernel", "avoided", "reason", "method")):
            raise TypeError("kernel, avoided, reason and method must be strings")
        if not all(names.is_kernel_release(getattr(record, f)) for f in ("kernel", "avoided")):
            raise TypeError("kernel and avoided must be kernel releases (as --kernel checks them)")
        if not isinstance(record.previous, dict) or not all(isinstance(v, str) for v in record.previous.values()):
            raise TypeError("'previous' must map names to strings")
        return record
    except (ValueError, TypeError, MissingError, ParseError) as e:
        why = e.detail if isinstance(e, ParseError) else str(e)
        first = (why.splitlines() or [type(e).__name__])[0][:120]
        raise ParseError(
            "boot pin record",
            paths.BOOT_PIN_STATE,
            f"{first}; it holds the boot default fwman replaced: check the loader's default by hand "
            "(`fwman modules check-boot`), then repair or remove the file",
        ) from e


def _run_tool(host: Host, argv: list[str]) -> None:
    result = host.run(argv, timeout=300)
    if result.missing:
        raise MissingError(f"{argv[0]} not found")
    if not result.ok:
        raise FwmanError(f"{' '.join(argv)} failed: {(result.stderr or result.stdout).strip()}")


def _proxmox_refresh(host: Host) -> None:
    """Write a pin change to the ESPs proxmox-boot-tool keeps in sync (none: ``kernel pin`` ran update-grub).

    With ESPs configured, ``kernel pin`` and ``kernel unpin`` only write ``/etc/kernel/proxmox-boot-pin`` and,
    without a terminal, say "Use the 'refresh' command to update the ESPs": the loader entries change only at
    the next ``refresh``. Run from the final boot check, after ``zz-proxmox-boot`` has refreshed, nothing would
    apply the pin before the reboot.
    """
    if host.exists(paths.PVE_BOOT_UUIDS):
        _run_tool(host, ["proxmox-boot-tool", "refresh"])


def _grub_tool_args(host: Host) -> list[str]:
    prefix = root_prefix(host)
    return [f"--boot-directory={prefix}/boot"] if prefix is not None else []


def _with_default(text: str, value: str | None) -> str:
    """Return ``loader.conf`` text whose ``default`` is ``value`` (no ``default`` line when None).

    The first ``default`` line is replaced where it stands and any later one dropped, so the owner's order and
    comments survive; with no such line, the new one goes first.
    """
    out: list[str] = []
    placed = value is None
    for line in text.splitlines():
        if line.split(None, 1)[:1] == ["default"]:
            if not placed:
                out.append(f"default {value}")
                placed = True
            continue
        out.append(line)
    if not placed:
        out.insert(0, f"default {value}")
    return "\n".join(out) + "\n"


def pin(host: Host, safe: str, avoided: str, reason: str) -> PinRecord:
    """Make ``host`` boot ``safe`` instead of ``avoided`` and record it. Raises FwmanError when it cannot."""
    loader = detect_bootloader(host)
    warning = None
    if loader == "proxmox":
        if root_prefix(host) is not None:
            raise FwmanError("proxmox-boot-tool can only pin the running system, not a temp root")
        previous = {"pin": host.read_text(paths.PVE_BOOT_PIN).strip()} if host.exists(paths.PVE_BOOT_PIN) else {}
        _run_tool(host, ["proxmox-boot-tool", "kernel", "pin", safe])
        _proxmox_refresh(host)
        method = "proxmox"
    elif loader == "grub":
        menu, env = grub_state(host)
        if menu is None:
            raise MissingError(f"{paths.GRUB_CFG} not found: cannot tell GRUB which entry boots {safe}")
        entry = grub_entry_for(menu, safe)
        if entry is None:
            raise FwmanError(
                f"{paths.GRUB_CFG} has no entry for {safe}", hint="run update-grub, then fwman modules catchup"
            )
        previous = {k: env[k] for k in ("saved_entry", "next_entry") if k in env}
        method = "grub-saved" if menu.default == "${saved_entry}" else "grub-next"
        _run_tool(
            host, ["grub-set-default" if method == "grub-saved" else "grub-reboot", *_grub_tool_args(host), entry]
        )
        if method == "grub-next":
            warning = (
                f"GRUB's default is {menu.default!r}, not the saved entry: only the NEXT boot is pinned "
                "(fwman pins again at every boot); set GRUB_DEFAULT=saved in /etc/default/grub and run "
                "update-grub for a lasting pin"
            )
    elif loader == "systemd-boot":
        directory = loader_dir(host)
        assert directory is not None
        entries = loader_entries(host, directory)
        entry_id = next((e for e, k in sorted(entries.items()) if k == safe), None)
        if entry_id is None:
            raise FwmanError(f"no systemd-boot entry boots {safe} (in {directory}/entries)")
        conf_path = f"{directory}/loader.conf"
        text = host.read_text(conf_path)
        old = loader_default(text)
        written = _with_default(text, f"{entry_id}.conf")
        host.write_bytes(conf_path, written.encode())
        # the owner's whole file, so unpin gives it back byte for byte (spacing, a second default line, the
        # last newline) unless it was edited since: then only the default line is put back
        previous = {"default": old} if old else {}
        previous |= {"loader.conf": text, "written_sha256": sha256_hex(written.encode())}
        method = "systemd-boot"
    else:
        raise FwmanError(
            "boot loader not recognised (no proxmox-boot-tool, GRUB or systemd-boot): cannot pin a kernel",
            hint=f"choose {safe} in the boot menu by hand, or remove {avoided}",
        )
    record = PinRecord(safe, avoided, reason, method, previous=previous, warning=warning)
    earlier = read_pin(host)
    if earlier is not None:  # pinned again: what to restore in the end is what was there before fwman's first pin
        written_now = record.previous.get("written_sha256")
        record.previous = dict(earlier.previous)
        if written_now is not None:
            record.previous["written_sha256"] = written_now
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
        _proxmox_refresh(host)
    elif record.method in ("grub-saved", "grub-next"):
        env_file = local_dir(host, paths.GRUBENV, "change")
        if record.method == "grub-saved":
            if record.previous.get("saved_entry"):
                _run_tool(host, ["grub-set-default", *_grub_tool_args(host), record.previous["saved_entry"]])
            else:
                _run_tool(host, ["grub-editenv", env_file, "unset", "saved_entry"])
        _run_tool(host, ["grub-editenv", env_file, "unset", "next_entry"])
    elif record.method == "systemd-boot":
        directory = loader_dir(host)
        if directory is not None:
            conf_path = f"{directory}/loader.conf"
            text = host.read_text(conf_path)
            original = record.previous.get("loader.conf")
            if original is not None and sha256_hex(text.encode()) == record.previous.get("written_sha256"):
                host.write_bytes(conf_path, original.encode())  # untouched since the pin: the owner's file
            else:
                host.write_bytes(conf_path, _with_default(text, record.previous.get("default")).encode())
    host.unlink(paths.BOOT_PIN_STATE)
    host.unlink(paths.MOTD_FILE)
    return record


@dataclass
class PinBoot:
    """Make the host boot ``safe`` instead of ``avoided`` (an action, see fwman.host.actions)."""

    safe: str
    avoided: str
    reason: str
    record: PinRecord | None = None  # what :func:`pin` recorded, once applied

    def describe(self) -> str:
        """Return the pin to make."""
        return f"pin the boot default to {self.safe} instead of {self.avoided}"

    def is_needed(self, host: Host) -> bool:
        """Return True unless fwman's pin names this pair and the loader still boots ``safe`` next.

        A one-shot GRUB pin (``next_entry``) is consumed by the boot: it is needed again afterwards.
        """
        current = read_pin(host)
        if current is None or (current.kernel, current.avoided) != (self.safe, self.avoided):
            return True
        return default_boot_kernel(host).kver != self.safe

    def apply(self, host: Host) -> None:
        """Pin (see :func:`pin` for what it raises)."""
        self.record = pin(host, self.safe, self.avoided, self.reason)


@dataclass
class UnpinBoot:
    """Undo fwman's boot pin, restoring the previous default (an action, see fwman.host.actions)."""

    record: PinRecord | None = None  # what was undone, once applied

    def describe(self) -> str:
        """Return what is undone."""
        return "undo fwman's boot pin (restore the previous default)"

    def is_needed(self, host: Host) -> bool:
        """Return True when fwman has a pin in place."""
        return read_pin(host) is not None

    def apply(self, host: Host) -> None:
        """Unpin (see :func:`unpin` for what it raises)."""
        self.record = unpin(host)


#: what starts every line :func:`announce` writes to the message of the day
MOTD_PREFIX = "fwman: "


def announce(host: Host, lines: list[str]) -> None:
    """Say ``lines`` where an owner will see them: the message of the day and the journal (``logger``)."""
    text = "".join(f"{MOTD_PREFIX}{line}\n" for line in lines)
    host.write_bytes(paths.MOTD_FILE, text.encode())
    for line in lines:
        _journal(host, line, warning=True)


@dataclass
class ClearBootWarning:
    """Remove fwman's message of the day once the next boot is safe again (an action, see fwman.host.actions).

    :func:`announce` writes it when the next boot is unsafe; a pin's release removes it, but the boot can also
    become safe without a pin to release (the modules get built for that kernel later, a pin that could not be
    made, the owner fixed the loader by hand): then the warning is stale and would mislead at every login.
    Only fwman's own file is removed, and only while it holds nothing but fwman's lines: an owner's text
    written into it is left alone.
    """

    kver: str  # the kernel that boots next, now safe

    def describe(self) -> str:
        """Return what is removed and why."""
        return f"remove the stale boot warning {paths.MOTD_FILE} (the next boot, {self.kver}, is safe)"

    def is_needed(self, host: Host) -> bool:
        """Return True when the file is there and every line of it is one :func:`announce` wrote."""
        if not host.exists(paths.MOTD_FILE):
            return False
        try:
            lines = host.read_bytes(paths.MOTD_FILE).decode("utf-8", "replace").splitlines()
        except MissingError:
            return False
        return all(line.startswith(MOTD_PREFIX) for line in lines if line.strip())

    def apply(self, host: Host) -> None:
        """Remove the file."""
        host.unlink(paths.MOTD_FILE)


def _journal(host: Host, line: str, warning: bool = False) -> None:
    """Log ``line`` to the journal with ``logger``, on the real root only.

    A temp root (``--root``) is another machine's tree: its messages belong to it (the motd under the root),
    not to the journal of the machine fwman runs on.
    """
    if not is_this_machine(host) or not host.which("logger"):
        return
    argv = ["logger", "-t", "fwman", *(["-p", "user.warning"] if warning else []), line]
    host.run(argv, timeout=10)


@dataclass
class BootCheck:
    """The outcome of :func:`ensure_safe_boot`: the default kernel, its safety, and any pin made or kept."""

    default: BootDefault
    safety: Safety | None
    pinned: PinRecord | None = None
    released: PinRecord | None = None
    problem: str | None = None
    #: what this check changed on the host (a pin made or released); [] when the boot was already safe
    changed: list[str] = field(default_factory=list)
    #: the command that gives the next boot working modules when nothing could be pinned ("" otherwise)
    fix: str = ""
    #: the unpinnable next boot was not reported here: apt's check at the end of its run says it, once
    deferred: bool = False


def fix_command(host: Host, kver: str) -> str:
    """Return what makes ``kver`` have working modules, from its markers: the missing tools' ``apt install``
    and the build, or the forced build once the cause is fixed. Never raises."""
    build = f"fwman modules build --kernel {kver}"
    pending = read_marker(host, pending_path(kver))
    if pending is not None and (pending.detail or {}).get("install"):
        return f"{pending.detail['install']}, then {build}"
    failed = read_marker(host, failed_path(kver))
    tool = (failed.detail or {}).get("missing_tool") if failed is not None else None
    if tool:
        return f"apt install {package_of(tool) or tool}, then {build}"
    if failed is not None:
        return f"fix the cause (`fwman modules status`), then {build} --force"
    return f"`fwman modules status`, then {build}"


def _next_boot(host: Host, gone: frozenset[str]) -> BootDefault:
    """Return the kernel ``host`` boots next, leaving out the kernels in ``gone`` (being removed).

    A removal hook runs before the loader's own hook (``zz-update-grub``, ``90-loaderentry``) drops the entry:
    a default that names a removed kernel is the newest remaining one, as the loader will have it.
    """
    default = default_boot_kernel(host)
    if default.kver is None or default.kver not in gone:
        return default
    remaining = [k for k in installed_kernels(host) if k not in gone]
    newest = remaining[-1] if remaining else None
    return BootDefault(newest, default.loader, f"{default.how} names {default.kver}, being removed: the newest other")


def boot_settled(host: Host, hash_files: bool = True) -> bool:
    """Return True when :func:`ensure_safe_boot` would change and report nothing now: no pin whose reason is gone,
    and a next boot that is safe with no stale warning left (the lifecycle's plan lists the check only
    otherwise). Never raises."""
    try:
        current = read_pin(host)
    except ParseError:
        return True  # the check changes nothing then (it says so): a person has to look
    if current is not None and (
        current.avoided not in installed_kernels(host) or kernel_safety(host, current.avoided, hash_files).safe
    ):
        return False
    kver = _next_boot(host, frozenset()).kver
    if kver is None:
        return True
    if not kernel_safety(host, kver, hash_files).safe:
        return False
    return current is not None or not ClearBootWarning(kver).is_needed(host)


def ensure_safe_boot(
    host: Host, tell: Tell = silent, hash_files: bool = True, gone: frozenset[str] = frozenset(), defer: bool = False
) -> BootCheck:
    """Release a pin whose reason is gone, then pin the newest safe kernel if the next boot is not safe.

    A pin's reason is gone when the kernel it avoids has working modules or is no longer installed (or is in
    ``gone``: the kernels a removal hook is dropping, which the loader still lists). Every action is reported
    loudly (``tell``, the motd and the journal). Never raises for a pin that cannot be made: the problem is
    reported and returned (a kernel install must not fail over it). ``hash_files=False`` checks sizes and
    depmod's resolution instead of hashing (the boot-time path). ``defer``: a next boot that is not safe and
    that no pin can make safe is not reported (``deferred`` set): a kernel hook inside an apt run, whose
    Post-Invoke check says it once, at the end (issue 39, row 7: the same WARNING three or four times).
    """
    check = BootCheck(_next_boot(host, gone), None)
    try:
        current = read_pin(host)
    except ParseError as e:  # what the pin replaced is unknown: change nothing, say so loudly
        check.problem = e.message
        tell(f"WARNING: {e.message}")
        return check
    if current is not None:
        removed = current.avoided in gone or current.avoided not in installed_kernels(host)
        why = "is no longer installed" if removed else "now has working patched modules"
        if removed or kernel_safety(host, current.avoided, hash_files).safe:
            try:
                release = UnpinBoot()
                check.changed += apply_all(host, [release])
                check.released = release.record
                tell(f"{current.avoided} {why}: boot pin to {current.kernel} released")
                _journal(host, f"boot pin released: {current.avoided} {why}")
            except FwmanError as e:
                tell(f"could not release the boot pin: {e.message}")
            check.default = _next_boot(host, gone)
    kver = check.default.kver
    if kver is None:
        return check
    check.safety = kernel_safety(host, kver, hash_files)
    if check.safety.safe:
        # safe with no pin of fwman's in place (none, or just released): a warning left from an unsafe boot
        # that got fixed some other way is stale; with a pin still in place the warning still tells about it
        if current is None or check.released is not None:
            cleared = apply_all(host, [ClearBootWarning(kver)])
            check.changed += cleared
            for line in cleared:
                tell(line)
        return check
    candidates = [
        k
        for k in reversed(installed_kernels(host))
        if k != kver and k not in gone and kernel_safety(host, k, hash_files).safe
    ]
    if not candidates:
        check.problem = f"the next boot ({kver}) has no working patched modules and no other kernel has them"
        check.fix = fix_command(host, kver)
        check.deferred = defer
        if not defer:
            tell(f"WARNING: {check.problem}: {check.safety.reason}; fix: {check.fix}")
        return check
    safe = candidates[0]
    reason = f"{kver}: {check.safety.reason}"
    # a second run finds the pin in effect (the next boot is then the safe kernel, returned above): no change
    action = PinBoot(safe, kver, reason)
    try:
        check.changed += apply_all(host, [action])
    except FwmanError as e:
        check.problem = f"could not pin {safe}: {e.message}"
        tell(f"WARNING: the next boot ({kver}) has no working patched modules, and {check.problem}")
        announce(host, [f"the next boot ({kver}) has NO working patched NVIDIA modules: {reason}", check.problem])
        return check
    record = action.record
    assert record is not None
    check.pinned = record
    lines = [
        f"kernel {kver} has NO working patched NVIDIA modules ({check.safety.reason})",
        f"boot default pinned to {safe} ({record.method}); see `fwman modules status`, undo: `fwman modules unpin`",
    ]
    if record.warning:
        lines.append(record.warning)
    for line in lines:
        tell(f"WARNING: {line}")
    announce(host, lines)
    check.default = default_boot_kernel(host)
    check.safety = kernel_safety(host, check.default.kver) if check.default.kver else None
    return check
