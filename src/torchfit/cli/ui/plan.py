"""`torchfit resolve`'s plan: aligned lines, then its reasons, warnings and what was ruled out."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchfit.cli.ui.console import console, esc, esc_plain, terminal_width, wrap
from torchfit.compat.hostlines import format_host_names
from torchfit.compat.plan import Plan
from torchfit.inputs import terminal_text
from torchfit.redact import redact

if TYPE_CHECKING:
    from rich.console import Console



# The plan's python_source, when the interpreter is not present yet (issue 35).
_WILL_INSTALL = {"uv": " (uv will install a prebuilt Python)", "pyenv": " (pyenv will build it)"}


def render_plan(plan: Plan, explain: bool = False) -> None:
    """The plan as aligned lines: component, version, why (wrapped under itself on a
    terminal or with $COLUMNS; one line per component when piped)."""
    from torchfit.compat.matrix import FAMILY_PACKAGES

    con = console()
    width = terminal_width(sys.stdout)
    # a fleet of 2,000 groups is named by a few of them and the count (issue 34, R6); --json lists all
    con.print(f"[bold]torchfit resolve: the stack for {esc(format_host_names(plan.hosts))}[/]", soft_wrap=True)
    py = f"{plan.python_version}{'t' if plan.free_threaded else ''}" + _WILL_INSTALL.get(plan.python_source, "")
    rows: Sequence[tuple[str, str | None, str]] = [
        ("Python", py, plan.why.get("python", "")),
        ("torch", plan.torch, plan.why.get("torch", "")),
        ("variant", plan.variant, plan.why.get("variant", "")),
        ("CUDA" if not plan.rocm else "ROCm", plan.cuda or plan.rocm or "-",
         plan.why.get("cuda", "CPU build" if plan.variant == "cpu" else "")),
        ("cuDNN", plan.cudnn or ("unknown" if plan.cuda else "-"), plan.why.get("cudnn", "") if plan.cuda else ""),
        ("NCCL", plan.nccl or ("unknown" if plan.cuda else "-"), plan.why.get("nccl", "") if plan.cuda else ""),
        *(_companion_row(plan, name) for name in ("torchvision", "torchaudio")),
        ("index URL", redact(plan.index_url), plan.why.get("index_url", "")),
    ]
    col = 2 + 12 + 20
    for name, ver, why in rows:
        value = terminal_text(ver or "-")
        head = f"  {name:<12}{value:<20}"
        why = terminal_text(redact(why))
        if not why:
            con.print(esc_plain(head.rstrip()), soft_wrap=True)
        elif width is None:
            con.print(esc_plain(f"{head}{why}" if len(value) < 20 else f"{head} {why}"), soft_wrap=True)
        elif width - col < 30:
            # Too narrow for a column of reasons: the reason on its own lines, under the name.
            for line in [f"  {name:<12}{value}", *wrap(why, width, " " * 4, " " * 4).splitlines()]:
                con.print(esc_plain(line), soft_wrap=True)
        else:
            first = head if len(value) < 20 else f"  {name:<12}{value}"
            lines = [first.rstrip()] if len(value) >= 20 else []
            wrapped = wrap(why, width, " " * col, " " * col).splitlines()
            if len(value) < 20 and wrapped:
                wrapped[0] = head + wrapped[0][col:]
            for line in lines + wrapped:
                con.print(esc_plain(line), soft_wrap=True)
    for r in plan.reasons:
        _print_item(con, "[green]•[/] ", "• ", r, width)
    if plan.resolved:
        project_pins = sorted((n, v) for n, v in plan.resolved.items() if n not in FAMILY_PACKAGES)
        _print_item(con, "[green]•[/] ", "• ", f"project: {len(plan.project)} requirements, {len(plan.resolved)} "
                    "packages, resolved by uv in one pass: "
                    + ", ".join(f"{n} {v}" for n, v in project_pins), width)
    for w in plan.warnings:
        _print_item(con, "[yellow]warning:[/] ", "warning: ", w, width)
    relevant = plan.ruled_out[: plan.ruled_out_relevant]
    others = len(plan.ruled_out) - len(relevant)
    if explain and not relevant:
        _print_item(con, "\n", "", "Ruled out: nothing for this hardware; this is the build torchfit prefers "
                    "most for these hosts." + (f" ({_n(others, 'build')} for other hardware not listed.)"
                                               if others else ""), width)
    elif explain:
        con.print(f"\n[bold]Ruled out: {_n(len(relevant), 'build')} for this hardware, preferred over this one:[/]")
        for line in relevant:
            _print_item(con, "  [red]✗[/] ", "  x ", line, width)
        if others:
            _print_item(con, "  ", "  ", f"and {_n(others, 'build')} for other hardware (CPU, ROCm, or CUDA where "
                        "this host has no NVIDIA GPU): `torchfit resolve --json` lists them all", width)
    elif relevant:
        _print_item(con, "", "", f"{_n(len(relevant), 'build')} for this hardware preferred and ruled out: "
                    "--explain lists them", width)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _print_item(con: Console, markup: str, plain: str, text: str, width: int | None) -> None:
    """One reason or warning: wrapped under its own start on a terminal."""
    text = terminal_text(redact(text))
    if width is None:
        con.print(markup + esc_plain(text), soft_wrap=True)
        return
    lines = wrap(text, width, " " * len(plain), " " * len(plain)).splitlines()
    con.print(markup + esc_plain(lines[0].lstrip()), soft_wrap=True)
    for line in lines[1:]:
        con.print(esc_plain(line), soft_wrap=True)


def _companion_row(plan: Plan, name: str) -> tuple[str, str | None, str]:
    """A companion's row: its version where the plan installs it; else "-" (the table lists only
    what install installs; the plan's `why` says which build would match)."""
    version = getattr(plan, name)
    return name, (version or "-") if name in plan.packages else "-", plan.why.get(name, "")
