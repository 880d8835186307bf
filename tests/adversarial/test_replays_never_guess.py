"""Replays never guess (issue 38, row 7): every command that reads a host, replayed on every bundled recording,
either finishes with its verdict or fails naming what it lacked; and a path the recording did not record is never
reported as absent (fwman saying "absent" for a file it never saw is a guess the recorded host may contradict)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fwman.core import errors
from fwman.core.errors import ExitCode
from tests.support.commands import CHANGES, all_commands
from tests.support.env import HOSTS, FwmanEnv

#: every command that reads the host, with the arguments it needs (the read-only form of a command that can change)
READS: list[tuple[str, ...]] = [
    ("scan",),
    ("audit", "--offline"),
    ("doctor",),
    ("driver", "settings"),
    ("driver", "power"),
    ("driver", "branches", "--offline"),
    ("modules", "status"),
    ("modules", "check-boot"),
    ("modules", "preflight", "--dry-run"),
    ("hooks", "status"),
    ("userspace", "status"),
    ("dkms", "status"),
    ("metrics", "write", "--stdout"),
    ("upgrade", "--dry-run"),
    ("upgrade", "--check"),
    ("backup", "list"),
    ("backup", "verify"),
    ("flash", "status"),
    ("flash", "history"),
    ("flash", "report", "--card", "0"),
    ("catalog", "list"),
    ("catalog", "show", "3842:3987"),
    ("catalog", "lint"),
    ("catalog", "keys", "show"),
    ("p2p",),  # the machine's own GPUs: refuses a replay, saying so (exit 2)
    ("driver", "move"),  # the last move's record
    ("plan",),  # a part whose files a recording lacks says "not known from this replay" with the path
    ("apply", "--check"),
]
#: commands that read no host (a file named on the command line, the machine being recorded, a catalog being
#: proposed or signed from files), with why
NO_HOST_READ = {
    ("capture",): "records the machine it runs on (--check reads a snapshot directory)",
    ("rom", "inspect"): "reads the FILE it is given",
    ("rom", "verify"): "reads the FILE it is given (and the card, as flash does: a change's gates)",
    ("catalog", "propose"): "reads the report files it is given",
    ("catalog", "keys", "sign"): "writes keys.json",
    ("catalog", "sign"): "writes the catalog index",
    ("catalog", "add-local"): "writes a local entry",
    ("modules", "export"): "writes a bundle file",
    ("modules", "forget"): "changes fwman's state (the removal hooks)",
    ("modules", "remove"): "removes modules",
    ("driver", "power", "--apply"): "",
    ("userspace", "hold"): "writes an apt pin",
    ("userspace", "release"): "removes fwman's apt pin",
}
RECORDINGS = sorted(p.parent for p in HOSTS.glob("*/snapshot.json"))
#: what a line says when it calls a path absent
ABSENT = re.compile(r"\b(absent|not present|not installed|missing|no such|not found)\b", re.IGNORECASE)


def _words(argv: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w for w in argv if not w.startswith("-") and re.fullmatch(r"[a-z][a-z0-9-]*", w))


def test_every_command_is_replayed_or_says_why_not() -> None:
    """A new command joins READS, or CHANGES (tests/adversarial/test_changes_and_replays.py: it refuses a replay),
    or NO_HOST_READ with the reason."""
    known = {_words(a) for a in READS} | {_words(a) for a in CHANGES} | set(NO_HOST_READ)
    runnable = [argv for argv, c in all_commands() if not c.hidden and (not hasattr(c, "commands") or
                getattr(c, "invoke_without_command", False))]  # fmt: skip
    assert [" ".join(a) for a in runnable if a not in known] == []


@pytest.mark.parametrize("argv", READS, ids=" ".join)
@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_a_replay_finishes_or_names_what_it_lacked_and_never_calls_an_unrecorded_path_absent(
    monkeypatch: pytest.MonkeyPatch, recording: Path, argv: tuple[str, ...]
) -> None:
    lacked: list[str] = []
    real_init = errors.NotRecordedError.__init__

    def noting(self: errors.NotRecordedError, message: str, *args: object, **kwargs: object) -> None:
        found = re.search(r"(?:did not record|only the size of)(?: the listing of)? (/\S*[^\s,.)])", message)
        if found:
            lacked.append(found.group(1))
        real_init(self, message, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(errors.NotRecordedError, "__init__", noting)
    r = FwmanEnv()("--snapshot", str(recording), *argv)
    assert r.code != ExitCode.ERROR and "Traceback" not in r.stderr, r.stderr
    if r.code in (ExitCode.USAGE, ExitCode.MISSING):  # it could not run here: one error line saying why
        assert len([line for line in r.stderr.splitlines() if line.startswith("fwman: error:")]) == 1, r.stderr
    guesses = [
        line
        for line in (r.stdout + r.stderr).splitlines()
        for path in set(lacked)
        if re.search(rf"{re.escape(path)}(?![\w/.-])", line) and ABSENT.search(line) and "not recorded" not in line
        and "did not record" not in line
    ]  # fmt: skip
    assert guesses == [], f"{recording.name}: {' '.join(argv)} called a path it never read absent"
    if argv != ("metrics", "write", "--stdout"):  # its --json is what it would write, not a document
        doc = FwmanEnv()("--snapshot", str(recording), *argv, "--json")
        assert doc.code == r.code, doc.stderr  # the same verdict in both forms
        if doc.code not in (ExitCode.USAGE, ExitCode.MISSING):
            assert doc.json()["schema"].startswith("fwman."), doc.stdout[:200]
