"""The only code that touches the machine: the Host protocol and its implementations."""

from fwman.host.base import CommandResult, Host, JournalEntry
from fwman.host.live import LiveHost
from fwman.host.snapshot import SnapshotHost

__all__ = ["CommandResult", "Host", "JournalEntry", "LiveHost", "SnapshotHost"]
