"""git's error kept whole, bounded (issue 23, row 3): the end of stderr, never only its last line."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.driver.git import MAX_BYTES, MAX_LINES, failure_text, stderr_tail

GIT_SAYS = (
    "fatal: '/srv/git/open-gpu-kernel-modules' does not appear to be a git repository\n"
    "fatal: Could not read from remote repository.\n\n"
    "Please make sure you have the correct access rights\nand the repository exists.\n"
)


def test_the_whole_reason_is_kept_not_its_last_line() -> None:
    assert stderr_tail(GIT_SAYS).splitlines() == [
        "fatal: '/srv/git/open-gpu-kernel-modules' does not appear to be a git repository",
        "fatal: Could not read from remote repository.",
        "Please make sure you have the correct access rights",
        "and the repository exists.",
    ]
    assert failure_text("git fetch", 128, GIT_SAYS).startswith("git fetch failed (exit 128):\n  fatal: '/srv/git/")
    assert failure_text("git fetch", 1, "") == "git fetch failed (exit 1, git printed nothing)"


def test_a_long_error_keeps_its_end_and_says_it_was_cut() -> None:
    text = "".join(f"remote: line {i}\n" for i in range(500))
    tail = stderr_tail(text).splitlines()
    assert tail[0] == "[...]" and tail[-1] == "remote: line 499" and len(tail) == MAX_LINES + 1
    huge = "x" * 10_000 + "\nfatal: the end\n"
    assert stderr_tail(huge).endswith("fatal: the end") and len(stderr_tail(huge).encode()) <= MAX_BYTES + 6


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=6000))
def test_property_any_stderr_is_bounded(text: str) -> None:
    tail = stderr_tail(text)
    assert len(tail.splitlines()) <= MAX_LINES + 1
    assert len(tail.encode()) <= MAX_BYTES + len("[...]\n") + 4  # a cut multi-byte character may widen to U+FFFD
