#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.module_bundle: build once per fleet (export a kernel's patched modules, import them elsewhere)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: module_bundle
short_description: Export a kernel's verified patched modules as a bundle, or import a bundle built elsewhere
version_added: "0.1.0"
description:
  - C(state=exported) runs C(fwman modules export --kernel KERNEL -o PATH --json). When PATH already holds a
    bundle of the same modules (same kernel, commit and module hashes) signed the same way (unsigned, or by the
    key of O(sign_key)), nothing is written (C(changed=false)).
  - C(state=imported) runs C(fwman modules import PATH --json), which checks the kernel release, vermagic,
    every module's SHA-256, the signature when the host trusts bundle keys (C(/etc/fwman/bundle-keys.d/)) and
    Secure Boot, then installs through the same staged install, depmod, manifest and boot-safety path as a
    build. A bundle whose modules are already in effect changes nothing.
  - Bundle files are paths on the managed host (not under O(root)).
options:
  state:
    description: Export (on the build host) or import (on the others).
    type: str
    choices: [exported, imported]
    required: true
  path:
    description: The bundle file on the managed host.
    type: path
    required: true
  kernel:
    description: Kernel release whose modules to export (O(state=exported)).
    type: str
  sign_key:
    description: Ed25519 private key (PEM) on the managed host to sign the bundle with (O(state=exported)).
    type: path
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Export compares a fresh bundle with PATH in a temporary file; import runs C(--dry-run), which checks
      everything and installs nothing.
  diff_mode:
    support: none
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: On the build host
  fwman.p2p.module_bundle:
    state: exported
    kernel: 6.1.0-50-amd64
    path: /var/tmp/p2p-6.1.0-50.fwbundle

- name: On every other host of the group
  fwman.p2p.module_bundle:
    state: imported
    path: /var/tmp/p2p-6.1.0-50.fwbundle
"""

RETURN = r"""
bundle:
  description: What the bundle holds (kernel, vermagic, fork, branch, commit, compiler, signature, module hashes).
  returned: always
  type: dict
checks:
  description: The checks the import passed, one line each.
  returned: state=imported
  type: list
  elements: str
import_status:
  description: C(imported), C(current) (already in effect) or C(would-import) (check mode).
  returned: state=imported
  type: str
"""

import json
import os
import tarfile
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman

IDENTITY = ("kernel", "vermagic", "commit", "modules", "signed", "signer")


def _signature_key(tar):
    """Return the key id bundle.json.sig names in ``tar``, or None when the bundle is unsigned."""
    try:
        handle = tar.extractfile("bundle.json.sig")
    except KeyError:
        return None
    sig = json.loads(handle.read()) if handle else None
    return sig.get("key_id") if isinstance(sig, dict) else None


def identity_of_file(path):
    """Return the identity of the bundle at ``path`` (bundle.json's identity fields and the key its signature
    names), or None when it is not one. The signature counts: a bundle on disk unsigned, or signed by another
    key, is not the bundle asked for when sign_key is given (or dropped)."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            handle = tar.extractfile("bundle.json")
            doc = json.loads(handle.read()) if handle else None
            key = _signature_key(tar)
    except (OSError, KeyError, ValueError, tarfile.TarError):
        return None
    if not isinstance(doc, dict):
        return None
    return {**{k: doc.get(k) for k in IDENTITY}, "signature_key": key}


def export(module, fwman):
    p = module.params
    if not p["kernel"]:
        module.fail_json(msg="state=exported needs kernel (the kernel release whose modules to export)")
    target = p["path"]
    directory = os.path.dirname(target) or "."
    if not os.path.isdir(directory):
        module.fail_json(msg=f"the directory of {target} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".fwman-bundle.", dir=directory)
    os.close(fd)
    try:
        argv = ["modules", "export", "--kernel", p["kernel"], "-o", tmp]
        if p["sign_key"]:
            argv += ["--key", p["sign_key"]]
        doc, _ = fwman.json("modules-export", *argv)
        fresh = {**{k: doc.get(k) for k in IDENTITY}, "signature_key": doc.get("signature_key")}
        existing = identity_of_file(target) if os.path.exists(target) else None
        if existing == fresh:
            module.exit_json(changed=False, bundle=doc, path=target)
        if module.check_mode:
            module.exit_json(changed=True, bundle=doc, path=target)
        os.replace(tmp, target)
        doc["file"] = target
        module.exit_json(changed=True, bundle=doc, path=target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def import_(module, fwman):
    path = module.params["path"]
    if not os.path.isfile(path):
        module.fail_json(msg=f"bundle file {path} does not exist on this host (copy it here first)")
    plan, _ = fwman.json("modules-import", "modules", "import", path, "--dry-run")
    if plan["status"] == "current" or module.check_mode:
        module.exit_json(
            changed=plan["status"] != "current", import_status=plan["status"], bundle=plan["bundle"],
            checks=plan["checks"], message=plan["message"],
        )
    done, _ = fwman.json("modules-import", "modules", "import", path)
    module.exit_json(
        changed=done["status"] == "imported", import_status=done["status"], bundle=done["bundle"],
        checks=done["checks"], message=done["message"], boot=done.get("boot"),
    )


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        state={"type": "str", "choices": ["exported", "imported"], "required": True},
        path={"type": "path", "required": True},
        kernel={"type": "str"},
        sign_key={"type": "path"},
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    fwman = Fwman(module)
    if module.params["state"] == "exported":
        export(module, fwman)
    else:
        import_(module, fwman)


if __name__ == "__main__":
    main()
