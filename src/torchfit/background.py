"""One call run in a daemon thread while the caller does other work; `result()` joins it
and re-raises its exception in the caller's thread.

For work that mostly waits on subprocesses or the network (the host probes, the build
check, a project's index reads), so the GIL is free for the caller meanwhile. Daemon: on
Ctrl-C nothing waits for it; the runner kills the children it started.

(concurrent.futures would do, but importing it imports `logging`: ~5 ms of every
start-up, where every step of `install` counts.)
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """`fn(*args, **kw)` started in a daemon thread; `result()` waits for it and re-raises."""

    def __init__(self, fn: Callable[..., T], *args: Any, **kw: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                self._value = fn(*args, **kw)
            except BaseException as exc:  # handed to the caller by result()
                self._error = exc

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
