# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""Running fwman on the managed host and reading its versioned ``--json`` documents (never its text output)."""

from __future__ import annotations

import json

#: the options every module of the collection takes (documented in the ``fwman.p2p.common`` fragment)
COMMON_ARGS = {
    "fwman_bin": {"type": "path"},
    "root": {"type": "path"},
    "snapshot": {"type": "path"},
}

#: the version of each fwman document the collection reads (fwman's docs/json.md): a document of another
#: version has other names, and is refused rather than misread
SCHEMAS = {
    "apply-check": 1, "audit": 1, "doctor": 2, "dkms-status": 1, "hooks-status": 1, "modules-build": 2, "modules-export": 1,
    "modules-import": 1, "modules-status": 1, "plan": 1, "scan": 2, "upgrade-apply": 2, "upgrade-plan": 2,
}  # fmt: skip


def short_error(stderr, fallback):
    """Return fwman's own error line and hint (``fwman: error: ...`` / ``hint: ...``) as one message."""
    message, hint = None, None
    for line in (stderr or "").splitlines():
        text = line.strip()
        if text.startswith("fwman: error:") and message is None:
            message = text[len("fwman: error:") :].strip()
        elif text.startswith("hint:") and message is not None and hint is None:
            hint = text[len("hint:") :].strip()
    if message is None:
        tail = [ln for ln in (stderr or "").splitlines() if ln.strip()]
        message = tail[-1].strip() if tail else fallback
    return f"{message} (hint: {hint})" if hint else message


class Fwman:
    """fwman on the managed host: ``run`` a command, or read one command's JSON document."""

    def __init__(self, module):
        self.module = module
        params = module.params
        self.bin = params.get("fwman_bin") or module.get_bin_path("fwman", required=False)
        if not self.bin:
            module.fail_json(
                msg="fwman is not installed on this host (not on PATH)",
                hint="install it (pip install fwman, or the role fwman.p2p.p2p_host with fwman_install: true), "
                "or set fwman_bin to its path",
            )
        self.global_args = []
        if params.get("root"):
            self.global_args += ["--root", params["root"]]
        if params.get("snapshot"):
            self.global_args += ["--snapshot", params["snapshot"]]
        self.calls = []

    def argv(self, *args):
        """Return the command line for ``fwman ARGS`` with the host options (--root/--snapshot) first."""
        return [self.bin, *self.global_args, *args]

    def run(self, *args):
        """Run ``fwman ARGS``; return (exit status, stdout, stderr)."""
        argv = self.argv(*args)
        self.calls.append(argv)
        # LANG=C: fwman's output does not depend on it, but tools it runs (depmod, make) print their errors
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C", "NO_COLOR": "1"})
        return rc, out, err

    def json(self, kind, *args, ok=(0,), fail=True):
        """Return the ``fwman.<kind>/<version>`` document printed by ``fwman ARGS --json`` (the version of
        :data:`SCHEMAS`).

        A non-zero exit in ``ok`` is accepted; any other failure (or a missing or wrong document, or one of
        another version) fails the task with fwman's own error message, unless ``fail`` is False (then None and
        the message are returned).
        """
        rc, out, err = self.run(*args, "--json")
        doc = None
        try:
            doc = json.loads(out) if out.strip() else None
        except ValueError:
            doc = None
        want = f"fwman.{kind}/{SCHEMAS[kind]}"
        schema = doc.get("schema") if isinstance(doc, dict) else None
        if schema == want and rc in ok:
            return doc, None
        if isinstance(schema, str) and schema.startswith(f"fwman.{kind}/"):
            message = (f"fwman printed {schema}, and this collection reads {want}: install the collection that "
                       "matches this fwman (or this fwman's version of it)")
        else:
            message = short_error(err, f"fwman {' '.join(args)} exited {rc}")
        if not fail:
            return None, message
        self.module.fail_json(
            msg=f"fwman {' '.join(args)} failed: {message}", rc=rc, stderr=err, stdout=out, cmd=self.argv(*args)
        )
        return None, message  # not reached: fail_json exits


def normalize_bus(bus):
    """Return a PCI address with its domain and in lower case (``41:00.0`` -> ``0000:41:00.0``)."""
    text = str(bus).strip().lower()
    return text if text.count(":") == 2 else f"0000:{text}"
