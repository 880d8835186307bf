"""A donor-patch fork's patch: had from its file or URL, verified against its pinned sha256, kept in the cache.

A ``[forks.NAME]`` table (:class:`fwman.driver.forks.model.DonorPatch`) names a patch and its sha256; the build
checks out NVIDIA's upstream tag and applies the patch in the build tree, with the same ``patch -p1 --fuzz=0
--forward`` (dry run first) as the per-kernel patches of ``patches.d`` (:func:`fwman.driver.build.kbuild.
apply_patches`, the one applier). The patch is code built into a module that root loads, so bytes whose digest
is not the pinned one are never written where the build reads them: a mismatch is a VerificationError (exit 4)
and nothing is built. A verified patch is kept as ``/var/cache/fwman/donor-patches/<sha256>.patch``, so the
kernel hook (which must not wait on the network) and later builds reuse it.
"""

from __future__ import annotations

import hashlib

from fwman.core import paths
from fwman.core.errors import MissingError, ParseError, VerificationError
from fwman.driver.build.patches import MAX_PATCH_BYTES, KernelPatch, parse_patch
from fwman.driver.forks.model import DonorPatch, Fork
from fwman.host.actions import Tell, silent
from fwman.host.base import Host
from fwman.host.capped import read_capped


def _read(host: Host, fork: Fork, donor: DonorPatch, tell: Tell) -> bytes:
    """Return the patch's bytes from its URL (the HTTP door, capped) or its host file (capped).

    Raises DownloadError/MissingError when it cannot be had, VerificationError when it is over the cap.
    """
    if donor.is_url:
        from fwman.host.http import HttpOptions, http_get  # the door imports requests, which is slow to import

        tell(f"downloading the donor patch of fork {fork.name}: {donor.location}")
        return http_get(host, donor.location, cap=MAX_PATCH_BYTES, options=HttpOptions())
    if not host.exists(donor.location):
        raise MissingError(
            f"donor patch {donor.location} of fork {fork.name} is not there",
            hint=f"put the patch there, or fix [forks.{fork.name}] patch in {paths.CONFIG_FILE}",
        )
    return read_capped(host, donor.location, MAX_PATCH_BYTES, f"donor patch of fork {fork.name}")


def donor_patch(host: Host, fork: Fork, tell: Tell = silent) -> KernelPatch:
    """Return the verified patch of donor fork ``fork``, as the pipeline applies it (at its cache path).

    The cached copy is used when its digest is still the pinned one; otherwise the patch is read again from its
    location. Raises VerificationError when its sha256 is not the pinned one (nothing kept) or it is too large,
    ParseError when it is not a ``-p1`` unified diff, DownloadError/MissingError when it cannot be had.
    """
    donor = fork.donor
    assert donor is not None
    cached = paths.donor_patch_file(donor.sha256)
    data: bytes | None = None
    if host.exists(cached):
        kept = host.read_bytes(cached, limit=MAX_PATCH_BYTES + 1)
        if hashlib.sha256(kept).hexdigest() == donor.sha256:
            data = kept
    if data is None:
        data = _read(host, fork, donor, tell)
        digest = hashlib.sha256(data).hexdigest()
        if digest != donor.sha256:
            raise VerificationError(
                f"donor patch {donor.location} of fork {fork.name}: its sha256 is {digest}, but [forks.{fork.name}] "
                f"pins {donor.sha256}; not applied, nothing built",
                hint="the patch changed (or the download was tampered with): review it, then pin its new sha256 "
                f"in [forks.{fork.name}] of {paths.CONFIG_FILE}",
            )
        host.mkdir(paths.DONOR_PATCH_DIR)
        host.write_bytes(cached, data)
    try:
        parsed = parse_patch(donor.file_name, cached, data)
    except ParseError as e:
        raise ParseError(f"donor patch {donor.location}", e.field, e.detail) from e
    # a donor patch is for every kernel: a "Kernels:" line in its leading text is not fwman's to read here
    return KernelPatch(parsed.name, cached, None, parsed.files, parsed.sha256, origin=donor.location)
