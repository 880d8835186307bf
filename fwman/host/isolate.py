"""Run one step of GPU work in a child process under a hard deadline: a hang becomes a result, never a hung fwman.

A CUDA or NCCL call that never returns (a peer copy over a broken mapping, an NCCL init that waits forever, a
``cuInit`` with an A10 on the 5090 driver) cannot be interrupted inside the process that made it. So each step
runs in a forked child; the child announces the step it is in (``step("timed copies")``) before each call that
may block, and sends its result back through a pipe. When the deadline passes the child is killed (SIGKILL) and
the caller gets :data:`HUNG` with the last step the child announced: the pair and the step that hung.

The child is forked, not spawned: the target (a closure over the GPU layer's factory) needs no pickling, only its
result does. The parent must not have initialised CUDA itself (a forked CUDA context is unusable), so the caller
opens the GPU layer inside the target. The deadline is real time (``time.monotonic``), like a pty's: a test's
fixed clock must not stall a hung child.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from fwman.core.errors import FwmanError

T = TypeVar("T")

OK = "ok"
HUNG = "hung"  # the deadline passed; the child was killed
CRASHED = "crashed"  # the child died without a result (a signal, os._exit, a segfault in the driver)
ERROR = "error"  # the target raised; ``error_kind`` names the exception class
#: after SIGKILL, how long to wait for the child to be reaped before going on without it (a process stuck in
#: the kernel, in uninterruptible sleep, cannot be reaped at all: fwman goes on and says so)
REAP_SECONDS = 5.0


@dataclass(frozen=True)
class Isolated(Generic[T]):
    """What one isolated step came to: ``status`` (:data:`OK`, :data:`HUNG`, :data:`CRASHED`, :data:`ERROR`)."""

    status: str
    value: T | None = None
    step: str | None = None  # the last step the child announced before it returned, hung or died
    seconds: float = 0.0  # wall time in the child's life, as the parent saw it
    error: str | None = None  # the message, for ERROR and CRASHED (and for HUNG: what the kill came to)
    error_kind: str | None = None  # the exception's class name (``MissingError``, ``CudaError``), for ERROR
    hint: str | None = None

    @property
    def ok(self) -> bool:
        """Return True when the target returned a value."""
        return self.status == OK


def _child(target: Callable[[Callable[[str], None]], Any], conn: Connection) -> None:
    """The child's body: run ``target(step)``, send ("step", name)... then ("ok", value) or ("error", ...)."""

    def step(name: str) -> None:
        conn.send(("step", name))

    try:
        value = target(step)
    except FwmanError as e:
        conn.send(("error", type(e).__name__, e.message, e.hint))
    except BaseException as e:  # anything the target raises is the result the parent reports
        conn.send(("error", type(e).__name__, f"{type(e).__name__}: {e}", None))
    else:
        conn.send(("ok", value))
    finally:
        conn.close()


def run_isolated(target: Callable[[Callable[[str], None]], T], timeout: float) -> Isolated[T]:
    """Run ``target(step)`` in a forked child and return what it came to within ``timeout`` seconds.

    ``target`` calls ``step(name)`` before each call that may block and returns a picklable value. Never raises
    for what the child does: a hang, a crash or an exception in the child is the returned :class:`Isolated`.
    """
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(target, sender), daemon=True)
    start = time.monotonic()
    process.start()
    sender.close()  # the child holds the only writer: EOF on the receiver means it died
    deadline = start + timeout
    step: str | None = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not receiver.poll(remaining):
                process.kill()
                process.join(REAP_SECONDS)
                reaped = "" if process.exitcode is not None else "; it could not be reaped (stuck in the kernel)"
                return Isolated(HUNG, step=step, seconds=time.monotonic() - start, error=f"killed{reaped}")
            try:
                message = receiver.recv()
            except (EOFError, OSError):
                process.join(REAP_SECONDS)
                code = process.exitcode
                why = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                return Isolated(CRASHED, step=step, seconds=time.monotonic() - start, error=f"the child died ({why})")
            if message[0] == "step":
                step = message[1]
                continue
            process.join(REAP_SECONDS)
            seconds = time.monotonic() - start
            if message[0] == "ok":
                return Isolated(OK, value=message[1], step=step, seconds=seconds)
            _, kind, text, hint = message
            return Isolated(ERROR, step=step, seconds=seconds, error=text, error_kind=kind, hint=hint)
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
