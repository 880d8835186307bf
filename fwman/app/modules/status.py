"""``fwman modules status``: per installed kernel, headers, fwman's modules, DKMS conflicts, safe to boot. Typed
arguments in (a Host), a result model out; no click. The CLI renders :class:`ModulesStatus` as a table or, through its
fields (fwman.core.jsonout), as the ``fwman.modules-status/1`` document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwman.app.modules.preflight import last_preflight
from fwman.app.text import Out, Result, Span, say, table
from fwman.core.errors import FwmanError, ParseError
from fwman.core.jsonout import OMIT, meta
from fwman.driver import dkms, nova_core
from fwman.driver.boot.initramfs import InitramfsState
from fwman.driver.boot.initramfs import inspect as inspect_initramfs
from fwman.driver.boot.loaders import BootDefault, default_boot_kernel
from fwman.driver.boot.pin import PinRecord, read_pin
from fwman.driver.boot.safety import kernel_safety
from fwman.driver.build.manifest import failed_path, load_manifest, pending_path, read_marker
from fwman.driver.build.source import SourceSpec, load_source_spec
from fwman.driver.headers import advise_host
from fwman.driver.kernels import headers_present, installed_kernels
from fwman.driver.kmod.secureboot import SecureBootState
from fwman.driver.kmod.secureboot import read_state as read_secure_boot
from fwman.driver.nova_core import NovaRunning
from fwman.driver.settings_host import SettingsReport, inspect_settings
from fwman.driver.userspace_hold import HoldStatus
from fwman.driver.userspace_hold import read_status as hold_status
from fwman.gpu.inventory import nvidia_functions
from fwman.host.base import Host


def _initramfs_json(state: InitramfsState) -> dict[str, object] | None:
    """Return the initramfs as a kernel's ``initramfs`` shows it (None when the kernel has no image)."""
    return state.to_dict() if state.path else None


def _source_json(spec: SourceSpec) -> dict[str, str | None]:
    """Return the configured module source as ``{"fork", "branch", "source"}``."""
    return {"fork": spec.fork, "branch": spec.branch, "source": spec.source_dir}


@dataclass
class KernelStatus:
    """One installed kernel as ``fwman modules status`` shows it (its fields are a ``kernels[]`` entry of
    ``fwman.modules-status/1``)."""

    kernel: str
    headers: bool
    modules: str  # "ok" | "installed, not verified" | "none"
    branch: str | None
    commit: str | None
    built_at: str | None
    dkms_conflict: list[str]
    pending: str | None
    failed: dict[str, str | None] | None
    safe_to_boot: bool
    why: str
    next_boot: bool
    headers_package: str | None = None  # the exact package for this kernel and distribution
    initramfs: InitramfsState | None = field(default=None, metadata=meta(via=_initramfs_json))
    #: the patches of /etc/fwman/patches.d the installed modules were built with ({name, sha256, kernels})
    patches: list[dict[str, str | None]] = field(default_factory=list)
    #: a donor-patch fork's build ({tag, sha256, patch}: the manifest's), and the fork it was built from
    donor_patch: dict[str, str] | None = None
    fork: str | None = field(default=None, metadata=OMIT)
    #: the kernel's own nova_core: {config, module, built_in, blacklisted_by, problem}; None when it has none
    nova_core: dict[str, Any] | None = None
    #: the owner's P2P fork, installed by DKMS for this kernel too ("M/V: state"; fwman's copy is what loads)
    dkms_fork: list[str] = field(default_factory=list)


@dataclass
class ModulesStatus(Result):
    """Every kernel's row, the next boot, fwman's boot pin, the configured source, a failed ``dkms status``; its
    fields are the payload of ``fwman.modules-status/1``."""

    kernels: list[KernelStatus]
    next_boot: BootDefault
    pin: PinRecord | None = None
    source: SourceSpec | None = field(default=None, metadata=meta(via=_source_json))
    dkms_error: str | None = None
    secure_boot: SecureBootState | None = field(default=None, metadata=meta(via=SecureBootState.to_dict))
    userspace_hold: HoldStatus | None = field(default=None, metadata=meta(via=HoldStatus.to_dict))
    #: the NVreg_* options P2P depends on (`fwman driver settings`)
    settings: SettingsReport | None = field(default=None, metadata=meta(key="driver_settings"))
    #: the last `fwman modules preflight` (app.preflight.last_preflight), None when none ran
    preflight: dict[str, Any] | None = None
    #: nova_core on the running system (loaded, the NVIDIA functions bound to it)
    nova_running: NovaRunning | None = field(default=None, metadata=meta(key="nova_core"))

    def preflight_lines(self) -> list[str]:
        """Return the lines of the last pre-flight for the text status: one per kernel, and fwman's holds."""
        doc = self.preflight
        if doc is None:
            return []
        if doc.get("error"):
            return [f"pre-flight: record unreadable: {doc['error']}"]
        held = set(doc.get("held_kernels") or [])
        lines = [
            f"pre-flight {doc.get('at')}: {k['kernel']}: {k['verdict']}"
            + (" (HELD back by fwman)" if k["kernel"] in held else "")
            for k in doc.get("kernels") or []
        ]
        shown = {k["kernel"] for k in doc.get("kernels") or []}
        lines += [
            f"pre-flight: {kver} HELD back by fwman (`fwman modules preflight --release`)"
            for kver in sorted(held - shown)
        ]
        if not lines and doc.get("at"):
            lines.append(f"pre-flight {doc.get('at')}: apt offered no new kernel")
        return lines

    def text(self, verbose: int = 0) -> Out:
        """Return the table of kernels, the next boot, the pin and every note a person needs to act on."""
        rows, default, pin = self.kernels, self.next_boot, self.pin
        out: Out = [] if rows else [say("no kernels under /lib/modules")]
        out.append(table(["KERNEL", "HEADERS", "MODULES", "DKMS", "STATE", "SAFE TO BOOT", "WHY"], [
            [("> " if r.next_boot else "  ") + r.kernel, "yes" if r.headers else "no", r.modules,
             "CONFLICT" if r.dkms_conflict else "-", "failed" if r.failed else ("pending" if r.pending else "-"),
             Span("yes", "green") if r.safe_to_boot else Span("NO", "bad"), r.why]
            for r in rows
        ]))  # fmt: skip
        out += [say(), say(f"> next boot: {default.kver or 'unknown'} ({default.loader}: {default.how})")]
        if pin is not None:
            why = f"PINNED by fwman to {pin.kernel} ({pin.method}) because {pin.reason}; undo: fwman modules unpin"
            out.append(say(why, "loud"))
        out += [say(f"DKMS: {r.kernel}: {c} (run `fwman dkms block`)", "yellow") for r in rows for c in r.dkms_conflict]
        out += [say(f"DKMS: {r.kernel}: {c} is the P2P fork, built by DKMS too: fwman's copy loads (`fwman dkms "
                    "status`, docs/dkms.md)") for r in rows for c in r.dkms_fork]  # fmt: skip
        for r in rows:
            for patch in r.patches:  # the patches (patches.d, fwman's compat) the installed modules were built with
                digest = str(patch.get("sha256"))[:12]
                if patch.get("declaration"):  # fwman's own: applied because the headers declare it
                    out.append(say(f"compat patch for {r.kernel}: {patch.get('name')} (shipped with fwman: "
                                   f"{patch.get('declaration')}; sha256 {digest})"))  # fmt: skip
                    continue
                which = f"kernels {patch.get('kernels')}" if patch.get("kernels") else "every kernel"
                out.append(say(f"patch for {r.kernel}: {patch.get('name')} ({which}, sha256 {digest})"))
        for r in rows:
            if r.donor_patch is not None:  # a donor-patch fork: NVIDIA's tag and the pinned patch, like a commit
                donor = r.donor_patch
                out.append(say(f"source of {r.kernel}: fork {r.fork or '?'}: upstream tag {donor.get('tag', '?')} "
                               f"({(r.commit or '?')[:12]}) + patch {donor.get('sha256', '?')[:12]} "
                               f"({donor.get('patch', '?')})"))  # fmt: skip
        for r in rows:
            if r.nova_core is not None and r.nova_core.get("problem"):
                out.append(say(f"nova_core: {r.nova_core['problem']}", "bad"))
        running = self.nova_running
        if running is not None and running.bound:
            held = ", ".join(running.bound)
            out.append(say(f"nova_core holds {held} now: nvidia.ko cannot probe it until nova_core is blacklisted "
                           f"(`{nova_core.FIX}`) and the machine rebooted", "bad"))  # fmt: skip
        elif running is not None and running.loaded:
            out.append(say("nova_core is loaded (bound to no NVIDIA GPU)", "yellow"))
        for r in rows:
            if not r.headers and r.headers_package:
                out.append(say(f"headers for {r.kernel}: apt install {r.headers_package}"))
            if r.initramfs is not None and r.initramfs.path and (r.initramfs.problem or r.initramfs.error):
                out.append(say(f"initramfs of {r.kernel}: {r.initramfs.summary()}", "bad"))
        if self.secure_boot is not None:
            out += secure_boot_text(self.secure_boot.to_dict())
        hold = self.userspace_hold
        if hold is not None and hold.installed:
            held = "held by fwman" if hold.held else "not held (`fwman userspace hold`)"
            out.append(say(f"NVIDIA user space: {len(hold.installed)} packages, {held}"))
        out += [say(f"WARNING: {w}", "yellow") for w in (hold.warnings() if hold is not None else [])]
        out += [say(line) for line in self.preflight_lines()]  # the last `fwman modules preflight`
        for setting, state, loaded in self.settings.states() if self.settings is not None else []:
            shown = f" (loaded {loaded})" if loaded is not None and state != "in effect" else ""
            text = f"module option {setting.option}: {state}{shown}"
            out.append(say(text) if state == "in effect" else say(text + " (`fwman driver settings`)", "yellow"))
        if self.source is None:
            plan = "`fwman plan` names the fork and branch for this box, and `sudo fwman apply` builds them"
            out.append(say(f"no module source configured yet: {plan}"))
        if self.dkms_error:
            out.append(say(f"note: dkms status failed: {self.dkms_error}", err=True))
        return out


def secure_boot_text(sb: dict[str, Any]) -> Out:
    """Return the Secure Boot line of ``modules status`` (and the enrollment hint when the key is not enrolled)."""
    state = {True: "on", False: "off", None: "unknown"}[sb["enabled"]]
    text = f"Secure Boot: {state} ({sb['source']})"
    if sb["cert"]:
        text += f"; fwman's signing key: {sb['key']}"
    if not (sb["enforcing"] and sb["key"] in ("pending", "not-enrolled")):
        return [say(text)]
    steps = "  enrollment steps: `fwman modules keygen` prints them (the key stays, --force not needed)"
    return [say(text, "bad"), say(steps)]


def modules_status(host: Host) -> ModulesStatus:
    """Return the modules status of ``host``.

    A failing ``dkms status`` is not an error here: it is reported in ``dkms_error`` and the rows show no
    conflict. Raises UsageError when ``/etc/fwman/config.toml`` is invalid (the configured source is read).
    """
    default = default_boot_kernel(host)
    try:
        dkms_entries = [e for e in dkms.status(host) if dkms.is_nvidia(e)]
        dkms_error = None
    except FwmanError as e:
        dkms_entries, dkms_error = [], e.message
    kinds = dkms.sources(host, dkms_entries)
    secure_boot = read_secure_boot(host)
    blacklist = nova_core.blacklist_files(host)
    rows: list[KernelStatus] = []
    for kver in installed_kernels(host):
        safety = kernel_safety(host, kver)
        nova = nova_core.inspect_kernel(host, kver)
        try:
            manifest = load_manifest(host, kver)
        except ParseError:
            manifest = None
        failed = read_marker(host, failed_path(kver))
        pending = read_marker(host, pending_path(kver))
        rows.append(
            KernelStatus(
                kernel=kver,
                headers=headers_present(host, kver),
                modules="ok" if safety.safe else ("installed, not verified" if manifest else "none"),
                branch=manifest.branch if manifest else None,
                commit=manifest.commit if manifest else None,
                built_at=manifest.built_at if manifest else None,
                dkms_conflict=[
                    f"{e.module}/{e.version}: {e.state}"
                    for e in dkms_entries
                    if e.kernel == kver and e.installed and kinds[(e.module, e.version)].kind == dkms.STOCK
                ],
                dkms_fork=[
                    f"{e.module}/{e.version}: {e.state}"
                    for e in dkms_entries
                    if e.kernel == kver and e.installed and kinds[(e.module, e.version)].kind == dkms.FORK
                ],
                pending=pending.reason if pending else None,
                failed=None
                if failed is None
                else {"reason": failed.reason, "file": failed.detail.get("file"), "at": failed.at},
                safe_to_boot=safety.safe,
                why=safety.reason,
                next_boot=kver == default.kver,
                headers_package=advise_host(host, kver).package,
                initramfs=inspect_initramfs(host, kver),
                patches=list(manifest.patches) if manifest else [],
                donor_patch=manifest.donor_patch if manifest else None,
                fork=manifest.fork if manifest else None,
                nova_core=nova_json(nova, blacklist),
            )
        )
    hold = hold_status(host, simulate=False)
    try:
        options: SettingsReport | None = inspect_settings(host)
    except FwmanError:  # the options are a line of the status, never the reason it fails
        options = None
    return ModulesStatus(
        rows,
        default,
        read_pin(host),
        load_source_spec(host),
        dkms_error,
        secure_boot,
        hold,
        options,
        last_preflight(host),
        nova_core.read_running(host, nvidia_functions(host)),
    )


def nova_json(nova: nova_core.NovaKernel, blacklist: list[str]) -> dict[str, Any] | None:
    """Return a kernel's ``nova_core`` entry (None when it has none): what says it has it, which files blacklist
    it, and why it would take the GPU (None once it cannot)."""
    if not nova.present:
        return None
    return {
        "config": nova.config,
        "module": nova.module,
        "built_in": nova.built_in,
        "blacklisted_by": blacklist,
        "problem": nova_core.problem(nova, blacklist),
    }
