"""A failed build's report names its first real cause, read from the whole log (issue 39, "a failure names its
cause"). The logs are cut from real builds of the stand-in fork tree on this machine (make 4.3, gcc 12, dash):
one on a PATH without g++, one against Debian's 6.1.0-57 headers without the compat patch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.driver.build.failure import CAUSES, parse_build_failure

TREE = "/var/cache/fwman/build/6.1.0-57-amd64"

#: `make modules` on a PATH without g++ (the start of the kernel-independent step; 3,000 lines of CC before it in
#: the real fork's log, where the field report found it at line 829)
NO_GPP = f"""\
$ make -j2 --output-sync=target modules KERNEL_UNAME=6.1.0-47-amd64
make[1]: Entering directory '{TREE}/src/nvidia'
 [ nvidia            ]  CC           nv-rm-core.c
 [ nvidia            ]  CC           rm-bar1.c
make[1]: Leaving directory '{TREE}/src/nvidia'
make[1]: Entering directory '{TREE}/src/nvidia-modeset'
 [ nvidia-modeset    ]  CC           nvkms-core.c
 [ nvidia-modeset    ]  CXX          dp_auxretry.cpp
/bin/sh: 1: g++: not found
make[1]: *** [../common/inc/nv-ki.mk:37: _out/Linux_x86_64/dp_auxretry.o] Error 127
make[1]: Leaving directory '{TREE}/src/nvidia-modeset'
make: *** [Makefile:25: src/nvidia-modeset/_out/Linux_x86_64/nv-modeset-kernel.o] Error 2
make: *** Waiting for unfinished jobs....
"""

#: kernel-open of the stand-in against the four-argument pci_resize_resource() (gcc's quotes in a UTF-8 locale)
FOUR_ARGS = f"""\
make[1]: Entering directory '{TREE}/kernel-open'
 CONFTEST: base
 CONFTEST: pci_rebar_get_possible_sizes
  CC [M]  {TREE}/kernel-open/nvidia/nv.o
  CC [M]  {TREE}/kernel-open/nvidia/nv-pci.o
{TREE}/kernel-open/nvidia/nv-pci.c: In function ‘nv_resize_pcie_bars’:
{TREE}/kernel-open/nvidia/nv-pci.c:26:9: error: too few arguments to function ‘pci_resize_resource’
   26 |     r = pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size);
      |         ^~~~~~~~~~~~~~~~~~~
make[3]: *** [/usr/src/linux-headers-6.1.0-57-common/scripts/Makefile.build:250: nvidia/nv-pci.o] Error 1
"""


def test_a_missing_g_plus_plus_is_the_cause_not_makes_last_line() -> None:
    f = parse_build_failure(NO_GPP, TREE)
    assert (f.cause, f.tool) == ("missing-tool", "g++")
    assert f.message == "g++: command not found (making src/nvidia-modeset/_out/Linux_x86_64/dp_auxretry.o)"
    assert f.phase == "kernel-independent objects"
    assert f.hint == "install it: apt install g++"
    assert "/bin/sh: 1: g++: not found" in f.excerpt


def test_the_cause_is_found_however_deep_in_the_log() -> None:
    noise = "".join(f" [ nvidia            ]  CC           rm-part{i}.c\n" for i in range(3000))
    tail = "make: *** [Makefile:219: _out/Linux_x86_64/dp_auxretry.o] Error 127\n" * 3
    f = parse_build_failure(noise + "/bin/sh: 1: g++: not found\n" + noise + tail)
    assert (f.cause, f.tool) == ("missing-tool", "g++")


def test_a_compiler_error_names_file_line_and_phase() -> None:
    f = parse_build_failure(FOUR_ARGS, TREE)
    assert (f.file, f.line, f.cause) == ("kernel-open/nvidia/nv-pci.c", 26, "compile-error")
    assert f.message == "too few arguments to function ‘pci_resize_resource’"
    assert f.phase == "kernel-open" and f.tool is None and f.hint is None


def test_the_first_cause_wins_over_a_later_one() -> None:
    f = parse_build_failure(FOUR_ARGS + NO_GPP, TREE)
    assert f.cause == "compile-error" and f.line == 26
    f = parse_build_failure(NO_GPP + FOUR_ARGS, TREE)
    assert f.cause == "missing-tool"


def test_other_shells_make_and_the_compiler_driver_saying_a_command_is_missing() -> None:
    said = {
        "bash: line 1: g++: command not found": "g++",
        "/bin/bash: xz: command not found": "xz",
        "sh: 1: objcopy: not found": "objcopy",
        "make[2]: g++: No such file or directory": "g++",
        "make: ld: Command not found": "ld",
        "cc: fatal error: cannot execute ‘as’: execvp: No such file or directory": "as",
        "gcc-12: fatal error: cannot execute 'cc1plus': execvp: No such file or directory": "cc1plus",
    }
    for line, tool in said.items():
        f = parse_build_failure(f"x\n{line}\nmake: *** [Makefile:1: x] Error 127\n")
        assert (f.cause, f.tool) == ("missing-tool", tool), line
    assert parse_build_failure("as: not here\n").cause != "missing-tool"


def test_a_missing_header_and_a_cxx_error_in_a_sub_make() -> None:
    log = (
        f"make[1]: Entering directory '{TREE}/src/nvidia-modeset'\n"
        " [ nvidia-modeset    ]  CXX          dp_auxretry.cpp\n"
        "dp_auxretry.cpp:6:10: fatal error: nv-missing.h: No such file or directory\n"
    )
    f = parse_build_failure(log, TREE)
    assert (f.file, f.line, f.cause) == ("src/nvidia-modeset/dp_auxretry.cpp", 6, "missing-header")
    assert f.message == "nv-missing.h: No such file or directory"
    cxx = log.replace("fatal error: nv-missing.h: No such file or directory", "error: 'AuxRetry' was not declared")
    f = parse_build_failure(cxx, TREE)
    assert (f.file, f.cause) == ("src/nvidia-modeset/dp_auxretry.cpp", "compile-error")
    assert f.message == "'AuxRetry' was not declared"


def test_weaker_signs_when_there_is_no_cause_line() -> None:
    assert parse_build_failure("foo\nmake: *** [Makefile:34: modules] Error 2\n").cause == "make"
    assert parse_build_failure("conftest: cannot compile against the kernel headers in /x\n").cause == "conftest"
    header = parse_build_failure("<command-line>: fatal error: /x/kconfig.h: No such file or directory\n")
    assert header.cause == "missing-header"
    assert parse_build_failure('ERROR: modpost: "x" undefined!\n').cause == "link-error"
    assert parse_build_failure("").cause == "unknown"


_NOISE = st.text(alphabet=st.sampled_from("abc []/._-0123456789CX"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_NOISE, max_size=30),
    st.lists(_NOISE, max_size=30),
    st.sampled_from(["g++", "gcc", "xz", "objcopy", "make", "python3"]),
)
def test_an_injected_missing_command_is_always_the_cause(before: list[str], after: list[str], tool: str) -> None:
    """Lines without a colon can never be a cause, so the one shell line decides, wherever it is."""
    log = "\n".join([*before, f"/bin/sh: 1: {tool}: not found", *after])
    f = parse_build_failure(log)
    assert (f.cause, f.tool) == ("missing-tool", tool)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600), st.one_of(st.none(), st.text(max_size=20)))
def test_any_log_gives_a_failure_never_an_exception(log: str, tree: str | None) -> None:
    f = parse_build_failure(log, tree)
    assert f.message and f.cause in CAUSES
    assert (f.tool is None) == (f.cause != "missing-tool")


#: the pre-flight's build against trixie's 6.12.118 headers unpacked on a root without libelf (the trixie story:
#: tests/story/test_trixie_kernels.py): kbuild's objtool cannot start, and make's next lines only say "Deleting"
NO_LIBELF = f"""\
make -C {TREE}/root/usr/src/linux-headers-6.12.118+deb13-common M={TREE}/kernel-open modules
  CC [M]  {TREE}/kernel-open/nvidia/nv-pci.o
  CC [M]  {TREE}/kernel-open/nvidia-modeset/nvidia-modeset-linux.o
make[5]: *** Deleting file '{TREE}/kernel-open/nvidia.o'
  LD [M]  {TREE}/kernel-open/nvidia.o
./tools/objtool/objtool: error while loading shared libraries: libelf.so.1: cannot open shared object file: No \
such file or directory
make[5]: *** [{TREE}/root/usr/src/linux-headers-6.12.118+deb13-common/scripts/Makefile.build:430: \
{TREE}/kernel-open/nvidia.o] Error 127
"""


def test_a_program_of_the_build_without_its_library_is_named_with_the_library() -> None:
    failure = parse_build_failure(NO_LIBELF, TREE)
    assert (failure.cause, failure.library, failure.file) == ("missing-library", "libelf.so.1", None)
    assert failure.message == "objtool cannot run: libelf.so.1 is not installed"
    assert failure.hint == "install the package that provides libelf.so.1 (`apt-file search libelf.so.1` names it)"
    assert "missing-library" in CAUSES
