"""The standard streams, set up by the boundary (`cli.main`) before any command runs.

- A closed descriptor 0, 1 or 2 (`torchfit detect >&-`) is reopened on /dev/null, so
  nothing torchfit opens later (a log, a lock) lands on it and receives another
  stream's text. A closed stdout is refused (`refuse_closed_stdout`, exit 2): the answer
  would be lost. A closed stderr or stdin is /dev/null.
- Text the stream's encoding cannot carry (PYTHONIOENCODING=ascii, a C locale without
  UTF-8) is written with ASCII fallbacks (`•` as `*`, `✓` as `+`, `…` as `...`), anything
  else as `\\uXXXX`: never a UnicodeEncodeError, whoever writes (print, rich, progress).
- A failed write to stdout or stderr carries the stream's name (`failed_stream`), so the
  boundary blames stdout only for stdout's own errors, never for a full disk elsewhere.

Only the process's own streams are replaced (a caller that captured sys.stdout, such as
a test calling `main` in-process, keeps its object), and everything is put back on exit.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

from torchfit.errors import BadInput

ERRORS = "torchfit-ascii"

# What a character becomes where the encoding cannot carry it: the same meaning in ASCII.
ASCII_FALLBACKS = {
    "\u2022": "*",     # • bullet
    "\u2713": "+",     # ✓ check mark
    "\u2714": "+",     # ✔
    "\u2717": "x",     # ✗ ballot x
    "\u2718": "x",     # ✘
    "\u2026": "...",   # … ellipsis
    "\u2588": "#",     # █ full block (bars)
    "\u00b7": ".",     # · middle dot
    "\u2014": "--",    # — em dash
    "\u2013": "-",     # en dash
    "\u2192": "->",    # →
    "\u2190": "<-",    # ←
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u00d7": "x",     # multiplication sign
    "\u2265": ">=", "\u2264": "<=", "\u00b1": "+-",
    "\u00a0": " ",     # no-break space
}


def ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """The codecs error handler: each character the encoding refused, in ASCII."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(ASCII_FALLBACKS.get(ch) or ch.encode("ascii", "backslashreplace").decode("ascii")
                   for ch in bad), exc.end


codecs.register_error(ERRORS, ascii_fallback)


def failed_stream(exc: BaseException) -> str | None:
    """"stdout" or "stderr" when `exc` is a failed write to that stream, else None."""
    return getattr(exc, "torchfit_stream", None)


class _Stream(io.TextIOWrapper):
    """The process's stdout or stderr: the same buffer, ASCII fallbacks, failures named.

    stdout's failures propagate (the boundary says so, exit 2). stderr carries progress
    and messages only: when it cannot be written (`2>/dev/full`) it becomes /dev/null and
    the command goes on; its exit code still tells.
    """

    name_: str = "stdout"

    def write(self, s: str) -> int:
        try:
            return super().write(s)
        except OSError as exc:
            return self._failed(exc, len(s))

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            self._failed(exc, 0)

    def _failed(self, exc: OSError, n: int) -> int:
        if self.name_ != "stderr":
            exc.torchfit_stream = self.name_  # type: ignore[attr-defined]
            raise exc
        with contextlib.suppress(OSError, ValueError):
            _reopen_devnull(self.fileno())
            super().flush()
        return n


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _reopen_devnull(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def _wrap(old: Any, fd: int, name: str) -> _Stream:
    """A _Stream over `old`'s buffer (or over `fd` when there was no stream at all)."""
    if old is None:
        buffer: Any = open(fd, "wb", closefd=False)
        encoding, line_buffering, write_through = None, False, False
    else:
        old.flush()
        buffer = old.buffer
        encoding, line_buffering, write_through = old.encoding, old.line_buffering, old.write_through
    if name == "stderr":
        line_buffering = True
    new = _Stream(buffer, encoding=encoding, errors=ERRORS, line_buffering=line_buffering,
                  write_through=write_through)
    new.name_ = name
    return new


@contextlib.contextmanager
def standard_streams() -> Iterator[frozenset[int]]:
    """Set up fds 0-2 and sys.stdout/sys.stderr as the module says, yielding the
    descriptors that were closed; put the streams back after."""
    closed = [fd for fd in (0, 1, 2) if _closed(fd)]
    for fd in closed:
        _reopen_devnull(fd)
    saved = (sys.stdin, sys.stdout, sys.stderr)
    made: list[_Stream] = []
    try:
        if sys.stdin is None:
            sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        for name, fd in (("stdout", 1), ("stderr", 2)):
            old = getattr(sys, name)
            if old is None or (old is getattr(sys, f"__{name}__") and hasattr(old, "buffer")):
                new = _wrap(old, fd, name)
                made.append(new)
                setattr(sys, name, new)
        yield frozenset(closed)
    finally:
        for stream in made:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
            with contextlib.suppress(OSError, ValueError):
                stream.detach()  # the buffer stays open: it is the process's fd 1 or 2
        sys.stdin, sys.stdout, sys.stderr = saved


def refuse_closed_stdout(closed: frozenset[int]) -> None:
    """BadInput (exit 2) when descriptor 1 was closed: nothing runs whose answer is lost."""
    if 1 in closed:
        raise BadInput("stdout is closed (file descriptor 1): the answer would be lost; "
                       "to discard it, send it to /dev/null (>/dev/null)")
