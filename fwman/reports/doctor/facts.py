"""What the doctor's checks share: the host, the places the user pointed at, and readers that run once.

Each reader is cached and raises the FwmanError it met (MissingError, NotRecordedError, ParseError); the check
that asked turns it into a "could not check" finding, so one unreadable thing never hides the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwman.core.errors import FwmanError, MissingError, NotRecordedError, ParseError
from fwman.gpu.card import Card
from fwman.gpu.inventory import Inventory, scan_inventory
from fwman.gpu.topo import TopoMatrix, parse_p2p_matrix, parse_topo_matrix
from fwman.host.base import Host

if TYPE_CHECKING:
    from fwman.firmware.catalog.load import Catalog

TOPO_M = ("nvidia-smi", "topo", "-m")
TOPO_P2P_READ = ("nvidia-smi", "topo", "-p2p", "r")


@dataclass(frozen=True)
class Sources:
    """Places that may set NCCL/vLLM options, named by the user (``--env-file``, ``--unit``)."""

    env_files: tuple[str, ...] = ()
    unit_files: tuple[str, ...] = ()


@dataclass
class Facts:
    """Lazily read, cached facts about one host."""

    host: Host
    sources: Sources = field(default_factory=Sources)
    _cache: dict[str, Any] = field(default_factory=dict)
    _errors: dict[str, FwmanError] = field(default_factory=dict)

    def _once(self, key: str, fn: Any) -> Any:
        if key in self._errors:
            raise self._errors[key]
        if key not in self._cache:
            try:
                self._cache[key] = fn()
            except FwmanError as e:
                self._errors[key] = e
                raise
        return self._cache[key]

    # -- readers ------------------------------------------------------------------------------------------------
    def inventory(self) -> Inventory:
        """Return the GPU inventory (sysfs plus nvidia-smi)."""
        inv: Inventory = self._once("inventory", lambda: scan_inventory(self.host))
        return inv

    @property
    def cards(self) -> list[Card]:
        """Return the GPUs."""
        return self.inventory().cards

    def _command(self, argv: tuple[str, ...]) -> str:
        if self.host.which(argv[0]) is None:
            raise MissingError(f"{argv[0]} is not installed", hint="install the NVIDIA driver's user space")
        result = self.host.run(list(argv), timeout=60)
        if result.missing:
            raise MissingError(f"{argv[0]} is not installed")
        if result.rc != 0:
            why = (result.stderr or result.stdout).strip().splitlines()
            raise MissingError(f"`{' '.join(argv)}` failed (exit {result.rc}): {why[0] if why else 'no output'}")
        return result.stdout

    def topo(self) -> TopoMatrix:
        """Return ``nvidia-smi topo -m``. Raises MissingError/NotRecordedError/ParseError."""
        topo: TopoMatrix = self._once("topo", lambda: parse_topo_matrix(self._command(TOPO_M)))
        return topo

    def p2p_read(self) -> TopoMatrix:
        """Return ``nvidia-smi topo -p2p r``. Raises MissingError/NotRecordedError/ParseError."""
        p2p: TopoMatrix = self._once("p2p", lambda: parse_p2p_matrix(self._command(TOPO_P2P_READ)))
        return p2p

    def audit(self) -> Any:
        """Return ``fwman.reports.audit.report.audit_host`` (offline: cached fork branches only).

        Raises MissingError when this build has no audit module.
        """

        def load() -> Any:
            try:
                from fwman.reports.audit.report import audit_host
            except ImportError as e:  # the audit feature is not in this build
                raise MissingError(f"the driver audit is not available in this fwman ({e})") from e
            return audit_host(self.host, offline=True)

        return self._once("audit", load)

    def catalog(self) -> Catalog:
        """Return the VBIOS catalog in use (local copy or bundled). Raises MissingError when there is none."""

        def load() -> Catalog:
            try:
                from fwman.firmware.catalog.load import load_catalog
            except ImportError as e:
                raise MissingError(f"the VBIOS catalog is not available in this fwman ({e})") from e
            return load_catalog(self.host)

        catalog: Catalog = self._once("catalog", load)
        return catalog

    def text(self, path: str) -> str | None:
        """Return the text of ``path``, None when it does not exist. Raises NotRecordedError on a snapshot that
        did not record it, MissingError when it exists but cannot be read."""
        if not self.host.exists(path):
            return None
        return self.host.read_text(path)

    def listing(self, path: str) -> list[str] | None:
        """Return the entries of directory ``path``, None when it does not exist. Raises NotRecordedError."""
        if not self.host.is_dir(path):
            return None
        return self.host.listdir(path)


def describe_error(e: FwmanError) -> str:
    """Return a one-line reason for a "could not check" finding."""
    if isinstance(e, NotRecordedError):
        return f"not in this snapshot ({e.message.removeprefix('snapshot ')})"
    if isinstance(e, ParseError):
        return f"unreadable output: {e.message}"
    return e.message
