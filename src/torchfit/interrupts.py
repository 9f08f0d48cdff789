"""SIGINT, SIGTERM and SIGHUP as Ctrl-C: the interruption every command unwinds the same way.

The default action of SIGTERM and SIGHUP kills torchfit on the spot; `interrupts_raise` turns
them into `Interrupted` (a KeyboardInterrupt, exit 130), so the runner kills the child's group,
temporary directories are removed and `runner.kill_all` runs. `signals_deferred` and
`take_pending` hold them back while the filesystem is between two states (install's swap of
PREFIX, owned.py's marked removals). Split from runner.py (issue 28, item 10):
signal handling, not processes; it imports nothing of torchfit, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP, raised like Ctrl-C so the same cleanup runs (exit 130).

    `reported`: the command already told the user what the interruption left behind
    (install: whether PREFIX changed), so the boundary adds no line of its own."""

    def __init__(self, text: str = "interrupted", signum: int | None = None, *, reported: bool = False) -> None:
        super().__init__(text)
        self.signum = signum
        self.reported = reported


# Signals that arrived while the first interruption unwinds: cleanup is not cut short.
pending_signals: list[int] = []
_fired: list[int] = []
_depth: list[int] = []


@contextlib.contextmanager
def interrupts_raise(*, then_ignore: bool = False) -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP raise `Interrupted` (a KeyboardInterrupt) in the main thread, once.

    The default action of SIGTERM/SIGHUP kills torchfit on the spot, leaving temp
    dirs and children that run on in their own session. As an exception they unwind
    through the runner (which kills the child's group), temp dirs' context managers
    and `kill_all`. A second signal during that cleanup is recorded, not raised.

    On leaving, the previous handlers come back; with `then_ignore` (the program's entry)
    the signals are ignored instead: the command is done and its exit code stands. A
    Python handler could not cover those last moments: the interpreter's shutdown resets
    it to the default action, which would kill torchfit with its work complete.
    """
    def handler(signum: int, frame: FrameType | None) -> None:
        if _fired:  # nested contexts share it: one interruption per outermost context
            pending_signals.append(signum)
            return
        if _in_threading(frame):
            # threading's own code is not safe against an exception raised inside it: a
            # Thread.start() (its Event's Condition) interrupted there releases a lock it no
            # longer holds, "RuntimeError: release unlocked lock" (CPython issues 78667 and
            # 118433). Raised a moment later instead, once the main thread is out of it.
            _deferred[:] = [signum]
            signal.setitimer(signal.ITIMER_REAL, DEFER_S)
            return
        _fired.append(signum)
        raise Interrupted(f"interrupted by {signal.Signals(signum).name}", signum)

    def retry(_alarm: int, frame: FrameType | None) -> None:
        if _deferred:
            handler(_deferred.pop(), frame)

    previous = {}
    for sig in SIGNALS:
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread: leave signals alone
            pass
    if previous:
        previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, retry)
    _depth.append(1)
    try:
        yield
    finally:
        _depth.pop()
        if previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous.pop(signal.SIGALRM))
            if _deferred and _depth:  # the outer context's retry takes it
                signal.setitimer(signal.ITIMER_REAL, DEFER_S)
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_IGN if then_ignore else old)
        if not _depth:
            _fired.clear()
            if _deferred:  # it came in the last instant, inside threading: the command is done
                pending_signals.append(_deferred.pop())


DEFER_S = 0.002
_deferred: list[int] = []
_THREADING = threading.__file__


def _in_threading(frame: FrameType | None) -> bool:
    """Whether the main thread was running the threading module's code (any frame of it)."""
    while frame is not None:
        if frame.f_code.co_filename == _THREADING:
            return True
        frame = frame.f_back
    return False



@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM/SIGHUP back while the filesystem is between two states.

    Yields a list; `take_pending(held)` moves a signal that arrived meanwhile into
    it (consumed, not delivered), so the caller can say exactly when it came.
    Signals still pending at the end are delivered then.
    """
    held: list[int] = []
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        yield held
        return
    try:
        yield held
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def take_pending(held: list[int]) -> list[int]:
    """Consume the blocked signals pending now (inside `signals_deferred`), appending to `held`."""
    try:
        pending = signal.sigpending() & set(SIGNALS)
    except (AttributeError, OSError):  # pragma: no cover
        return held
    for sig in sorted(pending):
        with contextlib.suppress(AttributeError, OSError):
            if signal.sigtimedwait([sig], 0) is not None:
                held.append(int(sig))
    return held
