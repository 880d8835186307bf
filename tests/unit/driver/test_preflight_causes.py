"""Which failed pre-flight builds say nothing about the kernel: this machine lacked what the build runs (a command,
a program's shared library), so the verdict is "could not check" and never a reason to hold the kernel."""

from __future__ import annotations

from fwman.driver import preflight as pf
from fwman.driver.build.failure import parse_build_failure

TREE = "/var/cache/fwman/preflight/6.12.118+deb13-amd64/build"
#: kbuild's objtool from header packages unpacked on a machine without libelf (the trixie story met it)
NO_LIBELF = (
    f"  LD [M]  {TREE}/kernel-open/nvidia.o\n"
    "./tools/objtool/objtool: error while loading shared libraries: libelf.so.1: cannot open shared object file: "
    "No such file or directory\n"
    f"make[5]: *** [scripts/Makefile.build:430: {TREE}/kernel-open/nvidia.o] Error 127\n"
)
NO_GPP = "/bin/sh: 1: g++: not found\nmake[1]: *** [nv-ki.mk:37: _out/Linux_x86_64/dp_auxretry.o] Error 127\n"
REFUSED = (
    f"make[1]: Entering directory '{TREE}/kernel-open'\n"
    f'{TREE}/kernel-open/nvidia/nv-pci.c:52:2: error: #error "this branch does not support this kernel release"\n'
    "make[1]: *** [Makefile:40: modules] Error 2\n"
)


def test_a_missing_library_or_command_is_this_machines_not_the_kernels() -> None:
    assert pf.machine_lacks(parse_build_failure(NO_LIBELF, TREE))
    assert pf.machine_lacks(parse_build_failure(NO_GPP, TREE))


def test_a_compile_error_is_the_kernels_and_no_failure_is_nothing() -> None:
    refused = parse_build_failure(REFUSED, TREE)
    assert refused.cause == "compile-error" and refused.file == "kernel-open/nvidia/nv-pci.c"
    assert not pf.machine_lacks(refused)
    assert not pf.machine_lacks(None)
