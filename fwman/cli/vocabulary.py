"""One option vocabulary: each option name fwman's commands take, with its one meaning, and the old spellings that
still work for a release.

docs/cli.md renders :data:`OPTIONS` and :data:`RENAMED` as tables (fwman.cli.docgen); a test walks every command's
options against them: an option not in the table, a table row no command takes, or one meaning under two names
fails. Imports only click: every command module may use :func:`renamed_option`.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: option (its long spelling) -> its one meaning, across every command that takes it
OPTIONS: dict[str, str] = {
    "--json": "print the result as one versioned JSON document (docs/json.md) instead of text",
    "--root": "treat DIR as / (global): every host path is read and written under it, the machine is never acted on",
    "--snapshot": "replay a host recorded by `fwman capture` (global); a path it did not record is an error",
    "--verbose": "more detail; the traceback of an error (global)",
    "--dry-run": "print what the command would change, change nothing",
    "--apply": "make the change; without it the command shows what it would do",
    "--check": "check what was made before (a snapshot, a flash after its reboot) instead of making it",
    "--yes": "do not ask before changing (scripts, Ansible)",
    "--force": "redo or replace what the command would otherwise leave as it is",
    "--card": "one GPU: PCI bus id (41:00.0) or nvidia-smi index",
    "--all": "every item of the command's kind (cards, kernels) instead of naming some",
    "--kernel": "a kernel release (6.1.0-50-amd64); repeatable where the command acts on several",
    "--removed": "a kernel being removed (the removal hooks pass it)",
    "--image": "a firmware image: a file (a .rom, or a card maker's update program or archive) or BOARD/VERSION",
    "--backup": "one of a card's stored backups (`fwman backup list`)",
    "--version": "show fwman's version and exit (global)",
    "--firmware-version": "which firmware version of the images a file or package holds",
    "--driver-version": "an NVIDIA driver version (570.86.16)",
    "--branch": "a branch of a P2P fork",
    "--fork": "a P2P fork of NVIDIA's open modules: a known name, NAME=URL, owner/name or a URL",
    "--source": "a local module source tree to build instead of a fork branch",
    "--output": "the file to write (report, bundle, metrics, board file) instead of the default place or stdout",
    "--stdout": "print what would be written to a file instead of writing it",
    "--dir": "a catalog directory (default: the catalog in force)",
    "--key": "an Ed25519 private key (PEM) that signs what the command writes",
    "--add": "a catalog key's public half (PEM) to name in the keys document",
    "--drop": "a catalog key id to stop naming",
    "--retire": "a catalog key id to retire for good",
    "--reason": "why the retired keys were retired (published)",
    "--note": "a line published with the added keys",
    "--not-before": "start of the added keys' window",
    "--not-after": "end of the added keys' window",
    "--date": "the date a signed document carries (default: today, UTC)",
    "--expires": "when a signed document stops being trusted",
    "--serial": "a signed document's serial number (default: the current one plus 1)",
    "--url": "where to download from instead of the default place",
    "--retries": "download retries per file or URL",
    "--timeout": "seconds before a step (a download, nvflash, a GPU pair) is given up on",
    "--offline": "do not touch the network: use the cached lists (their age is shown)",
    "--expect-md5": "the MD5 a card maker publishes for a file",
    "--md5-source": "where that MD5 is published",
    "--local": "only this host's local catalog entries",
    "--maker": "a board's maker",
    "--name": "a board's name",
    "--replace": "replace an existing local catalog entry",
    "--export": "also print the local entry in the curated catalog's format",
    "--report": "an owner report file and the public page where it is published",
    "--reuse-backups-from": "use the verified backups of run RUN instead of taking new ones",
    "--allow-downgrade": "accept a firmware image older than the card's",
    "--i-understand-no-backup-bios": "flash a board the catalog does not list with a second firmware chip",
    "--count": "how many entries to show",
    "--origin": "who runs the command (a hook, the boot service, the owner)",
    "--pin": "when the next boot is not safe, pin the newest kernel that is",
    "--hold": "hold back (apt pin) the kernel packages the modules will not build for",
    "--release": "lift the holds fwman placed",
    "--jobs": "parallel make jobs",
    "--reuse-dkms": "use the key DKMS signs with",
    "--container-root": "a container's (or an image's) root filesystem: also read it (audit), or move it (driver move)",
    "--to": "the driver version a move goes to (an NVIDIA driver version, 570.86.16)",
    "--rollback": "put back what a change kept before it (a driver move's modules, user space and hold)",
    "--finish": "end a change that was verified: drop what was kept for its rollback",
    "--status": "show the state of the last change instead of making one",
    "--run": "NVIDIA's .run installer of the version (a file)",
    "--run-sha256": "the SHA-256 of the --run file, as published where it was downloaded",
    "--env-file": "an environment file the GPU workload uses",
    "--unit": "a systemd unit (or drop-in) that runs the GPU workload",
    "--no-redact": "keep GPU UUIDs and serial numbers in a capture",
    "--no-simulate": "do not ask apt which upgrades are pending",
    "--rebar": "also set NVreg_EnableResizableBar=1",
    "--persistence": "turn persistence mode on for every GPU",
    "--limit": "a GPU power limit in watts, for every GPU or one",
    "--off": "remove fwman's unit",
    "--size": "bytes per copy, in MiB",
    "--repeats": "timed copies per GPU pair",
    "--warmup": "untimed copies per GPU pair before the clock starts",
    "--nccl": "run the NCCL tier instead of the copy test",
    "--runner": "which NCCL runner (torch.distributed or all_reduce_perf)",
    "--prefix": "run inside this command, where the model server's NCCL lives",
    "--nccl-env": "an NCCL variable for the run (NAME=VALUE)",
    "--nccl-sizes": "the all-reduce message sizes",
    "--no-control": "skip the NCCL control run with P2P disabled",
    "--soak": "repeat the copy test under load for a duration, comparing health counters",
    "--no-record": "do not append the result to the P2P history",
    "--board-id": "an image's board ID, to compare with the card's",
}


class RenamedOption(click.Option):
    """The old spelling of a renamed option: hidden from help and docs, it still works for a release and prints one
    deprecation line naming the new spelling."""

    def __init__(self, *args: Any, renamed_to: str, **kwargs: Any) -> None:
        kwargs["hidden"] = True
        super().__init__(*args, **kwargs)
        self.renamed_to = renamed_to


def deprecation_line(old: str, new: str, value: object = None) -> str:
    """Return the one line printed when ``old`` is used: the new spelling, with the value given where there is one
    (so the line runs as printed)."""
    shown = "" if value is None or value is True else f" {shlex.quote(str(value))}"
    return f"fwman: warning: {old} is deprecated here, and goes in a later release: use {new}{shown}"


def warn(line: str) -> None:
    """Print ``line`` on fwman's stderr (click's, outside fwman's entry point: click's own test runner)."""
    from fwman.cli.context import AppContext
    from fwman.core.termtext import one_line

    app = click.get_current_context().find_object(AppContext)
    if app is not None:
        app.echo(line, err=True)
    else:
        click.echo(one_line(line), err=True)


def renamed_option(old: str, new: str, dest: str, **kwargs: Any) -> Callable[[F], F]:
    """Return the decorator adding ``old``, the hidden old spelling of the option ``new`` (whose value the command
    takes as ``dest``): given, it prints one deprecation line and its value goes to ``dest``.

    Raises (when the command runs) :class:`fwman.core.errors.UsageError` when both spellings are given.
    """
    key = "renamed_" + dest

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def call(*args: Any, **kw: Any) -> Any:
            value = kw.pop(key, None)
            if value is not None and value != ():
                if kw.get(dest) not in (None, (), False):
                    from fwman.core.errors import UsageError

                    raise UsageError(f"{old} and {new} are one option: give {new} only", hint=f"use {new}")
                warn(deprecation_line(old, new, value))
                kw[dest] = value
            return f(*args, **kw)

        return click.option(old, key, cls=RenamedOption, renamed_to=new, **kwargs)(call)  # type: ignore[return-value]

    return decorate


def renamed_in(command: click.Command) -> dict[str, str]:
    """Return old spelling -> new spelling of ``command``'s renamed options."""
    return {p.opts[0]: p.renamed_to for p in command.params if isinstance(p, RenamedOption)}
