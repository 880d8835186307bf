"""Import: check a bundle against this host (:func:`plan_import`), then install it the way a build does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.core.errors import BlockedError, MissingError, ParseError, VerificationError
from fwman.driver.build import install
from fwman.driver.build.manifest import BuildRecord, KernelRecord, Manifest, load_manifest
from fwman.driver.bundle.format import Bundle, verify_contents
from fwman.driver.kmod import sign
from fwman.driver.kmod.kofile import split_signature
from fwman.driver.kmod.secureboot import secure_boot_enabled
from fwman.host.actions import Tell, apply_all, silent
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.driver.boot.pin import BootCheck


@dataclass
class ImportOutcome:
    """What an import did for one kernel."""

    kernel: str
    status: str  # "imported" | "current" | "would-import"
    message: str
    signature: str  # how the bundle's signature was checked
    signed: str | None  # how the installed modules are signed (hash), None when unsigned
    bundle_sha256: str
    boot: BootCheck | None = None
    checks: list[str] = field(default_factory=list)


def _same_modules(host: Host, manifest: Manifest | None, bundle: Bundle) -> bool:
    """Return True when the modules in place are the bundle's (compared without any appended signature)."""
    from fwman.driver.boot.safety import kernel_safety

    if manifest is None or set(manifest.modules) != set(bundle.files):
        return False
    if not kernel_safety(host, bundle.doc.kernel).safe:
        return False
    for name, entry in manifest.modules.items():
        try:
            installed = split_signature(host.read_bytes(entry.path))[0]
        except (MissingError, ParseError):
            return False
        if installed != split_signature(bundle.files[name])[0]:
            return False
    return True


def _older(bundle_built: str | None, in_place_built: str) -> bool | None:
    """Return True when ``bundle_built`` is before ``in_place_built`` (ISO 8601 times), None when either is
    missing or unreadable (then the age cannot be told, and the import says so)."""
    from datetime import UTC, datetime

    try:
        a, b = datetime.fromisoformat(bundle_built or ""), datetime.fromisoformat(in_place_built)
    except ValueError:
        return None
    if a.tzinfo is None or b.tzinfo is None:
        a, b = a.replace(tzinfo=a.tzinfo or UTC), b.replace(tzinfo=b.tzinfo or UTC)
    return a < b


def plan_import(host: Host, bundle: Bundle, origin: str, check_signature: Callable[[Bundle], str]) -> ImportOutcome:
    """Check ``bundle`` against ``host`` without changing anything; return ``current`` or ``would-import``.

    Checks: hashes and vermagic, the kernel is installed here, the signature (``check_signature`` returns how it
    was checked, or raises VerificationError), Secure Boot. Raises VerificationError, MissingError or
    BlockedError for the first check that fails.
    """
    doc = bundle.doc
    verify_contents(bundle)
    checks = [f"{len(doc.modules)} modules match bundle.json (SHA-256, vermagic {doc.kernel})"]
    if not host.is_dir(paths.modules_dir(doc.kernel)):
        raise MissingError(
            f"the bundle is for kernel {doc.kernel}, which is not installed here ({paths.modules_dir(doc.kernel)})",
            hint="install that kernel first, or export a bundle for a kernel this host has",
        )
    checks.append(f"kernel {doc.kernel} is installed")
    signature = check_signature(bundle)
    checks.append(signature)
    key = sign.configured_key(host)
    secure = secure_boot_enabled(host)
    if key is not None:
        checks.append(f"modules will be signed with this host's key {key.cert}")
    elif secure and doc.signed is None:
        raise BlockedError(
            "Secure Boot is on and the bundle's modules are unsigned: the kernel would refuse to load them",
            hint="run `fwman modules keygen` here (and enroll it), then import again: fwman signs on import",
        )
    elif secure:
        checks.append(f"Secure Boot is on: modules keep the bundle's signature ({doc.signer}); it must be enrolled")
    manifest = load_manifest(host, doc.kernel)
    same = _same_modules(host, manifest, bundle)
    if manifest is not None and not same:
        older = _older(doc.built_at, manifest.built_at)
        if older is None:
            checks.append(f"age not compared: built at {doc.built_at or 'unknown'}, in place {manifest.built_at}")
        elif older:
            raise BlockedError(
                f"the bundle was built at {doc.built_at}, before the modules in place for {doc.kernel} (built at "
                f"{manifest.built_at}): an older bundle replayed is refused",
                hint="to go back to older modules on purpose, build them again on the builder (the new build "
                "is newer) and export that bundle",
            )
        else:
            checks.append(f"built at {doc.built_at}, newer than the modules in place (built at {manifest.built_at})")
    if same:
        message = f"{doc.kernel}: the bundle's modules are already in place and verified"
        in_place = manifest.signed if manifest else None
        return ImportOutcome(doc.kernel, "current", message, signature, in_place, bundle.sha256, checks=checks)
    message = f"{doc.kernel}: would install the bundle from {origin}"
    return ImportOutcome(doc.kernel, "would-import", message, signature, doc.signed, bundle.sha256, checks=checks)


@dataclass
class ImportModules:
    """Install ``bundle``'s modules the way a build does (an action of the lifecycle's plan, see
    :func:`fwman.driver.lifecycle.plan`): sign with this host's key when one is configured, stage and swap them
    in (depmod runs), verify that every name resolves to the new file with the recorded hash, and record the
    kernel's state (the manifest, the markers cleared: :class:`~fwman.driver.build.manifest.KernelRecord`)."""

    bundle: Bundle
    origin: str
    outcome: ImportOutcome
    tell: Tell = silent
    done: bool = False

    @property
    def kver(self) -> str:
        """Return the bundle's kernel."""
        return self.bundle.doc.kernel

    def describe(self) -> str:
        """Return what is installed from where."""
        return f"install the bundle's modules for {self.kver} from {self.origin}"

    def is_needed(self, host: Host) -> bool:
        """Return True until it ran, unless the bundle's modules are already in place (``current``)."""
        return not self.done and self.outcome.status != "current"

    def installed(self) -> bool:
        """Return True when it ran."""
        return self.done

    def apply(self, host: Host) -> None:
        """Install and verify. Raises VerificationError when the modules are not in effect (the manifest is then
        not written)."""
        bundle, doc = self.bundle, self.bundle.doc
        files = dict(bundle.files)
        signed = doc.signed
        key = sign.configured_key(host)
        if key is not None:
            # this host's key, as a build here would sign; the builder's signature (if any) is replaced
            unsigned = {name: split_signature(data)[0] for name, data in files.items()}
            files, signed = sign.sign_for_kernel(host, doc.kernel, unsigned, key)
            self.tell(f"signed the modules with {key.cert} ({signed})")
        entries, _changed = install.install_modules(host, doc.kernel, files)  # staged files, override, depmod
        built_from = doc.source or (f"fork {doc.fork} branch {doc.branch}" if doc.fork else "unknown source")
        imported = (
            f"imported from {self.origin} (bundle {bundle.sha256[:16]}, built on {doc.exported_from} from {built_from})"
        )
        manifest = Manifest.from_record(
            doc.kernel, entries, replace(BuildRecord.of(doc), source=imported, signed=signed)
        )
        bad = [c for c in install.check_installed(host, manifest) if not c.ok]
        if bad:
            raise VerificationError(
                f"imported but not in effect for {doc.kernel}: {bad[0].name}: {bad[0].problem}",
                hint="run `fwman modules status`; the previous manifest was kept",
            )
        apply_all(host, KernelRecord(doc.kernel).installed(manifest))  # as a build ends
        self.done = True
        self.outcome.status = "imported"
        self.outcome.signed = signed
        self.outcome.message = f"imported and verified for {doc.kernel} from {self.origin}"


def import_bundle(
    host: Host, bundle: Bundle, origin: str, check_signature: Callable[[Bundle], str], tell: Tell = silent
) -> ImportOutcome:
    """Check ``bundle`` and install its modules on ``host`` the way a build does; return what happened.

    Under the module lock, after :func:`plan_import`'s checks, applies the lifecycle's plan of an import
    (:func:`fwman.driver.lifecycle.plan`): :class:`ImportModules`, the initramfs refreshed, the next boot kept
    safe. Raises as :func:`plan_import`, and VerificationError when the installed modules are not in effect (the
    manifest is then not written).
    """
    from fwman.driver import lifecycle
    from fwman.driver.build.lock import module_lock

    with module_lock(host):
        outcome = plan_import(host, bundle, origin, check_signature)
        action = ImportModules(bundle, origin, outcome, tell)
        situation = lifecycle.Situation((bundle.doc.kernel,), lifecycle.IMPORT)
        outcome.boot = lifecycle.converge(host, lifecycle.plan(host, situation, install=action, tell=tell)).boot
        return outcome
