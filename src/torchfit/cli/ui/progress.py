"""install's progress on a terminal: a rich.progress bar for the step that installs the packages.

The step's total (the lock's sizes), the percent ready and the package awaited come from the
observer protocol (`progress.Progress.files`/`advance`; installer/fetchwatch.py says how
"ready" is known). Off a terminal, or with TERM=dumb, `install_progress()` gives the plain
`StderrProgress`, whose lines say the same in order: one per step, one per change.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from torchfit.progress import LINKING, FileItem, StderrProgress, dumb_terminal


def install_progress(stream: TextIO | None = None) -> StderrProgress:
    """The observer of install's steps: a bar on a terminal, plain lines elsewhere."""
    import os

    out = stream or sys.stderr
    if getattr(out, "isatty", lambda: False)() and not dumb_terminal(os.environ):
        return BarProgress(out)
    return StderrProgress(out)


class BarProgress(StderrProgress):
    """StderrProgress's lines, and a live bar while a step with known packages runs."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "torchfit:") -> None:
        super().__init__(stream, prefix)
        self._bar: Any = None
        self._task: Any = None
        self._step: str | None = None

    def files(self, name: str, items: Sequence[FileItem]) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        from torchfit.cli.ui.console import console

        super().files(name, items)  # the plain line stays in the scrollback
        self._stop()
        total = sum(i.size for i in items)
        first = max(items, key=lambda i: i.size).label if items else ""
        self._bar = Progress(TextColumn(f"  [{name}]", markup=False), TextColumn("{task.description}", markup=False), BarColumn(),
                             TaskProgressColumn(), DownloadColumn(), TimeElapsedColumn(),
                             console=console(stderr=True), transient=True)
        self._task = self._bar.add_task(first, total=total or None)
        self._step = name
        self._bar.start()

    def advance(self, name: str, ready: Sequence[str], done_bytes: int, total_bytes: int,
                current: str | None) -> None:
        if self._bar is None or name != self._step:
            super().advance(name, ready, done_bytes, total_bytes, current)
            return
        if current is None:  # every file fetched, the step not done: the linking phase, no percent (issue 35)
            # a task of no total: rich pulses its bar and shows no percent (update() cannot unset a total)
            self._bar.remove_task(self._task)
            self._task = self._bar.add_task(LINKING, total=None, completed=done_bytes)
            return
        self._bar.update(self._task, completed=done_bytes, description=current)

    def done(self, name: str, seconds: float, note: str = "") -> None:
        if name == self._step:
            self._stop()
        super().done(name, seconds, note)

    @contextlib.contextmanager
    def running(self, name: str) -> Iterator[None]:
        if self._bar is not None and name == self._step:
            yield  # the bar ticks on its own
            return
        with super().running(name):
            yield

    def _ticks_shown(self) -> bool:
        return self._bar is None  # the live bar owns the bottom line

    def _line_raw(self, text: str) -> None:
        # While the bar is live, rich prints the line above it (its Live redraws below): a step line
        # written to the stream directly would land inside the bar's line (issue 35).
        bar = self._bar
        if bar is not None:
            bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        super()._line_raw(text)

    def _stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._task, self._step = None, None, None
