"""Build once per fleet: a kernel's installed patched modules as a bundle, and the import that checks it.

DKMS has ``mktarball``/``ldtarball`` and akmods builds kmod packages; fwman's equivalent is a bundle: one
uncompressed tar file (``fwman modules export --kernel KVER -o FILE``) holding

* ``bundle.json``: schema ``fwman.modules-bundle/1``, the kernel release and ``vermagic``, fork, branch, commit,
  source, compiler, the modules' signature state, and per module its SHA-256 and size;
* ``modules/<name>.ko``: the five modules exactly as installed;
* ``bundle.json.sig`` (optional): an Ed25519 signature over the exact bytes of ``bundle.json``, in fwman's
  signature format (:mod:`fwman.core.signing`, which the catalog uses too), so it covers every module through
  their hashes.

One module per reason to change:

- :mod:`.format`: the file format and ``bundle.json`` (pure: bytes in, a :class:`~.format.Bundle` out);
- :mod:`.export`: a host's installed, verified modules made into a bundle;
- :mod:`.trust`: which bundle signatures a host accepts (``/etc/fwman/bundle-keys.d/*.pub``: a fleet owner
  signs their own bundles, deliberately not with the catalog's keys);
- :mod:`.install`: the import: refuses a bundle for another kernel, a module whose hash or ``vermagic`` does not
  match, a bundle whose signature the trust check refuses, and unsigned modules on a host with Secure Boot on
  and no signing key; then installs through the same staged install, ``depmod``, verification, manifest and
  boot-safety check as a build (:mod:`fwman.driver.build.install`, :func:`fwman.driver.boot.pin.ensure_safe_boot`);
  the manifest's ``source`` says ``imported from ...``.
"""
