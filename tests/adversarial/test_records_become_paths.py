"""Issue 37, rows 1 and 2: fwman's own records are read back as the command line is read, because what they
hold becomes a path (a scratch directory removed afterwards) and an apt pin (which apt obeys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core import aptprefs, paths
from fwman.core.errors import ParseError
from tests.support.counting import CountingEnv, tried
from tests.support.errors import one_error_line
from tests.support.preflight import preflight_machine

HELD = "6.1.0-57-amd64"
PIN = paths.APT_KERNEL_PREFLIGHT_PIN.lstrip("/")
INJECTED = "\nPackage: openssh-server\nPin: version *\nPin-Priority: -1"


def _hold_record(root: Path, kernel: str, packages: dict[str, str], at: str = "2026-12-01T00:00:00+00:00") -> Path:
    entry = {"kernel": kernel, "packages": packages, "reason": "will not build", "at": at, "commit": None}
    record = root / paths.KERNEL_HOLD_STATE.lstrip("/")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"schema": "fwman.kernel-hold/1", "kernels": {kernel: entry}}))
    return record


@pytest.mark.parametrize("kernel", ["../../../../srv/data", "..", "6.1.0/../../../../../srv/data", "-rf"])
def test_a_hold_record_naming_a_path_removes_nothing(tmp_path: Path, kernel: str) -> None:
    run, root, _ = preflight_machine(tmp_path, env=CountingEnv)
    data = root / "srv/data"
    data.mkdir(parents=True)
    (data / "keep").write_text("the owner's data")
    _hold_record(root, kernel, {f"linux-image-{HELD}": "6.1.192-57"})
    r = run("modules", "preflight", "--root", str(root))
    assert (data / "keep").read_text() == "the owner's data"  # it was: /srv/data removed as a scratch directory
    assert r.code == 4, r.stderr
    assert f"{paths.KERNEL_HOLD_STATE}: kernels." in one_error_line(r) and "not a kernel release" in r.stderr
    assert not (root / paths.PREFLIGHT_DIR.lstrip("/")).exists() or not any(
        (root / paths.PREFLIGHT_DIR.lstrip("/")).iterdir()
    )


@pytest.mark.parametrize(
    ("packages", "at"),
    [
        ({f"linux-image-{HELD}": "6.1.192-57"}, "2026-12-01" + INJECTED),  # the date
        ({f"linux-image-{HELD}{INJECTED}": "6.1.192-57"}, "2026-12-01"),  # a package name
        ({f"linux-image-{HELD}": "6.1.192-57" + INJECTED}, "2026-12-01"),  # a version
    ],
)
def test_a_hold_record_never_writes_a_stanza_of_its_choosing(tmp_path: Path, packages: dict[str, str], at: str) -> None:
    run, root, _ = preflight_machine(tmp_path, env=CountingEnv)
    _hold_record(root, HELD, packages, at)
    r = run("modules", "preflight", "--hold", "--root", str(root))
    pin = root / PIN
    # it was: the pin gained "Package: openssh-server / Pin-Priority: -1", and apt stopped its security updates
    assert not pin.exists() or "openssh-server" not in pin.read_text()
    assert r.code == 4 and paths.KERNEL_HOLD_STATE in one_error_line(r), r.stderr


# -- the one writer of apt preferences -------------------------------------------------------------------------
@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=80))
def test_any_name_version_or_explanation_is_one_record_or_refused(name: str, version: str, why: str) -> None:
    tried()
    try:
        text = aptprefs.render([aptprefs.Pin((name,), "version", version, -1, explanation=why)]).decode()
    except ParseError:
        return
    lines = text.splitlines()
    assert [ln.split(":", 1)[0] for ln in lines] == ["Explanation", "Package", "Pin", "Pin-Priority"][4 - len(lines) :]
    assert lines[-3:] == [f"Package: {name}", f"Pin: version {version}", "Pin-Priority: -1"]
