"""A mount: a host file or directory seen at a path inside a container.

One concept for every place fwman reads one: the ``Mounts`` of a Docker or Podman ``inspect`` answer
(``Source``, ``Destination``) and the ``mounts`` a CDI spec's ``containerEdits`` add (``hostPath``,
``containerPath``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mount:
    """One mount: ``source`` on the host, seen at ``destination`` inside the container."""

    source: str
    destination: str

    def host_path_of(self, container_path: str) -> str | None:
        """Return the host path behind ``container_path`` when this mount covers it (the destination itself or a
        path under it), else None."""
        top = self.destination.rstrip("/")
        if container_path == self.destination or container_path == top:
            return self.source
        if top and container_path.startswith(top + "/"):
            return self.source.rstrip("/") + container_path[len(top) :]
        return None
