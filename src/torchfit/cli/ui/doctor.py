"""`torchfit doctor`'s report: grouped by area, evidence and fix for each check that did not pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchfit.checks import Check
    from torchfit.doctor.context import Context
    from torchfit.installer.repair import RepairPlan


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "unknown": "magenta"}


def render_report(checks: Sequence[Check], ctx: Context) -> None:
    """Grouped by area: one line per ok check; evidence and fix, wrapped, only for
    the checks that did not pass. Readable at 40 columns, nothing cut."""
    import sys

    from rich.markup import escape

    from torchfit.cli.ui.console import console, terminal_width

    con = console(soft_wrap=True)
    # Wrapped to $COLUMNS when set, else to the terminal's width (at most 120); through a
    # pipe or into a file with no COLUMNS, not wrapped; never cut: the report pasted into
    # a bug tracker keeps every fact.
    cols = terminal_width(sys.stdout)
    width = max(20, min(cols, 120)) if cols else None
    for line in format_report(checks, ctx, width):
        status = next((k for k in _STYLE if line.startswith(f"  {k} ")), None)
        text = escape(line)
        if status:
            text = f"  [{_STYLE[status]}]{status}[/]" + text[2 + len(status):]
        con.print(text)


def format_report(checks: Sequence[Check], ctx: Context, width: int | None = 80) -> list[str]:
    """The doctor report as plain lines (render_report colours them): wrapped to `width`,
    one line per item when `width` is None; never cut."""
    from torchfit.doctor.model import status_word, summary
    from torchfit.inputs import terminal_text
    from torchfit.redact import redact

    def clean(text: str) -> str:
        return terminal_text(redact(text)).replace("\n", " ")

    def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
        if width is None:
            return [first + text]
        import textwrap

        words = text.split()
        if first.strip() and words and len(first) + len(words[0]) > width:
            # A first word (a path) too long to follow the head: the head stands alone and
            # the text starts below it; a path is never broken, so it stays copyable.
            return [first.rstrip(), *wrap(text, rest, rest)]
        return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                             break_long_words=False, break_on_hyphens=False) or [first.rstrip()]

    lines = wrap(clean(f"torchfit doctor ({ctx.python_source}): {ctx.python or 'no Python'}"), "", "  ")
    pad = " " * 12
    area = None
    for c in checks:
        if c.area != area:
            lines.append(c.area or "")
            area = c.area
        word = status_word(c.status)
        head = f"  {word:<8} {c.name}"
        if word == "ok":
            lines += wrap(clean(c.summary), f"{head}  ", pad)
            continue
        lines.append(head)
        lines += wrap(clean(c.summary), pad, pad)
        if c.hint and word in ("warn", "fail", "unknown"):
            lines += wrap(clean(c.hint), pad + "fix: ", pad + "     ")
    counts = summary(checks)
    tally = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    if counts["fail"]:
        end = "Fix the failures from the top: later checks often follow from earlier ones."
    elif counts["unknown"]:
        end = "Nothing failed, but the checks marked unknown could not look."
    else:
        end = "Nothing failed."
    lines += ["", *wrap(f"{tally}. {end}")]
    return lines


def render_check_list(rows: Sequence[Mapping[str, object]]) -> None:
    """`doctor --list` on stdout (format_check_list's lines)."""
    import sys

    sys.stdout.write("\n".join(format_check_list(rows)) + "\n")


def format_check_list(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """`doctor --list`: one line per check (id, area, title), the repair --fix has below it."""
    width = max((len(str(r["id"])) for r in rows), default=0)
    lines = []
    for r in rows:
        log = " (with --log)" if r.get("needs_log") else ""
        lines.append(f"{r['id']:<{width}}  {r['area']:<11}  {r['title']}{log}")
        if r.get("fix"):
            lines.append(f"{'':<{width}}  {'':<11}  --fix: {r['fix_does']}")
    return lines


def render_repairs(plan: RepairPlan, done: Sequence[str], dry_run: bool) -> None:
    """`doctor --fix` under the report, on stdout (format_repairs's lines)."""
    import sys

    sys.stdout.write("\n".join(format_repairs(plan, done, dry_run)) + "\n")


def format_repairs(plan: RepairPlan, done: Sequence[str], dry_run: bool) -> list[str]:
    """What `doctor --fix` would do (`dry_run`) or did, and what it may not repair."""
    from torchfit.inputs import terminal_text

    lines = [""]
    if not plan.repairs:
        lines.append("--fix: nothing to repair that torchfit knows a safe repair for")
    elif dry_run:
        lines.append(f"--fix --dry-run: {len(plan.repairs)} repair{'s' * (len(plan.repairs) != 1)} "
                     "(nothing was changed):")
        lines += [f"  would fix {r.check}: {terminal_text(r.what)}" for r in plan.repairs]
    else:
        lines.append("--fix: repaired, then every check ran again (the report above):")
        lines += [f"  fixed {terminal_text(line)}" for line in done]
    lines += [f"  not fixed: {terminal_text(why)}" for why in plan.refused]
    return lines


def render_node_line(checks: list[Check], seconds: float) -> None:
    """`doctor --node-check`: one line on stdout whatever the verdict; a Prolog or health-check
    wrapper passes it to `scontrol update ... reason=`, so it is written as it is (no rich)."""
    import sys

    from torchfit.doctor.nodecheck import format_node_line

    sys.stdout.write(f"torchfit node-check: {format_node_line(checks, seconds)}\n")
