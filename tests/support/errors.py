"""What a refused input must look like on stderr: one ``fwman: error:`` line, a hint at most, no traceback."""

from __future__ import annotations

from tests.support.env import Result


def one_error_line(result: Result) -> str:
    """Return the ``fwman: error:`` line of ``result``; assert it is the only one, with at most a hint after it,
    and that no traceback or ``unexpected`` error leaked out."""
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("fwman: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in errors[0], result.stderr
    assert all(line.startswith(("fwman: error:", "  hint:")) for line in lines), result.stderr
    return errors[0]
