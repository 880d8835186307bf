"""Every ``--json`` document fwman prints, collected from real runs on the test hosts (docs/json.md's test).

:func:`collect_documents` runs every leaf command that takes ``--json`` on each recorded host (``--snapshot``)
and on an empty ``--root``, then the firmware commands on the stand-in nvflash rig (``fixtures/nvflash``) and
``p2p`` on in-memory GPUs, and returns the documents by schema. :func:`key_paths` walks one document.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fixtures.hostgen.materialize import materialize
from fixtures.nvflash.rig import REBAR_3987, build_rig
from tests.support.commands import all_commands
from tests.support.env import EXAMPLE_HOST, HOSTS, FwmanEnv, Result
from tests.support.gpus import MemoryGpus, all_pairs, memory_driver
from tests.support.modules import install_tiny_modules


def json_commands() -> list[tuple[str, ...]]:
    """Return the argv of every command and subcommand that takes ``--json``."""
    return [argv for argv, command in all_commands() if any(p.name == "as_json" for p in command.params)]


#: what each document was printed by: schema -> [(argv, document)]
Documents = dict[str, list[tuple[tuple[str, ...], dict[str, Any]]]]


def _keep(found: Documents, argv: tuple[str, ...], r: Result) -> None:
    if r.stdout.strip():
        doc = json.loads(r.stdout)
        found.setdefault(doc["schema"], []).append((argv, doc))


def collect_documents(tmp: Path) -> Documents:
    """Return every document the commands print on the test hosts, by schema (a scratch tree under ``tmp``)."""
    found: Documents = {}
    run = FwmanEnv()
    empty = tmp / "empty"
    empty.mkdir()
    for where in [*(["--snapshot", str(h)] for h in sorted(HOSTS.iterdir())), ["--root", str(empty)]]:
        for argv in [*json_commands(), ("apply", "--check")]:  # --check: its own document
            _keep(found, argv, run(*argv, "--json", *where))
    # the firmware commands on a live root with the stand-in nvflash: a backup, a flash and what reads them
    rig = build_rig(tmp / "rig")
    rom = str(rig.new_image_path)
    for argv in [
        ("backup",), ("backup", "list"), ("backup", "verify"), ("upgrade", "--dry-run"),
        ("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}"), ("flash", "status"), ("flash", "history"),
        ("upgrade", "--check"), ("rom", "inspect", rom), ("rom", "verify", rom, "--card", "41:00.0"),
        ("flash", "report", "--card", "41:00.0"), ("catalog", "show", "3842:3987"),
        ("fetch", f"3842:3987/{REBAR_3987}"),
        ("capture", str(tmp / "capture")),
    ]:  # fmt: skip
        r = rig(*argv, "--json")
        assert isinstance(r, Result)
        _keep(found, argv, r)
    # a whole upgrade: the plan reads each card's firmware (the driver loaded), --apply flashes with the driver
    # stopped, --check reads them after the reboot
    story = build_rig(tmp / "story", driver_loaded=True)
    shutil.copytree(EXAMPLE_HOST / "files/proc/driver/nvidia", story.root / "proc/driver/nvidia")
    story.load_driver(False)
    shutil.rmtree(story.root / "proc/driver/nvidia")
    for argv in [("upgrade", "--apply"), ("upgrade", "--check")]:
        if argv[1] == "--check":
            story.reboot()
        r = story(*argv, "--json")
        assert isinstance(r, Result)
        _keep(found, argv, r)
    # a boot check that pins: systemd-boot, one kernel with fwman's modules (real depmod), a newer one without
    boot = tmp / "boot"
    install_tiny_modules(boot, "6.1.0-50-amd64")
    (boot / "lib/modules/6.1.0-53-amd64").mkdir(parents=True)
    (boot / "boot/loader/entries").mkdir(parents=True)
    (boot / "boot/loader/loader.conf").write_text("timeout 3\ndefault debian-*\n")
    for kver in ("6.1.0-50-amd64", "6.1.0-53-amd64"):
        entry = f"title Debian\nversion {kver}\nlinux /vmlinuz-{kver}\n"
        (boot / f"boot/loader/entries/debian-{kver}.conf").write_text(entry)
    for argv in [
        ("modules", "check-boot", "--pin", "--origin", "postinst"), ("modules", "status"),
        ("modules", "unpin", "--dry-run"), ("modules", "remove", "--kernel", "6.1.0-50-amd64", "--dry-run"),
    ]:  # fmt: skip
        _keep(found, argv, run("--root", str(boot), *argv, "--json"))
    # the copy test on two in-memory GPUs of the example host
    root = materialize(EXAMPLE_HOST, tmp / "p2p")
    p2p = FwmanEnv(cuda_driver=memory_driver(MemoryGpus(2, peer=all_pairs(2))))
    argv = ("p2p", "--size", "1", "--repeats", "1")
    _keep(found, argv, p2p("--root", str(root), *argv, "--json"))
    return found


def key_paths(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (path, value) for every key of every object in ``value``, depth first; a path names list elements
    ``[]`` (``gpus[].bus_id``)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            here = f"{path}.{key}" if path else key
            yield here, inner
            yield from key_paths(inner, here)
    elif isinstance(value, list):
        for inner in value:
            yield from key_paths(inner, f"{path}[]")


def inventory(found: Documents) -> dict[str, dict[str, set[str]]]:
    """Return, per schema, every key path its documents have and the JSON types seen there (the list the
    vocabulary of docs/json.md was drawn from: ``python -m tests.support.json_docs`` prints it)."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "list"}
    out: dict[str, dict[str, set[str]]] = {}
    for schema, docs in found.items():
        for _, doc in docs:
            for path, value in key_paths(doc):
                out.setdefault(schema, {}).setdefault(path, set()).add(names.get(type(value), "null"))
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for schema, paths in sorted(inventory(collect_documents(Path(scratch))).items()):
            print(schema)
            for path, types in sorted(paths.items()):
                print(f"  {path}: {' or '.join(sorted(types))}")
