"""The NVIDIA module options P2P depends on: fwman's own ``/etc/modprobe.d`` file, and whether each is in effect.

Owners' reports (issue 27) say the P2P verdict depends on ``NVreg_*`` options fwman neither wrote nor read. This
module holds the recommended options per GPU generation, **each with the public source that names it**, renders
fwman's modprobe file (:data:`~fwman.core.paths.MODPROBE_OPTIONS_FILE`), and reads the loaded module's options
back from ``/proc/driver/nvidia/params`` ("the sysfs node reads empty even when the setting is active", so that
file is where to check: noonghunna/club-3090 PR 885).

Where a source is silent, nothing is recommended and the table says so: no key or value here is inferred.

``/proc/driver/nvidia/params`` holds one ``Name: value`` line per option, without the ``NVreg_`` prefix, strings
quoted (``EnableResizableBar: 0``, ``RegistryDwords: ""``; the real H200's file is
``fixtures/hosts/h200-1gpu/files/proc/driver/nvidia/params``). An option that the loaded module does not have
has no line at all. initramfs-tools copies every ``/etc/modprobe.d/*.conf`` into the image
(``/usr/sbin/mkinitramfs``: ``for file in /etc/modprobe.d/*.conf /lib/modprobe.d/*.conf``), so the file must be
in the initramfs to apply when the module loads from it at boot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.core import modprobeconf
from fwman.core.errors import ParseError

AMPERE = "ampere"  # RTX 3090 and its siblings
ADA = "ada"  # RTX 4090
BLACKWELL = "blackwell"  # RTX 5090, RTX PRO 6000
OTHER = "other"

#: the module whose options these are
MODULE = "nvidia"
HEADER = "# Managed by fwman (`fwman driver settings`): NVIDIA module options for P2P. Edits are replaced.\n"


@dataclass(frozen=True)
class Setting:
    """One module option: ``NVreg_<key>=<value>``, why it is recommended and who says so."""

    key: str  # without the NVreg_ prefix, as /proc/driver/nvidia/params names it
    value: str
    why: str
    source: str

    @property
    def option(self) -> str:
        """Return ``NVreg_<key>=<value>``, as a modprobe ``options`` line carries it."""
        return f"NVreg_{self.key}={self.value}"


#: the source of the Blackwell options: the fix that made 2x RTX 5090 P2P boot
CLUB_3090_FIX = "github.com/noonghunna/club-3090 issue 873, PR 875"
#: per generation: the options recommended for P2P, each with its source. An empty list means the sources name
#: none for that generation (see SILENT).
RECOMMENDED: dict[str, list[Setting]] = {
    BLACKWELL: [
        Setting(
            "RMForceStaticBar1",
            "1",
            'on 2x RTX 5090 with a full BAR1 "every vLLM boot still hung inside NCCL init" until it was set',
            CLUB_3090_FIX,
        ),
        Setting("PeerMappingOverride", "1", "set together with RMForceStaticBar1 in the same fix", CLUB_3090_FIX),
    ],
    AMPERE: [],
    ADA: [],
}

#: what the sources say (or do not) where RECOMMENDED has nothing, and the options known but not recommended
SILENT: dict[str, str] = {
    AMPERE: "no NVreg option is named for 3090 P2P over BAR1; owners cite aikitoria/open-gpu-kernel-modules' "
    "README for RMForceP2PType=1 (NVLink-bridged 3090 pairs on PCIe), whose option line was not checked here, "
    "so fwman does not write it",
    ADA: "no source names an NVreg option for 4090 P2P",
    BLACKWELL: "aikitoria/open-gpu-kernel-modules issue 25 has the original five-key line; only the two keys "
    "club-3090 PR 875 names are written here",
    OTHER: "no source names options for this GPU",
}

#: options for boards without a Resizable BAR switch in their firmware: recommended only on request
#: (``--rebar``), since on a board with ReBAR on it changes nothing the sources describe
REBAR = Setting(
    "EnableResizableBar",
    "1",
    "boards without a ReBAR switch in their firmware (with ReBarUEFI)",
    "github.com/xCuri0/ReBarUEFI issues 67, PR 388",
)

#: every option fwman recommends for some generation: the ones the P2P fingerprint records
P2P_KEYS = tuple(sorted({s.key for group in RECOMMENDED.values() for s in group} | {REBAR.key}))

_GENERATIONS = (
    (re.compile(r"RTX\s*(PRO\s*6000|50[5-9]0)", re.I), BLACKWELL),
    (re.compile(r"RTX\s*40[6-9]0", re.I), ADA),
    (re.compile(r"RTX\s*30[5-9]0", re.I), AMPERE),
)


def generation(name: str | None) -> str:
    """Return the GPU generation of a card named ``name`` (``RTX 3090``, ``NVIDIA GeForce RTX 5090``)."""
    for pattern, gen in _GENERATIONS:
        if name and pattern.search(name):
            return gen
    return OTHER


def recommended(generations: set[str], rebar: bool = False) -> list[Setting]:
    """Return the options recommended for a host with GPUs of ``generations`` (each key once, in order)."""
    out: dict[str, Setting] = {}
    for gen in (BLACKWELL, ADA, AMPERE, OTHER):
        if gen in generations:
            for s in RECOMMENDED.get(gen, []):
                out.setdefault(s.key, s)
    if rebar:
        out.setdefault(REBAR.key, REBAR)
    return list(out.values())


@dataclass(frozen=True)
class Blacklist:
    """A module fwman's file blacklists: its name, why, and who says so."""

    module: str
    why: str
    source: str


def render(settings: list[Setting], blacklist: list[Blacklist] | None = None) -> bytes:
    """Return fwman's modprobe file for ``settings``: a header, each option's source, one ``options`` line, then
    one ``blacklist`` line (after its reason and source) per module of ``blacklist``.

    Raises ParseError for an option or a line the format cannot hold (core/modprobeconf refuses it).
    """
    comments = [HEADER.removeprefix("# ").removesuffix("\n")]
    comments += [f"NVreg_{s.key}={s.value}: {s.why} ({s.source})" for s in settings]
    listed = [(b.module, f"{b.module}: {b.why} ({b.source})") for b in blacklist or []]
    return modprobeconf.render(MODULE, [s.option for s in settings], comments, listed)


_PARAM = re.compile(r"^([A-Za-z][A-Za-z0-9_]*): (.*)$")


def parse_params(text: str) -> dict[str, str]:
    """Return ``{option: value}`` from ``/proc/driver/nvidia/params`` (quotes of string values removed).

    Raises ParseError for a line that is not ``Name: value``.
    """
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _PARAM.match(line)
        if not m:
            raise ParseError("/proc/driver/nvidia/params", f"line {lineno}", "not 'Name: value'", lineno)
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out[m.group(1)] = value
    return out


IN_EFFECT = "in effect"
NOT_IN_EFFECT = "not in effect"
UNKNOWN_OPTION = "not an option of the loaded module"
NOT_LOADED = "module not loaded"


def state(setting: Setting, params: dict[str, str] | None) -> tuple[str, str | None]:
    """Return (state, the loaded value) of ``setting`` given the loaded module's params (None: not loaded).

    Numbers compare as numbers (``0x1`` is ``1``).
    """
    if params is None:
        return NOT_LOADED, None
    if setting.key not in params:
        return UNKNOWN_OPTION, None
    loaded = params[setting.key]
    return (IN_EFFECT if _same(loaded, setting.value) else NOT_IN_EFFECT), loaded


def _same(a: str, b: str) -> bool:
    try:
        return int(a, 0) == int(b, 0)
    except ValueError:
        return a == b
