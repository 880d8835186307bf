#!/usr/bin/python
# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""fwman.p2p.patched_modules: P2P-patched NVIDIA modules present (built, installed, verified) per kernel."""

from __future__ import annotations

DOCUMENTATION = r"""
module: patched_modules
short_description: Make sure the P2P-patched NVIDIA kernel modules are built and in effect for the kernels
version_added: "0.1.0"
description:
  - Reads C(fwman modules status --json). A kernel needs a build when its modules are not safe to boot
    (missing, replaced, failed before) or were built from another source than the one asked for.
  - Builds only those kernels, with C(fwman modules build --json); C(changed) only when something was built
    and installed. A failed build fails the task with fwman's first compiler error, the failing file and the
    build log's path; kernels that did build stay built.
  - The source (a fork and branch, or a local tree) is remembered by fwman for the kernel hook.
options:
  kernels:
    description: Kernel releases to build for. With neither this nor O(all_kernels), the kernel that boots next.
    type: list
    elements: str
    default: []
  all_kernels:
    description: Every installed kernel that has headers (C(fwman modules build --all)).
    type: bool
    default: false
  fork:
    description: The P2P fork, a configured name (C(aikitoria)), C(owner/name) on GitHub or a git URL.
    type: str
  branch:
    description: Branch of O(fork), for example C(570.86.16-p2p).
    type: str
  source:
    description: A local open-gpu-kernel-modules tree to build instead of a fork branch (a host path).
    type: str
  force:
    description: Rebuild the kernels even when their modules are in effect, and retry builds that failed before.
    type: bool
    default: false
  jobs:
    description: Parallel make jobs (default all CPUs).
    type: int
extends_documentation_fragment:
  - fwman.p2p.common
attributes:
  check_mode:
    support: full
    details: Returns RV(would_build), the kernels a real run would build; builds nothing.
  diff_mode:
    support: full
    details: Per kernel, the modules' state and source before and after.
notes:
  - Without O(fork)/O(branch) or O(source), fwman builds from the source it remembered (C(/etc/fwman/config.toml)
    or the last build); the task fails when there is none.
author:
  - fwman contributors
"""

EXAMPLES = r"""
- name: Patched modules for every kernel with headers, from the fork branch
  fwman.p2p.patched_modules:
    all_kernels: true
    fork: aikitoria/open-gpu-kernel-modules
    branch: 570.86.16-p2p

- name: A local tree, one kernel
  fwman.p2p.patched_modules:
    kernels: ["6.1.0-50-amd64"]
    source: /usr/local/src/open-gpu-kernel-modules
"""

RETURN = r"""
would_build:
  description: Kernels a build is needed for (in check mode nothing is built).
  returned: always
  type: list
  elements: str
  sample: ["6.1.0-50-amd64"]
results:
  description: The C(kernels) rows of C(fwman.modules-build/2) (status, message, log, failure, source).
  returned: when a build ran
  type: list
  elements: dict
failures:
  description: Per failed kernel, fwman's failing file, line, first error and build log.
  returned: when a build failed
  type: list
  elements: dict
status:
  description: The C(fwman.modules-status/1) document after the task.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fwman.p2p.plugins.module_utils.fwman import COMMON_ARGS, Fwman


def same_source(remembered, params):
    """Return True when the remembered source spec is the one asked for (or none is asked for)."""
    if params["source"]:
        return bool(remembered) and remembered.get("source") == params["source"]
    if params["fork"]:
        if not remembered or remembered.get("branch") != params["branch"]:
            return False
        fork = remembered.get("fork") or ""
        return fork == params["fork"] or params["fork"] in fork
    return True


def view(doc, kernels):
    """Return {kernel: state line} of a modules-status document, for the diff."""
    rows = {r["kernel"]: r for r in doc.get("kernels") or []}
    out = {}
    for k in kernels:
        r = rows.get(k)
        if r is None:
            out[k] = "not installed"
        else:
            origin = r.get("branch") or r.get("commit") or "-"
            out[k] = f"{r.get('modules')} ({origin}); safe to boot: {'yes' if r.get('safe_to_boot') else 'no'}"
    return out


def failure_message(row):
    """Return the person-readable line for one failed kernel of a modules-build document."""
    f = row.get("failure") or {}
    where = ""
    if f.get("file"):
        where = f"{f['file']}:{f['line']}: " if f.get("line") else f"{f['file']}: "
    error = f.get("error") or row.get("message") or row.get("status")
    log = f"; build log: {row['log']}" if row.get("log") else ""
    return f"{row.get('kernel')}: {where}{error}{log}"


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        kernels={"type": "list", "elements": "str", "default": []},
        all_kernels={"type": "bool", "default": False},
        fork={"type": "str"},
        branch={"type": "str"},
        source={"type": "str"},
        force={"type": "bool", "default": False},
        jobs={"type": "int"},
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        mutually_exclusive=[("source", "fork"), ("source", "branch")],
        required_together=[("fork", "branch")],
    )
    p = module.params
    fwman = Fwman(module)
    before, _ = fwman.json("modules-status", "modules", "status")
    rows = {r["kernel"]: r for r in before.get("kernels") or []}
    if p["all_kernels"] and p["kernels"]:
        module.fail_json(msg="give kernels or all_kernels, not both")
    if p["all_kernels"]:
        targets = [k for k, r in rows.items() if r.get("headers")]
    elif p["kernels"]:
        targets = list(p["kernels"])
    else:
        nxt = (before.get("next_boot") or {}).get("kernel")
        targets = [nxt] if nxt else []
    if not targets:
        module.fail_json(msg="no kernel to build for: none installed with headers (see `fwman modules status`)")
    missing = [k for k in targets if k not in rows]
    if missing:
        module.fail_json(msg=f"kernel {missing[0]} is not installed on this host (no /lib/modules/{missing[0]})")
    if not (p["source"] or p["fork"] or before.get("source")):
        module.fail_json(
            msg="no module source: give fork and branch, or source (fwman remembers it for the kernel hook)"
        )
    matches = same_source(before.get("source"), p)
    todo = [k for k in targets if p["force"] or not matches or not rows[k].get("safe_to_boot")]
    result = {"changed": bool(todo), "would_build": todo, "status": before}
    if not todo or module.check_mode:
        if todo:
            result["diff"] = {"before": view(before, todo), "after": {k: "would build" for k in todo}}
        module.exit_json(**result)
    argv = ["modules", "build"]
    for k in todo:
        argv += ["--kernel", k]
    if p["source"]:
        argv += ["--source", p["source"]]
    elif p["fork"]:
        argv += ["--fork", p["fork"], "--branch", p["branch"]]
    if p["force"]:
        argv.append("--force")
    if p["jobs"]:
        argv += ["-j", str(p["jobs"])]
    built, _ = fwman.json("modules-build", *argv, ok=(0, 4, 5, 6))
    after, _ = fwman.json("modules-status", "modules", "status")
    results = built.get("kernels") or []
    done = [r for r in results if r.get("status") == "built"]
    bad = [r for r in results if r.get("status") != "built"]
    result.update(changed=bool(done), results=results, status=after, boot=built.get("boot"))
    result["diff"] = {"before": view(before, todo), "after": view(after, todo)}
    if bad:
        result["failures"] = [
            {"kernel": r.get("kernel"), "status": r.get("status"), "log": r.get("log"), **(r.get("failure") or {})}
            for r in bad
        ]
        first = failure_message(bad[0])
        more = f" (and {len(bad) - 1} more kernel(s))" if len(bad) > 1 else ""
        module.fail_json(msg=f"patched modules did not build for {first}{more}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
