"""How a long install reports its steps: a small observer, so the steps stay testable.

`Observer` does nothing (tests, library use); `StderrProgress` prints one line per
step to stderr, and on a terminal a ticking elapsed time while a step runs (a
CPython build or a 3 GB CUDA install takes minutes). stdout stays free for `--json`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

from torchfit.redact import redact


class Observer:
    """Receives the install's progress; the base class ignores it."""

    def step(self, name: str, detail: str) -> None:
        """A step starts."""

    def done(self, name: str, seconds: float, note: str = "") -> None:
        """A step finished."""

    def info(self, text: str) -> None:
        """Something the user should know (not a problem)."""

    def warn(self, text: str) -> None:
        """Something that may be a problem."""

    @contextlib.contextmanager
    def running(self, name: str) -> Iterator[None]:
        """Wraps a step's blocking call (a ticking display may run meanwhile)."""
        yield


class StderrProgress(Observer):
    """`torchfit: [step] detail` lines on stderr; an elapsed-time ticker on a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def _line(self, text: str) -> None:
        self.stream.write(redact(text) + "\n")
        self.stream.flush()

    def step(self, name: str, detail: str) -> None:
        self._line(f"torchfit: [{name}] {detail}")

    def done(self, name: str, seconds: float, note: str = "") -> None:
        self._line(f"torchfit: [{name}] done in {seconds:.1f} s" + (f": {note}" if note else ""))

    def info(self, text: str) -> None:
        self._line(f"torchfit: {text}")

    def warn(self, text: str) -> None:
        self._line(f"torchfit: warning: {text}")

    @contextlib.contextmanager
    def running(self, name: str) -> Iterator[None]:
        if not self.tty:
            yield
            return
        stop = threading.Event()
        start = time.monotonic()

        def tick() -> None:
            while not stop.wait(1.0):
                elapsed = int(time.monotonic() - start)
                self.stream.write(f"\r  {name}: {elapsed // 60}m {elapsed % 60:02d}s ")
                self.stream.flush()

        thread = threading.Thread(target=tick, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()
