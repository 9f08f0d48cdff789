"""The one progress protocol: how long work reports, so library code never prints.

Every long-running part of torchfit (install's steps, verify's phases, the index
client's retries, `matrix check`'s page reads) is handed a `Progress` and reports
through it; none imports the terminal. `Progress` itself does nothing (tests,
library use, `--json`); `StderrProgress` prints one line per event to stderr, and
on a terminal a ticking elapsed time while a step runs (a CPython build or a 3 GB
CUDA install takes minutes). stdout stays free for `--json`.

While a step waits on a command, `waiting(name, what)` gives the runner's
`on_wait(elapsed_s, io_bytes)` callback: on a terminal a ticking line with the
elapsed time and the bytes moved so far, off a terminal a line every `HEARTBEAT_S`
seconds naming what is awaited and since when, so a hung mirror is never a silent wait.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple, TextIO

from torchfit.background import Background
from torchfit.inputs import terminal_text
from torchfit.redact import redact
from torchfit.text import format_bytes

FIRST_HEARTBEAT_S = 10.0
# What an install step does once every package is fetched: uv links them into the env (measured in
# issue 35: ~5 s for the CPU torch wheel), shown as such and never as 100% before the step is done.
LINKING = "linking: every package fetched, uv installs them into the env"
HEARTBEAT_S = 30.0


class FileItem(NamedTuple):
    """One package of a step: `torch 2.13.0+cpu`, and its bytes (the lock's size; 0: unknown)."""

    label: str
    size: int


def percent(done: int, total: int) -> int:
    """The whole percent of `done` in `total` (100 when there is nothing to do)."""
    return 100 if total <= 0 else min(100, done * 100 // total)


class Progress:
    """Receives progress; this base class ignores it (the null progress)."""

    def step(self, name: str, detail: str) -> None:
        """A step starts."""

    def phase(self, name: str, text: str) -> None:
        """A phase of a long command starts (verify: inspect, ddp, bandwidth); a step by another name."""
        self.step(name, text)

    def done(self, name: str, seconds: float, note: str = "") -> None:
        """A step finished."""

    def info(self, text: str) -> None:
        """Something the user should know (not a problem)."""

    def warn(self, text: str) -> None:
        """Something that may be a problem."""

    def trace(self, text: str) -> None:
        """A traceback of a failure torchfit survived (a bug in one doctor check), for a bug
        report: the command passes a progress that shows it only under -v."""

    @contextlib.contextmanager
    def running(self, name: str) -> Iterator[None]:
        """Wraps a step's blocking call (a ticking display may run meanwhile)."""
        yield

    def waiting(self, name: str, what: str, first: float = FIRST_HEARTBEAT_S) -> Callable[[float, int], None] | None:
        """A callback for the runner's `on_wait(elapsed_s, io_bytes)` while `what` runs; off a
        terminal its first line comes after `first` seconds (a wait that is usually short, uv's
        resolve, says sooner that it waits)."""
        return None

    def files(self, name: str, items: Sequence[FileItem]) -> None:
        """Step `name` installs these packages (name and version, bytes: the lock's sizes)."""

    def advance(self, name: str, ready: Sequence[str], done_bytes: int, total_bytes: int,
                current: str | None) -> None:
        """Of step `name`'s packages, `ready` are fetched (`done_bytes` of `total_bytes`);
        `current`: the largest one still awaited (None: all are ready)."""



def dumb_terminal(environ: Mapping[str, str]) -> bool:
    """TERM=dumb (or unknown): a terminal that takes no escape sequences, not even
    erase-line; text only."""
    return environ.get("TERM", "") in ("dumb", "unknown")


class StderrProgress(Progress):
    """`torchfit: [step] detail` lines on stderr; an elapsed-time ticker on a terminal.

    `prefix` starts each line ("torchfit:", or "torchfit verify:" for verify's phases).
    """

    def __init__(self, stream: TextIO | None = None, prefix: str = "torchfit:") -> None:
        self.stream = stream or sys.stderr
        # The ticker rewrites its line (\r, erase-line): only on a terminal that takes escapes.
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) and not dumb_terminal(os.environ)
        self.prefix = prefix
        self._io: int | None = None  # bytes moved by the awaited command, for the ticker
        # The tickers' line and every other line are written under one lock; a line said while a
        # ticker shows clears it first, so a step line never lands inside the ticker's (issue 35).
        self._write = threading.Lock()
        self._ticking = 0

    def waiting(self, name: str, what: str, first: float = FIRST_HEARTBEAT_S) -> Callable[[float, int], None] | None:
        since = time.strftime("%H:%M:%S")
        state = {"next": first, "base": None, "io": 0, "moved_at": 0.0}

        def on_wait(elapsed: float, io: int) -> None:
            if state["base"] is None:
                state["base"] = io
            if io != state["io"]:
                state["io"], state["moved_at"] = io, elapsed
            moved = io - int(state["base"] or 0)
            self._io = moved
            if self.tty or elapsed < float(state["next"] or 0):
                return
            state["next"] = elapsed + HEARTBEAT_S
            quiet = elapsed - float(state["moved_at"] or 0)
            self._line(f"{self.prefix} [{name}] still waiting for {what} since {since} "
                       f"({elapsed:.0f} s; {format_bytes(moved)} transferred"
                       + (f"; nothing for {quiet:.0f} s)" if quiet >= 5 else ")"))

        return on_wait

    def _line(self, text: str) -> None:
        # Redacted, and no control sequence of a path or a tool's text reaches the terminal.
        self._line_raw(terminal_text(redact(text)))

    def _ticks_shown(self) -> bool:
        """May a ticker draw now? (BarProgress: not while its bar is live.)"""
        return True

    def step(self, name: str, detail: str) -> None:
        self._line(f"{self.prefix} [{name}] {detail}")

    def done(self, name: str, seconds: float, note: str = "") -> None:
        self._line(f"{self.prefix} [{name}] done in {seconds:.1f} s" + (f": {note}" if note else ""))

    def files(self, name: str, items: Sequence[FileItem]) -> None:
        total = sum(i.size for i in items)
        big = sorted(items, key=lambda i: -i.size)[:3]
        shown = ", ".join(f"{i.label} ({format_bytes(i.size)})" for i in big)
        more = f" and {len(items) - len(big)} more" if len(items) > len(big) else ""
        self._line(f"{self.prefix} [{name}] {len(items)} package{'s' * (len(items) != 1)}, "
                   f"{format_bytes(total)} in all: {shown}{more}")

    def advance(self, name: str, ready: Sequence[str], done_bytes: int, total_bytes: int,
                current: str | None) -> None:
        if current is None:  # fetched, not done: uv links them now (seconds for torch), so no "100%" yet
            self._line(f"{self.prefix} [{name}] {LINKING} ({format_bytes(total_bytes)} fetched): "
                       f"{', '.join(ready)} ready")
            return
        self._line(f"{self.prefix} [{name}] {percent(done_bytes, total_bytes)}% "
                   f"({format_bytes(done_bytes)} of {format_bytes(total_bytes)}): {', '.join(ready)} ready; "
                   f"now {current}")

    def info(self, text: str) -> None:
        self._line(f"{self.prefix} {text}")

    def warn(self, text: str) -> None:
        self._line(f"{self.prefix} warning: {text}")

    def trace(self, text: str) -> None:
        self._line_raw(redact(text.rstrip("\n")))

    def _line_raw(self, text: str) -> None:
        with self._write:
            self.stream.write(("\r\033[K" if self.tty and self._ticking else "") + text + "\n")
            self.stream.flush()

    def phase(self, name: str, text: str) -> None:
        self._line(f"{self.prefix} {text}")

    @contextlib.contextmanager
    def running(self, name: str) -> Iterator[None]:
        if not self.tty:
            yield
            return
        stop = threading.Event()
        start = time.monotonic()

        self._io = None

        def tick() -> None:
            while not stop.wait(1.0):
                elapsed = int(time.monotonic() - start)
                moved = f", {format_bytes(self._io)}" if self._io else ""
                with self._write:
                    if self._ticks_shown():
                        self.stream.write(f"\r  {name}: {elapsed // 60}m {elapsed % 60:02d}s{moved} \033[K")
                        self.stream.flush()

        with self._write:
            self._ticking += 1
        ticker = Background(tick)
        try:
            yield
        finally:
            stop.set()
            ticker.wait()
            with self._write:
                self._ticking -= 1
                if self._ticks_shown():
                    self.stream.write("\r\033[K")
                    self.stream.flush()
