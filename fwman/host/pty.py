"""Drive an interactive tool through a pseudo-terminal: nvflash reads its ``y`` confirmation from the terminal.

Piped stdin is reported to fail with nvflash (the design notes' docs/vbios.md, section 4), so fwman gives it a real
terminal (``pty.fork``), answers the prompts it expects and nothing else, streams the output to a callback, and
defers Ctrl-C while the tool writes: a SIGINT received meanwhile is remembered and reported once the tool exits.
Reached through ``Host.run_interactive`` (``LiveHost``); a snapshot or a recording refuses it.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from fwman.core.errors import FwmanError

#: seconds of silence after a prompt before fwman types its answer
SETTLE = 0.2


@dataclass(frozen=True)
class PtyResult:
    """What the tool did: its whole output, exit status (or the signal that killed it), and what happened to us."""

    output: str
    rc: int | None
    signal: int | None
    timed_out: bool
    interrupted: bool  # a Ctrl-C arrived while it ran (deferred)
    answered: tuple[str, ...]


def run_in_pty(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    answers: Sequence[tuple[str, str]],
    on_output: Callable[[str], None] | None = None,
    timeout: float = 600.0,
    defer_sigint: bool = True,
) -> PtyResult:
    """Run ``argv`` on a new pseudo-terminal and return its result.

    ``answers`` pairs a prompt text with the reply typed when it appears (each answered once, in order).
    Raises FwmanError when the program cannot be started.
    """
    interrupted = threading.Event()
    previous = None
    if defer_sigint and threading.current_thread() is threading.main_thread():

        def _remember(signum: int, frame: FrameType | None) -> None:
            interrupted.set()

        previous = signal.signal(signal.SIGINT, _remember)
    try:
        return _run(argv, env, answers, on_output, timeout, interrupted)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _run(
    argv: Sequence[str],
    env: Mapping[str, str],
    answers: Sequence[tuple[str, str]],
    on_output: Callable[[str], None] | None,
    timeout: float,
    interrupted: threading.Event,
) -> PtyResult:
    if not os.access(argv[0], os.X_OK):
        raise FwmanError(f"cannot run {argv[0]}: not an executable file")
    pid, fd = pty.fork()
    if pid == 0:  # child: a new session with the pty as its controlling terminal
        try:
            os.execve(argv[0], list(argv), dict(env))
        finally:
            os._exit(127)
    chunks: list[str] = []
    pending = list(answers)
    answered: list[str] = []
    seen = ""
    deadline = time.monotonic() + timeout
    timed_out = False
    due: float | None = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                break
            if due is not None and time.monotonic() >= due:
                # answer once the tool has gone quiet after its prompt: a tool that switches the terminal
                # mode after printing may discard keys typed earlier
                prompt, reply = pending.pop(0)
                os.write(fd, reply.encode())
                answered.append(prompt)
                due = None
            # a signal (the deferred Ctrl-C) does not interrupt select, read or waitpid: Python retries them (PEP 475)
            ready, _, _ = select.select([fd], [], [], min(left, SETTLE if due is not None else 1.0))
            if not ready:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal (exited)
                break
            if not data:
                break
            text = data.decode("utf-8", errors="replace")
            chunks.append(text)
            seen += text
            if on_output is not None:
                on_output(text)
            if pending and due is None and pending[0][0] in seen:
                seen = seen.split(pending[0][0], 1)[1]
                due = time.monotonic() + SETTLE
            elif due is not None:
                due = time.monotonic() + SETTLE  # still talking: wait for it to settle
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return PtyResult("".join(chunks), rc, sig, timed_out, interrupted.is_set(), tuple(answered))
