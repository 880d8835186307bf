"""The forks a name may stand for: the built-in ones, ``[forks]`` of the config (URLs and donor-patch tables),
and the one resolver of a fork name (:func:`resolve_fork`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fwman.core import names
from fwman.core.config import DONOR_KEYS, Config
from fwman.core.errors import UsageError
from fwman.driver.forks.model import DonorPatch, Fork

DEFAULT_FORKS: dict[str, str] = {
    "aikitoria": "https://github.com/aikitoria/open-gpu-kernel-modules",
    "tinygrad": "https://github.com/tinygrad/open-gpu-kernel-modules",
    "mylesgoose": "https://github.com/mylesgoose/open-gpu-kernel-modules",
}


RESERVED_KEYS = {"api_url", "defaults"}  # keys of [forks] that are settings, not forks
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_OWNER_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")

#: where NVIDIA publishes its open kernel modules: the default upstream of a donor-patch fork. Its releases are
#: tags named by the bare version (``595.58.03``: the ``releases/tag/595.58.03`` that
#: github.com/himekifee/talos-tinygrad-nvidia-p2p-driver builds on)
NVIDIA_UPSTREAM = "https://github.com/NVIDIA/open-gpu-kernel-modules"
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_LOOPBACK_HTTP = re.compile(r"http://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?/\S*")
_VERSION_IN_NAME = re.compile(r"(?<![0-9.])(\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![0-9])")


def parse_donor(name: str, table: Mapping[str, Any], where: str) -> Fork:
    """Return the donor-patch fork of ``[forks.NAME]`` table ``table`` (``where`` names the file in messages).

    Raises UsageError naming the key: an unknown key; ``patch`` missing or not an absolute path or ``https://``
    URL; ``sha256`` missing (an unpinned patch is refused) or not 64 hex digits; ``upstream`` not a repository
    URL; ``versions`` not a list of driver versions, or absent while the patch's name says no version.
    """
    section = f"{where}: [forks.{name}]"
    hint = (
        f'[forks.{name}] patch = "https://.../p2p.patch" (or an absolute path), sha256 = "<sha256sum of it>", '
        'versions = ["595.58.03"]'
    )
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"{where}: [forks] {name!r} is not a fork name", hint=hint)
    unknown = sorted(k for k in table if k not in DONOR_KEYS)
    if unknown:
        raise UsageError(f"{section}: unknown key `{unknown[0]}`; known keys: {', '.join(DONOR_KEYS)}", hint=hint)
    patch = table.get("patch")
    if not isinstance(patch, str) or not patch.strip():
        raise UsageError(f"{section}: `patch` must be a string: the patch's absolute path or https:// URL", hint=hint)
    patch = patch.strip()
    url_ok = patch.startswith("https://") and " " not in patch
    if not (url_ok or _LOOPBACK_HTTP.fullmatch(patch) or (patch.startswith("/") and "\0" not in patch)):
        raise UsageError(f"{section}: patch {patch[:120]!r} is neither an absolute path nor an https:// URL", hint=hint)
    sha = table.get("sha256")
    if sha is None:
        raise UsageError(
            f"{section}: no sha256 for patch {patch[:120]}: an unpinned patch is refused (it is code from elsewhere, "
            "built into a module loaded as root)",
            hint=f"check the patch, then pin it: sha256 = \"$(sha256sum FILE | cut -d' ' -f1)\" in [forks.{name}]",
        )
    if not isinstance(sha, str) or not _SHA256_RE.fullmatch(sha.strip().lower()):
        raise UsageError(f"{section}: sha256 must be 64 hexadecimal digits (as sha256sum prints it)", hint=hint)
    upstream_text = table.get("upstream", NVIDIA_UPSTREAM)
    if not isinstance(upstream_text, str) or not upstream_text.strip():
        raise UsageError(f"{section}: `upstream` must be a repository URL string", hint=hint)
    upstream = clonable_url(names.fork_url(upstream_text.strip(), f"{section} upstream"))
    raw_versions = table.get("versions")
    versions_from = "config"
    if raw_versions is None:
        hinted = _VERSION_IN_NAME.findall(patch.rsplit("/", 1)[-1])
        if not hinted:
            raise UsageError(
                f'{section}: say which NVIDIA release the patch is for: versions = ["V"] (its name '
                f"{patch.rsplit('/', 1)[-1][:80]!r} says no version)",
                hint=hint,
            )
        raw_versions, versions_from = hinted[:1], "name"
    if not isinstance(raw_versions, list) or not raw_versions or not all(isinstance(v, str) for v in raw_versions):
        raise UsageError(f'{section}: versions must be a list of driver versions, e.g. ["595.58.03"]', hint=hint)
    versions = tuple(dict.fromkeys(str(names.driver_version(v.strip(), f"{section} versions")) for v in raw_versions))
    donor = DonorPatch(patch, sha.strip().lower(), versions, versions_from)
    return Fork(names.fork_name(name, f"{where}: [forks]"), upstream, donor)


def donor_forks(config: Config) -> dict[str, Fork]:
    """Return {name: Fork} of the donor-patch forks of ``[forks]`` (its tables). Raises UsageError on a bad one."""
    return {n: parse_donor(n, v, config.path) for n, v in config.section("forks").items() if isinstance(v, Mapping)}


def clonable_url(location: str) -> str:
    """Return ``location`` as git clones it: ``owner/name`` means GitHub; URLs and absolute paths stay as given."""
    if _OWNER_NAME_RE.fullmatch(location):
        return f"https://github.com/{location}.git"
    return location


def known_forks(config: Config) -> dict[str, str]:
    """Return {name: URL} of every fork a name may stand for: the built-in three (unless ``[forks] defaults =
    false``), then ``[forks]`` of the config (a configured name replaces a built-in URL).

    Raises UsageError on a bad ``[forks]`` entry.
    """
    forks: dict[str, str] = dict(DEFAULT_FORKS) if config.get_bool("forks", "defaults", True) else {}
    for name, url in config.section("forks").items():
        if name in RESERVED_KEYS or isinstance(url, Mapping):  # a table is a donor-patch fork (donor_forks)
            continue
        if not isinstance(url, str) or not url.strip() or not _NAME_RE.fullmatch(name):
            raise UsageError(f"{config.path}: [forks] {name} must be a URL string", hint='name = "https://..."')
        # config.toml is root's, but a fork URL reaches git: the same edge check as --fork
        forks[names.fork_name(name, f"{config.path}: [forks]")] = clonable_url(
            names.fork_url(url.strip(), f"{config.path}: [forks] {name}")
        )
    return forks


def resolve_fork(config: Config, text: str, option: str = "--fork") -> Fork:
    """Return the fork ``text`` names: the one resolver of a fork, for every place a fork is named.

    ``text`` is one of: the name of a known fork (built-in or ``[forks]``: ``aikitoria``); ``NAME=URL`` (a fork
    for this run, named NAME); or a location git can clone (``https://...``, ``git@host:path``, ``file://...``,
    an absolute path, ``owner/name`` on GitHub), named by the text itself. ``option`` names where the text came
    from in messages (``--fork``, ``/etc/fwman/config.toml: [modules] fork``). Raises UsageError for a bad
    ``[forks]`` table, a name that is not a known fork (the message lists the known ones), or a location git
    must not be handed.
    """
    text = text.strip()
    forks = known_forks(config)
    donors = donor_forks(config)
    if text in donors:
        return donors[text]
    if text in forks:
        return Fork(text, forks[text])
    name, sep, url = text.partition("=")
    if sep:
        if not _NAME_RE.fullmatch(name.strip()) or not url.strip():
            raise UsageError(
                f"{option} {text!r}: expected NAME=URL",
                hint="e.g. --fork mine=https://github.com/me/open-gpu-kernel-modules or --fork local=/srv/fork.git",
            )
        return Fork(names.fork_name(name.strip(), option), clonable_url(names.fork_url(url.strip(), option)))
    if "/" in text or ":" in text:  # a URL, scp-like git@host:path, an absolute path or owner/name
        return Fork(text, clonable_url(names.fork_url(text, option)))
    known = ", ".join([*forks, *donors]) or "none ([forks] defaults = false and no fork configured)"
    raise UsageError(
        f"{option} {text!r}: no fork of that name (known forks: {known}); give a known name, NAME=URL or a "
        "repository URL",
        hint=f'name a known fork, add it to {config.path} ([forks] {text} = "URL"), '
        "or give NAME=URL or the repository URL itself",
    )


def configured_forks(config: Config, extra: Sequence[str] = ()) -> list[Fork]:
    """Return the forks to list: each ``--fork`` value when there is one, else the known ones
    (:func:`known_forks`, then the donor-patch forks).

    A ``--fork`` value is anything :func:`resolve_fork` takes (a known name, ``NAME=URL``, a URL); a later
    entry with the same name replaces the earlier URL. Naming forks lists those alone: an owner asking about one
    fork (a local mirror, with no network) must not wait on, or fail for, the others (issue 39, row 5). Raises
    UsageError on a bad entry.
    """
    chosen: dict[str, Fork] = {}
    if not extra:
        chosen = {n: Fork(n, u) for n, u in known_forks(config).items()}
        chosen.update(donor_forks(config))
    for text in extra:
        fork = resolve_fork(config, text)
        chosen[fork.name] = fork
    return list(chosen.values())
