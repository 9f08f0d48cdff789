"""One call run in a thread while the caller does other work; `result()` joins it and
re-raises its exception in the caller. For work that mostly waits on subprocesses (a
host probe, the build check), so the GIL is free for the caller meanwhile.

(concurrent.futures would do, but importing it imports `logging`: measurable in
torchfit's start-up, where every step of `install` counts.)
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                self._value = fn(*args)
            except BaseException as exc:  # handed to the caller by result()
                self._error = exc

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
