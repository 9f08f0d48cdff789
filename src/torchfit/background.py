"""One call run in a daemon thread while the caller does other work; `result()` waits for it
and re-raises its exception in the caller's thread. The one way torchfit starts and waits for
a thread.

For work that mostly waits on subprocesses or the network (the host probes, the build
check, a project's index reads), so the GIL is free for the caller meanwhile. Daemon: on
Ctrl-C nothing waits for it; the runner kills the children it started.

Safe against interruption. SIGINT/SIGTERM/SIGHUP raise `Interrupted` from wherever the main
thread is (interrupts.interrupts_raise), and the standard library's thread join and Event wait are
not safe against an exception raised inside them: `Thread.join()`, interrupted in its
tstate-lock dance, releases the lock of a thread still running, and a Condition interrupted
between its wait and its re-acquire releases a lock it no longer holds ("RuntimeError: release
unlocked lock": CPython issues 78667 and 118433, bpo-45274). So waiting is on a bare lock the
thread releases at its end: an interrupted acquire has either taken it or not, and nothing is
ever released twice. `Wake` is an Event built the same way, for the main thread's timed waits.
`Thread.start()` itself waits on an Event: the handler defers a signal that lands inside
threading's code by a few milliseconds (interrupts.interrupts_raise).

concurrent.futures is not used at all: importing it imports `logging` (~5 ms of every
start-up), and its thread pool raced with this process's own subprocesses: the pool's module
registers fork hooks on its global shutdown lock, a child started with a preexec_fn from
another thread runs them, and `submit` then failed with "RuntimeError: release unlocked
lock" (measured: once in 4 cold `resolve`s on a loaded machine, 3.11.7; issue 36's flaky
test). `map_in_threads` is the pool's map on these threads.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from torchfit.interrupts import SIGNALS

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

T = TypeVar("T")

# Held around every fork that runs the at-fork hooks (runner.spawn: a preexec_fn) and around an
# import, from a thread, of a module that registers such hooks (requests imports `logging`, whose
# hooks take and release its module lock): a fork in one thread while another thread is inside
# that import runs the child's "after" hook without its "before" one, and the child printed
# "Exception ignored in: _releaseLock ... RuntimeError: cannot release un-acquired lock" into the
# command's stderr (seen in a full test run after requests became lazy, issue 37).
_forks = threading.RLock()


class _LoggingUnderForks:
    """Runs the first import of `logging`, in any thread, under `_forks`: its fork hooks are then
    never registered beside a fork. `_forks` alone covered torchfit's own such import (requests,
    in the page-reading thread); packaging.tags imports logging too, from whichever thread reads a
    version first, and the fast tier saw it again: `install --lock DEEP.toml`'s one bad-input line
    came after "Exception ignored in: _releaseLock" (the main thread importing packaging while a
    probe thread spawned). A plain resolve never imports logging, and this costs it nothing."""

    done = False

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != "logging" or self.done:
            return None
        import importlib.machinery

        self.done = True
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        real = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            with _forks:
                real(module)

        loader.exec_module = exec_module
        return spec


if "logging" not in sys.modules:
    sys.meta_path.insert(0, _LoggingUnderForks())


@contextlib.contextmanager
def no_fork() -> Iterator[None]:
    """No runner.spawn fork while inside (see `_forks`)."""
    with _forks:
        yield

def start_quiet(thread: threading.Thread) -> None:
    """Start `thread` with SIGINT, SIGTERM and SIGHUP blocked in it (a new thread inherits its
    creator's mask), so the kernel delivers them to the main thread alone. A thread that takes
    them defeats interrupts.signals_deferred, which blocks them in the main thread only while
    the filesystem is between two states: measured, an install's SIGTERM during the swap was
    taken by a deadline timer left from the redirect check and raised at once (exit 130, "after
    the swap") instead of being held and reported as late (tests/e2e/test_signals.py)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        thread.start()
        return
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Background(Generic[T]):
    """`fn(*args, **kw)` started in a daemon thread; `result()` waits for it and re-raises."""

    def __init__(self, fn: Callable[..., T], *args: Any, name: str | None = None, **kw: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._finished = False
        self._done = _thread.allocate_lock()
        self._done.acquire()

        def target() -> None:
            try:
                self._value = fn(*args, **kw)
            except BaseException as exc:  # handed to the caller by result()
                self._error = exc
            finally:
                self._finished = True  # before the release: a waiter that sees the lock free sees this
                self._done.release()

        self._thread = threading.Thread(target=target, name=name, daemon=True)
        start_quiet(self._thread)

    def done(self) -> bool:
        return self._finished

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the call to end (at most `timeout` s); whether it has."""
        if not self._finished and self._done.acquire(True, -1 if timeout is None else max(0.0, timeout)):
            self._done.release()  # for other waiters; interrupted before it, `_finished` already says it
        return self._finished

    def result(self) -> T:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def map_in_threads(fn: Callable[[Any], T], items: list[Any], workers: int = 8) -> list[T]:
    """`[fn(x) for x in items]`, at most `workers` at a time, each in a Background: what a thread
    pool's map does, without its joins (see the module's docstring); the first error re-raised."""
    out: list[T] = []
    for start in range(0, len(items), workers):
        batch = [Background(fn, x) for x in items[start:start + workers]]
        out += [b.result() for b in batch]
    return out


class Wake:
    """threading.Event's set/wait/clear for one waiting thread, on a bare lock (see the module's
    docstring): set() from any thread, wait(timeout) in the main thread, safe to interrupt."""

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):  # already set
            self._lock.release()

    def wait(self, timeout: float) -> bool:
        """Whether it was set (and stays set until clear())."""
        if self._lock.acquire(True, max(0.0, timeout)):
            self._lock.release()
            return True
        return False

    def clear(self) -> None:
        self._lock.acquire(False)
