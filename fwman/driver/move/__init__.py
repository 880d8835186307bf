"""A driver version move: the patched modules for every kernel and the NVIDIA user space, from one version to
another together, with a way back.

The move is a list of actions (:mod:`fwman.host.actions`), in three parts, so that a refusal changes nothing and a
rollback restores the previous set exactly:

1. **stage**: the new version's modules are built for every installed kernel (in a build directory and log of
   the move's own, against each kernel's installed headers) and staged in ``/var/lib/fwman/move/staged``; the
   new user-space packages are downloaded (``apt-get download NAME=VERSION``) next to them, and the installed
   ones too (into ``kept/debs``: the way back must not depend on the repository still offering them). A build
   that fails for one kernel stops the move here: the use case removes what was staged and nothing else was
   touched.
2. **keep**: every file the commit changes (the modules of each kernel and fwman's copy of them, the
   manifests, the depmod override, the module source record, the user-space hold's three files) is copied,
   bytes and mode (or "absent"), into ``kept/`` with an index.
3. **commit**: the staged modules installed (staged, swapped in, depmod), the user space installed from the
   downloaded packages, the hold moved to the new versions, the module source record pointing at the new
   branch (a later kernel's hook builds the new version), and the move record written.

The reboot is the owner's. ``--rollback`` installs the kept packages, writes the kept files back (or removes
those that were absent), runs depmod, and records the rollback; the kept set stays until the owner ends the move.
The record (``/var/lib/fwman/driver-move.json``) says from, to and the stage; the boot-time catch-up reads it to
name the rollback when the new module is not the one loaded (:func:`fwman.driver.move.record.boot_note`).

The modules, by job (each imports only those above it in this list):

- ``record``: where the move's working set lies, the refusal, the record and its stages, the boot-time note
- ``packages``: the user-space packages: apt's versions and listings, their download and install
- ``stage``: the new modules built for a kernel and staged
- ``keep``: the files the commit changes, kept before it
- ``runfile``: NVIDIA's ``.run`` installer, staged and run in container roots with a user space of their own
- ``commit``: the staged modules installed; where the move's time went
- ``rollback``: the kept set put back

This package's own module imports nothing: the boot-time catch-up imports only ``record``.
"""
