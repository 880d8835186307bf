"""Which module file ``depmod`` (kmod) picks for a name, without running it.

Several files can carry one module name (``kernel/drivers/video/nvidia.ko`` from a package,
``updates/dkms/nvidia.ko`` from DKMS, ``updates/fwman/nvidia.ko`` from fwman); ``depmod`` keeps one, and
``modprobe`` loads only that one. The rules reproduced here are kmod's (depmod.c, kmod 30):

- configuration: ``*.conf`` files from ``/etc/depmod.d``, ``/run/depmod.d``, ``/usr/local/lib/depmod.d``,
  ``/usr/lib/depmod.d``, ``/lib/depmod.d``; a file name seen in an earlier directory hides the same name in a later
  one; files are read in name order.
- ``search DIR...``: the earlier a directory is named (over all lines, in reading order), the higher its
  priority; ``built-in`` stands for every directory no search line names. Without any ``search`` line the order
  is ``updates`` first, then everything else (the documented default ``updates built-in``).
- ``override MODULE KVER-REGEX SUBDIR``: the file ``SUBDIR/MODULE.ko*`` wins over any other for that name (the
  override added last is checked first). ``*`` matches every kernel; otherwise an extended regular expression
  searched in the kernel release.
- ``exclude DIR``: directories of that name are not searched.
- module names compare with ``-`` and ``_`` as the same character; the directories ``build`` and ``source``
  are never searched. Where two files tie, kmod's answer depends on the order the directory is read on disk;
  this module walks in name order (so a tie is a guess: fwman always writes an ``override`` line instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core import paths
from fwman.core.errors import MissingError
from fwman.driver.kmod.kofile import module_stem
from fwman.host.base import Host

BUILTIN = "built-in"


def normalize(name: str) -> str:
    """Return a module name with ``-`` as ``_`` (how kmod compares names)."""
    return name.replace("-", "_")


@dataclass
class DepmodConfig:
    """The parts of depmod.d configuration that decide which file wins."""

    #: search entries, highest priority first ("built-in" may appear)
    searches: list[str] = field(default_factory=list)
    #: (module name as written, subdir) for overrides matching this kernel, in file order
    overrides: list[tuple[str, str]] = field(default_factory=list)
    excludes: list[str] = field(default_factory=list)
    #: the files read, in order (for --verbose and docs)
    files: list[str] = field(default_factory=list)


def parse_config_text(text: str, kver: str, config: DepmodConfig) -> None:
    """Add the ``search``, ``override`` and ``exclude`` lines of one depmod.d file to ``config``.

    Lines that kmod ignores (unknown commands, overrides for other kernels, bad lines) are ignored. Never raises.
    """
    for line in _logical_lines(text):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        cmd, args = words[0], words[1:]
        if cmd == "search":
            config.searches.extend(args)
        elif cmd == "override" and len(args) >= 3:
            if _kernel_matches(args[1], kver):
                config.overrides.append((args[0], args[2].rstrip("/")))
        elif cmd == "exclude" and args:
            config.excludes.append(args[0].rstrip("/"))


def _logical_lines(text: str) -> list[str]:
    """Return the lines of ``text`` with backslash-newline continuations joined (kmod's getline_wrapped)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if raw.endswith("\\"):
            pending += raw[:-1]
            continue
        lines.append(pending + raw)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _kernel_matches(pattern: str, kver: str) -> bool:
    """Return True when an override's kernel field matches ``kver`` (``*``, or an ERE searched in it)."""
    if pattern == "*":
        return True
    try:
        return re.search(pattern, kver) is not None
    except re.error:
        return False  # kmod: a pattern that does not compile matches nothing


def load_config(host: Host, kver: str) -> DepmodConfig:
    """Return the depmod configuration of ``host`` as it applies to kernel ``kver``. Never raises on bad files."""
    chosen: dict[str, str] = {}
    for directory in paths.DEPMOD_CONFIG_DIRS:
        if not host.is_dir(directory):
            continue
        try:
            names = host.listdir(directory)
        except MissingError:
            continue
        for name in names:
            if name.startswith(".") or not name.endswith(".conf") or len(name) < 6:
                continue
            path = f"{directory}/{name}"
            if name not in chosen and not host.is_dir(path):
                chosen[name] = path
    config = DepmodConfig()
    for name in sorted(chosen):
        try:
            text = host.read_text(chosen[name])
        except MissingError:
            continue
        config.files.append(chosen[name])
        parse_config_text(text, kver, config)
    return config


def modules_dir_entries(host: Host, kver: str, excludes: list[str] | None = None) -> list[str]:
    """Return every module file under ``/lib/modules/<kver>`` as paths relative to it, in depth-first name order.

    ``build`` and ``source`` (and ``excludes`` directory names) are skipped, like depmod. Returns [] when the
    directory does not exist.
    """
    base = paths.modules_dir(kver)
    skip = {"build", "source", *(excludes or [])}
    found: list[str] = []

    def walk(rel: str) -> None:
        try:
            names = host.listdir(f"{base}/{rel}" if rel else base)
        except MissingError:
            return
        for name in names:
            child = f"{rel}/{name}" if rel else name
            if module_stem(name) is not None:
                # a module file: no stat needed (thousands of them on a real kernel; a replay has no record)
                found.append(child)
            elif name not in skip and host.is_dir(f"{base}/{child}"):
                walk(child)

    walk("")
    return found


def _without_ext(rel: str) -> str:
    head, _, name = rel.rpartition("/")
    stem = module_stem(name) or name
    return f"{head}/{stem}" if head else stem


def _matches(rel: str, entry: str) -> bool:
    entry = entry.rstrip("/")
    return len(_without_ext(rel)) > len(entry) and rel.startswith(entry + "/")


def _old_stays(config: DepmodConfig, old_rel: str, new_rel: str) -> bool:
    """Return True when file ``old_rel`` keeps the name against ``new_rel`` (kmod's is_higher_priority).

    Reproduced literally, quirks included: kmod prepends every search entry (so the first one named ends last
    with the highest index), takes built-in's index for an unmatched path (-1 when built-in is not listed),
    and checks the old path against an entry only when the new one did not match it; on a tie of two files in
    one named directory the one found later wins, in the built-in set the one found first.
    """
    old_key, new_key = _without_ext(old_rel), _without_ext(new_rel)
    for modname, subdir in reversed(config.overrides):
        path = f"{subdir}/{modname}"
        if new_key == path:
            return False
        if old_key == path:
            return True
    entries = list(reversed(config.searches if config.searches else ["updates"]))
    bprio = oldprio = newprio = -1
    for i, entry in enumerate(entries):
        if entry == BUILTIN:
            bprio = i
        elif _matches(new_rel, entry):
            newprio = i
        elif _matches(old_rel, entry):
            oldprio = i
    # a path no named entry matched takes built-in's index
    return (newprio if newprio >= 0 else bprio) <= (oldprio if oldprio >= 0 else bprio)


def resolve_all(host: Host, kver: str, config: DepmodConfig | None = None) -> dict[str, str]:
    """Return {normalized module name: absolute host path depmod picks} for every module of kernel ``kver``."""
    config = config if config is not None else load_config(host, kver)
    chosen: dict[str, str] = {}
    for rel in modules_dir_entries(host, kver, config.excludes):
        name = normalize(module_stem(rel.rpartition("/")[2]) or rel)
        current = chosen.get(name)
        if current is None or not _old_stays(config, current, rel):
            chosen[name] = rel
    return {name: f"{paths.modules_dir(kver)}/{rel}" for name, rel in chosen.items()}


def resolve_module(host: Host, kver: str, name: str) -> str | None:
    """Return the absolute host path of the file depmod would pick for module ``name`` on kernel ``kver``.

    ``name`` may use ``-`` or ``_``. Returns None when no file carries that name. Never raises for a missing
    kernel directory (None).
    """
    return resolve_all(host, kver).get(normalize(name))
