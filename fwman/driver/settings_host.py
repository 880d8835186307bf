"""The host side of the module options: fwman's modprobe file, its initramfs, and what is in effect.

:func:`inspect_settings` reads (the GPUs' generations, the recommended options and their sources, fwman's file,
the loaded module's ``/proc/driver/nvidia/params``, whether the running kernel's initramfs carries the file,
the installed kernels that have ``nova_core``); :func:`settings_actions` is the list of actions that make the host
match (write or remove fwman's file, then regenerate each initramfs that must carry it: the running kernel's, and
that of every kernel with nova_core, whose blacklist must be in its image). Nothing else in ``/etc/modprobe.d``
is touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.core.jsonout import encode, fields_of
from fwman.driver import nova_core
from fwman.driver import settings as nv
from fwman.driver.boot import initramfs
from fwman.driver.kernels import installed_kernels
from fwman.gpu.inventory import scan_cards
from fwman.host.actions import Action, RemoveFile, RunCommand, WriteFile
from fwman.host.base import Host

CARRIED = "carries fwman's file as written"
NOT_CARRIED = "does not carry fwman's file as written (regenerate it)"
NO_IMAGE = "no initramfs image found"


@dataclass
class SettingsReport:
    """What ``fwman driver settings`` found on a host."""

    kernel: str | None
    generations: dict[str, list[str]] = field(default_factory=dict)  # generation -> bus ids
    settings: list[nv.Setting] = field(default_factory=list)
    wanted: bytes = b""  # fwman's file as it should be (empty: no file)
    current: bytes | None = None  # fwman's file as it is (None: absent)
    params: dict[str, str] | None = None  # the loaded module's options (None: not loaded)
    params_error: str | None = None
    #: fwman's file could not be read (a recording without it): its state is unknown, not absent
    file_error: str | None = None
    initramfs: str = NO_IMAGE
    image: str | None = None
    #: the installed kernels that have nova_core (fwman's file blacklists it while there is one)
    nova_kernels: list[nova_core.NovaKernel] = field(default_factory=list)
    #: the initramfs images of the nova_core kernels (kernel -> image), regenerated to carry the blacklist
    nova_images: dict[str, str] = field(default_factory=dict)

    @property
    def blacklist(self) -> list[nv.Blacklist]:
        """Return the modules fwman's file blacklists: nova_core while an installed kernel has it."""
        if not self.nova_kernels:
            return []
        kernels = ", ".join(k.kver for k in self.nova_kernels)
        why = f"it takes the GPU before nvidia.ko can probe it (kernels with it: {kernels})"
        return [nv.Blacklist(nova_core.MODULE, why, nova_core.SOURCE)]

    def states(self) -> list[tuple[nv.Setting, str, str | None]]:
        """Return (setting, state, loaded value) for each recommended setting."""
        return [(s, *nv.state(s, self.params)) for s in self.settings]

    @property
    def file_ok(self) -> bool:
        """Return True when fwman's file is as it should be (absent when nothing is recommended)."""
        return self.current == (self.wanted or None)

    def silent(self) -> dict[str, str]:
        """Return the sources' silence per generation found here that has no recommended option."""
        return {g: nv.SILENT[g] for g in self.generations if g in nv.SILENT}

    def to_json(self) -> dict[str, Any]:
        """Return the JSON payload (without ``changed``, which the command adds)."""
        return {
            "kernel": self.kernel,
            "file": paths.MODPROBE_OPTIONS_FILE,
            "file_ok": self.file_ok,
            "generations": self.generations,
            "settings": [
                {"option": s.option, **fields_of(s), "state": st, "loaded": loaded} for s, st, loaded in self.states()
            ],
            "sources_silent": self.silent(),
            "params": paths.PROC_DRIVER_PARAMS,
            "params_error": self.params_error,
            "file_error": self.file_error,
            "initramfs": {"image": self.image, "state": self.initramfs},
            "blacklist": [fields_of(b) for b in self.blacklist],
            "nova_core_kernels": encode(self.nova_kernels),
        }


def _read(host: Host, path: str) -> bytes | None:
    """Return the file's bytes, or None when it is absent. Raises NotRecordedError on a recording without it: an
    unknown is never read as absent."""
    try:
        return host.read_bytes(path) if host.exists(path) else None
    except MissingError:
        return None


#: what a report says of a file a recording lacks
NOT_RECORDED = "not recorded in this recording (unknown: fwman does not guess)"


def _carries(host: Host, image: str, wanted: bytes) -> bool:
    """Return True when ``image`` holds fwman's file with exactly ``wanted`` (absent when ``wanted`` is empty)."""
    members = initramfs.read_archives(host.read_bytes(image), initramfs.host_decompressor(host))
    name = paths.MODPROBE_OPTIONS_FILE.lstrip("/")
    found = next((m.data for m in members if m.name == name), None)
    return found == (wanted or None)


def inspect_settings(host: Host, *, rebar: bool = False) -> SettingsReport:
    """Return what the host has and needs. Never raises for what it reads; the errors are in the report."""
    try:
        raw = _read(host, paths.KERNEL_RELEASE)
        unknown_kernel = False
    except NotRecordedError:
        raw, unknown_kernel = None, True
    report = SettingsReport(kernel=raw.decode(errors="replace").strip() if raw else None)
    if unknown_kernel:
        report.initramfs = f"the running kernel is {NOT_RECORDED}"
    try:
        cards = scan_cards(host, use_smi=False)
    except FwmanError:
        cards = []
    for card in cards:
        report.generations.setdefault(nv.generation(card.name), []).append(card.bus_id)
    report.settings = nv.recommended(set(report.generations), rebar=rebar)
    try:
        kernels = installed_kernels(host)
    except FwmanError:
        kernels = []
    report.nova_kernels = [k for k in (nova_core.inspect_kernel(host, kver) for kver in kernels) if k.present]
    images = {k.kver: initramfs.image_path(host, k.kver) for k in report.nova_kernels}
    report.nova_images = {kver: image for kver, image in images.items() if image}
    blacklist = report.blacklist
    report.wanted = nv.render(report.settings, blacklist) if report.settings or blacklist else b""
    try:
        report.current = _read(host, paths.MODPROBE_OPTIONS_FILE)
    except NotRecordedError:
        report.file_error = NOT_RECORDED
    try:
        params = _read(host, paths.PROC_DRIVER_PARAMS)
    except NotRecordedError:
        params, report.params_error = None, NOT_RECORDED
    if params is not None:
        try:
            report.params = nv.parse_params(params.decode(errors="replace"))
        except ParseError as e:
            report.params_error = e.message
    if report.kernel:
        report.image = initramfs.image_path(host, report.kernel)
        if report.image:
            try:
                report.initramfs = CARRIED if _carries(host, report.image, report.current or b"") else NOT_CARRIED
            except (FwmanError, OSError) as e:
                report.initramfs = f"unreadable: {getattr(e, 'message', e)}"
    return report


def settings_actions(host: Host, report: SettingsReport) -> list[Action]:
    """Return the actions that make fwman's file and the running kernel's initramfs match ``report``'s wish.

    The regeneration is needed when the file changes or the image does not carry it as it will be.
    """
    options = paths.MODPROBE_OPTIONS_FILE
    actions: list[Action] = [WriteFile(options, report.wanted) if report.wanted else RemoveFile(options)]
    images: dict[str, tuple[str, str]] = {}  # kernel -> (image, why it must carry the file)
    if report.kernel and report.image:
        images[report.kernel] = (report.image, f"the initramfs of {report.kernel} must carry the options")
    for kver, image in report.nova_images.items():  # the running kernel's own reason stays first
        images.setdefault(kver, (image, f"the initramfs of {kver} must carry the nova_core blacklist"))
    gen = initramfs.generator(host) if images else ""
    for kernel, (image, why) in images.items():
        actions.append(RunCommand(initramfs.regenerate_argv(gen, kernel), _needs(image, report.wanted), reason=why))
    return actions


def _needs(image: str, wanted: bytes) -> Callable[[Host], bool]:
    """Return the check of one regeneration: needed while ``image`` does not carry fwman's file as ``wanted``."""

    def needed(h: Host) -> bool:
        try:
            return not _carries(h, image, wanted)
        except (FwmanError, OSError):
            return True

    return needed
