"""Ubuntu's prebuilt NVIDIA module packages in ``fwman audit``: read them, and say what they do to fwman's modules.

An installed ``linux-modules-nvidia-*`` (or its ``linux-objects-nvidia-*`` / ``linux-signatures-nvidia-*``) is
always a mismatch on a host that runs fwman's patched modules: where depmod picks its module the patched one is
replaced; where fwman's override wins, any kernel fwman has not built for loads the stock module; and its
metapackage brings the next kernel's. The fix names the packages to purge and, until the apt pin of
``fwman dkms block`` blocks them, that command (fwman.driver.prebuilt, fwman.driver.dkms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from fwman.core.errors import MissingError, ParseError
from fwman.driver import dkms
from fwman.driver.prebuilt import PIN_PATTERNS, read_prebuilt
from fwman.host.base import Host
from fwman.reports.audit.model import KernelModule, PrebuiltModulePackage, Row

COMPONENT = "Ubuntu prebuilt NVIDIA modules"


def read_prebuilt_packages(host: Host, unreadable: list[str]) -> tuple[list[PrebuiltModulePackage], bool]:
    """Return (the installed prebuilt packages, whether fwman's apt pin blocks them); a dpkg status file that
    cannot be read or parsed is noted in ``unreadable`` and gives []."""
    try:
        found = read_prebuilt(host) or []
    except (ParseError, MissingError) as e:
        unreadable.append(f"dpkg status ({e.message})")
        found = []
    return [PrebuiltModulePackage(**asdict(p)) for p in found], dkms.pin_current(host)


def _fix(packages: Sequence[PrebuiltModulePackage], pinned: bool) -> str:
    names = [p.name for p in sorted(packages, key=lambda p: (p.kind != "metapackage", p.name))]
    fix = "apt-get purge " + " ".join(names)
    if not pinned:
        fix += f"; then `fwman dkms block` (apt pin -1 on {', '.join(PIN_PATTERNS)}, so apt cannot bring them back)"
    return fix + (
        "; if apt offers to remove nvidia-driver-* with them, keep its user-space packages (libnvidia-compute-*, "
        "nvidia-utils-*): fwman's module is the kernel part"
    )


def prebuilt_rows(
    packages: Sequence[PrebuiltModulePackage], modules: Sequence[KernelModule], pinned: bool
) -> list[Row]:
    """Return one row per kernel the prebuilt packages cover and one per metapackage, each with the fix."""
    if not packages:
        return []
    fix = _fix(packages, pinned)
    rows: list[Row] = []
    kernels = sorted({p.kernel for p in packages if p.kernel is not None})
    for kver in kernels:
        group = [p for p in packages if p.kernel == kver]
        dirs = [d for p in group for d in p.module_dirs]
        picked = [m for m in modules if m.kernel == kver and any(m.path.startswith(f"{d}/") for d in dirs)]
        files = sorted({f for p in group for f in p.modules})
        details = [f"{', '.join(p.name for p in group)}: Canonical-signed stock NVIDIA modules"]
        if picked:
            where = ", ".join(sorted({m.path.rsplit("/", 1)[0] for m in picked}))
            names = ", ".join(sorted(m.path.rsplit("/", 1)[1] for m in picked))
            details.append(f"depmod picks {names} from {where} for {kver}: they replace fwman's patched modules")
        elif files:
            details.append(
                f"{len(files)} module file(s) in {', '.join(sorted(set(dirs)))}: fwman's build wins for now "
                "(updates/ and its depmod override), but without it this kernel loads the stock module"
            )
        else:
            details.append("no module file on disk now (the next install or latelink puts them there)")
        details += [p.note for p in group if p.note]
        rows.append(
            Row(
                component=f"{COMPONENT} ({kver})",
                version=next((m.version for m in picked if m.version), None),
                where=", ".join(sorted(set(dirs))) or "dpkg",
                status="mismatch",
                fix=fix,
                detail="; ".join(details),
            )
        )
    for meta in (p for p in packages if p.kind == "metapackage"):
        provides = ", ".join(meta.provides) or "nothing"
        rows.append(
            Row(
                component=f"{COMPONENT} metapackage",
                version=meta.version,
                where=meta.name,
                status="mismatch",
                fix=fix,
                detail=f"follows the {meta.flavour} kernels and provides {provides}: apt installs the prebuilt "
                "modules of every new kernel, around fwman's DKMS pin",
            )
        )
    return rows
