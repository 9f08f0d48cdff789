"""The terminal: the one rich Console, and the text helpers every renderer shares.

`console()` is the only place a rich Console is made; `clean`/`esc` make text safe to
show (redacted, no control sequences, rich markup escaped); `error_width` and `wrap`
fit text to a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from torchfit.inputs import terminal_text
from torchfit.progress import dumb_terminal
from torchfit.redact import redact

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def console(stderr: bool = False, *, piped_width: int | None = None, soft_wrap: bool = False) -> Console:
    """The one rich Console: on stdout (or stderr); `piped_width` is its width when the
    stream is not a terminal (a table through a pipe is not cut to 80 columns).

    No emoji codes are replaced (`:1234:` stays as written).
    Styles (colour, bold, italic, dim) only on a terminal that takes them: none with
    NO_COLOR set (no-color.org) or TERM=dumb, none through a pipe (rich's own rule).
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 on a closed pipe (`torchfit resolve | head -1`); torchfit's
            # one boundary (cli.main) treats it as every other write to a closed pipe.
            raise BrokenPipeError

    # emoji=False: rich would draw `:1234:` of a log line (`node1:1234:1290 [0] NCCL WARN`) as an
    # emoji; the text torchfit shows is the user's and the tools', shown as it is.
    kw: dict[str, Any] = {"stderr": stderr, "highlight": False, "soft_wrap": soft_wrap, "emoji": False,
                          "color_system": None if plain_text(os.environ) else "auto"}
    con = _Console(**kw)
    if piped_width is not None and not con.is_terminal:
        con = _Console(**kw, width=piped_width)
    return con


def table(**kwargs: Any) -> Table:
    """The one way to make a rich Table: a cell too long for its column wraps, and a word
    too long for it folds onto the next line; nothing is cut with "…" (a fact lost)."""
    from rich.table import Table

    class _Table(Table):
        def add_column(self, *args: Any, **kw: Any) -> None:
            kw["overflow"] = "fold"
            kw.pop("no_wrap", None)
            super().add_column(*args, **kw)

    return _Table(**kwargs)


def plain_text(environ: Mapping[str, str]) -> bool:
    """No escape sequences at all: NO_COLOR set to anything (no-color.org), or TERM=dumb."""
    return bool(environ.get("NO_COLOR")) or dumb_terminal(environ)


def clean(text: str) -> str:
    """Redacted, and without control sequences: what may reach a terminal."""
    return terminal_text(redact(text))


def error_width() -> int | None:
    """Columns to wrap multi-line errors to: `terminal_width` of stderr."""
    return terminal_width(sys.stderr)


def terminal_width(stream: TextIO) -> int | None:
    """Columns to wrap to: $COLUMNS (at least 40), else the stream's terminal; None when
    the stream is a pipe or a file (then each item stays one line, for grep and tests)."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) >= 40:
        return int(cols)
    try:
        if stream.isatty():
            return max(40, os.get_terminal_size(stream.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return None


def wrap(text: str, width: int, first: str, rest: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width - 1, initial_indent=first, subsequent_indent=rest,
                                    break_long_words=False, break_on_hyphens=False)) or first.rstrip()


def esc_plain(text: str) -> str:
    """rich markup escaped (the text is clean already)."""
    from rich.markup import escape

    return escape(text)


def esc(text: str) -> str:
    """Cleaned and rich markup escaped."""
    from rich.markup import escape

    return escape(terminal_text(redact(text)))
