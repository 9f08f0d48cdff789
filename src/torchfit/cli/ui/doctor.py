"""`torchfit doctor`'s report: grouped by area, evidence and fix for each check that did not pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchfit.checks import Check
    from torchfit.doctor.context import Context


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "unknown": "magenta"}


def render_report(checks: Sequence[Check], ctx: Context) -> None:
    """Grouped by area: one line per ok check; evidence and fix, wrapped, only for
    the checks that did not pass. Readable at 80 columns."""
    from rich.markup import escape

    from torchfit.cli.ui.console import console

    con = console(soft_wrap=True)
    width = max(60, min(con.width, 120))
    for line in format_report(checks, ctx, width):
        status = next((k for k in _STYLE if line.startswith(f"  {k} ")), None)
        text = escape(line)
        if status:
            text = f"  [{_STYLE[status]}]{status}[/]" + text[2 + len(status):]
        con.print(text)


def format_report(checks: Sequence[Check], ctx: Context, width: int = 80) -> list[str]:
    """The doctor report as plain lines (render_report colours them)."""
    import textwrap

    from torchfit.doctor.model import status_word, summary
    from torchfit.inputs import terminal_text
    from torchfit.redact import redact

    def clean(text: str) -> str:
        return terminal_text(redact(text)).replace("\n", " ")

    lines = textwrap.wrap(clean(f"torchfit doctor ({ctx.python_source}): {ctx.python or 'no Python'}"), width,
                          subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    pad = " " * 12
    area = None
    for c in checks:
        if c.area != area:
            lines.append(c.area or "")
            area = c.area
        word = status_word(c.status)
        head = f"  {word:<8} {c.name}"
        if word == "ok":
            text = f"{head}  {clean(c.summary)}"
            lines.append(text if len(text) <= width else text[: width - 1] + "\u2026")
            continue
        lines.append(head)
        lines += textwrap.wrap(clean(c.summary), width, initial_indent=pad, subsequent_indent=pad,
                               break_long_words=False, break_on_hyphens=False)
        if c.hint and word in ("warn", "fail", "unknown"):
            lines += textwrap.wrap(clean(c.hint), width, initial_indent=pad + "fix: ",
                                   subsequent_indent=pad + "     ", break_long_words=False,
                                   break_on_hyphens=False)
    counts = summary(checks)
    tally = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    if counts["fail"]:
        end = "Fix the failures from the top: later checks often follow from earlier ones."
    elif counts["unknown"]:
        end = "Nothing failed, but the checks marked unknown could not look."
    else:
        end = "Nothing failed."
    lines += ["", *textwrap.wrap(f"{tally}. {end}", width)]
    return lines
