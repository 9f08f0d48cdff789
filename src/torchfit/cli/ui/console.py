"""The terminal: the one rich Console, and the text helpers every renderer shares.

`console()` is the only place a rich Console is made; `clean`/`esc` make text safe to
show (redacted, no control sequences, rich markup escaped); `error_width` and `wrap`
fit text to a terminal.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from torchfit.inputs import terminal_text
from torchfit.redact import redact

if TYPE_CHECKING:
    from rich.console import Console


def console(stderr: bool = False, *, piped_width: int | None = None, soft_wrap: bool = False) -> Console:
    """The one rich Console: on stdout (or stderr); `piped_width` is its width when the
    stream is not a terminal (a table through a pipe is not cut to 80 columns)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 on a closed pipe (`torchfit resolve | head -1`); torchfit's
            # one boundary (cli.main) treats it as every other write to a closed pipe.
            raise BrokenPipeError

    con = _Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap)
    if piped_width is not None and not con.is_terminal:
        con = _Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap, width=piped_width)
    return con


def clean(text: str) -> str:
    """Redacted, and without control sequences: what may reach a terminal."""
    return terminal_text(redact(text))


def error_width() -> int | None:
    """Columns to wrap multi-line errors to: $COLUMNS, else stderr's terminal; None when
    stderr is a pipe or a file (then each item stays one line, for grep and tests)."""
    import os

    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) >= 40:
        return int(cols)
    try:
        if sys.stderr.isatty():
            return max(40, os.get_terminal_size(sys.stderr.fileno()).columns)
    except (OSError, ValueError):
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
