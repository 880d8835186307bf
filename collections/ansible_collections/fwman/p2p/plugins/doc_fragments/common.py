# Copyright: fwman contributors
# MIT License (see the LICENSE of the fwman repository)
"""The options every fwman.p2p module takes."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  fwman_bin:
    description:
      - Path of the C(fwman) executable on the managed host.
      - Found on C(PATH) when not given.
    type: path
  root:
    description:
      - Treat this directory of the managed host as C(/) (C(fwman --root)).
      - For tests and image builds; every host path fwman reads or writes is mapped under it.
    type: path
  snapshot:
    description:
      - Work on a host recorded by C(fwman capture) instead of the managed host (C(fwman --snapshot)).
      - Read-only modules only; a changing module refuses to run on a snapshot.
    type: path
requirements:
  - fwman on the managed host (C(pip install fwman)); it is run with C(--json) and its versioned documents are read.
"""
