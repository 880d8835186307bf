"""systemd units and drop-ins: what a service's environment and command line are (pure parser), and telling a
running systemd that fwman changed its unit files."""

from __future__ import annotations

import shlex

from fwman.host.base import Host, is_this_machine
from fwman.platform.envfile import NAME


def reload_running_systemd(host: Host, start: str | None = None) -> bool:
    """Run ``systemctl daemon-reload`` (then ``systemctl start START``) when ``host`` is the real root with a
    running systemd; return whether it ran.

    A temp root (``--root``), a snapshot or a container without systemd gets the unit files only: systemd reads
    them at its next start. Raises what ``host.run`` raises when systemctl fails.
    """
    if not is_this_machine(host) or not host.exists("/run/systemd/system") or not host.which("systemctl"):
        return False
    host.run(["systemctl", "daemon-reload"], timeout=60)
    if start is not None:
        host.run(["systemctl", "start", start], timeout=60)
    return True


def _split_words(value: str) -> list[str]:
    """Split like systemd does for Environment= (quotes group words); fall back to whitespace on bad quoting."""
    try:
        return shlex.split(value, posix=True)
    except ValueError:
        return value.split()


def parse_unit_environment(text: str) -> tuple[dict[str, str], list[str], list[str]]:
    """Return (``Environment=`` assignments, ``EnvironmentFile=`` paths, ``ExecStart=`` command lines) of a
    systemd unit (or drop-in). Continuation lines ending in ``\\`` are joined. Never raises."""
    env: dict[str, str] = {}
    files: list[str] = []
    execs: list[str] = []
    joined: list[str] = []
    buf = ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        joined.append(buf + raw)
        buf = ""
    if buf:
        joined.append(buf)
    for raw in joined:
        line = raw.strip()
        if line.startswith(("#", ";")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if key == "Environment":
            for word in _split_words(value):
                name, sep, val = word.partition("=")
                if sep and NAME.fullmatch(name):
                    env[name] = val
        elif key == "EnvironmentFile":
            files.append(value.strip().lstrip("-"))
        elif key in ("ExecStart", "ExecStartPre"):
            execs.append(value.strip())
    return env, files, execs
