"""Presentation: the only module that imports rich, and only when it renders.

`--json` output never goes through here, so machine-readable runs never pay for
rich's import. Every error is rendered the same way: what failed, why (host
facts first), how to fix it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torchfit.compat.facts import HostFacts
from torchfit.compat.plan import Plan
from torchfit.errors import BadInput, NoCompatibleSet, TorchfitError
from torchfit.inputs import terminal_text
from torchfit.redact import redact

if TYPE_CHECKING:
    from rich.console import Console


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 on a closed pipe (`torchfit resolve | head -1`); torchfit's
            # one boundary (cli.main) treats it as every other write to a closed pipe.
            raise BrokenPipeError

    return _Console(stderr=stderr, highlight=False, soft_wrap=False)


def _clean(text: str) -> str:
    """Redacted, and without control sequences: what may reach a terminal."""
    return terminal_text(redact(text))


def write_output(path: str, text: str, option: str = "-o") -> None:
    """Write a command's output to the file an option names; BadInput (one line) if it cannot."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write ({exc.strerror})") from None


def render_error(err: TorchfitError, verbose: bool = False) -> None:
    """One line for what failed (plus conflicts and hints where there are some), on stderr."""
    out = sys.stderr
    width = _error_width()
    if isinstance(err, NoCompatibleSet) and width:
        # A terminal (or COLUMNS): the facts and each conflict wrapped to its width.
        out.write(f"torchfit: error: no compatible set  [{err.reference}]\n")
        for i, line in enumerate(err.conflicts):
            out.write(_wrap(_clean(line), width, "  " if i == 0 else "  - ", "    ") + "\n")
        for hint in err.hints:
            out.write(_wrap(_clean(hint), width, "  hint: ", "    ") + "\n")
    elif isinstance(err, NoCompatibleSet):
        out.write(_clean(f"torchfit: error: {err.message}") + f"  [{err.reference}]\n")
        for line in err.conflicts[1:]:
            out.write(_clean(f"  - {line}") + "\n")
        for hint in err.hints:
            out.write(_clean(f"  hint: {hint}") + "\n")
    elif width and err.exit_code != 2:
        # Bad input stays one line (exit 2 contract); a refusal reads at the terminal's width.
        out.write(_wrap(_clean(f"torchfit: error: {err.message}  [{err.reference}]"), width, "", "  ") + "\n")
        if err.hint:
            out.write(_wrap(_clean(err.hint), width, "  hint: ", "    ") + "\n")
    else:
        out.write(_clean(f"torchfit: error: {err.message}") + f"  [{err.reference}]\n")
        if err.hint:
            out.write(_clean(f"  hint: {err.hint}") + "\n")
    tail = err.to_json().get("tail")  # ask the error, do not inspect it
    if tail:
        out.write("  last lines of the log:\n")
        for line in str(tail).splitlines()[-20:]:
            out.write(_clean(f"    {line}") + "\n")


def _error_width() -> int | None:
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


def _wrap(text: str, width: int, first: str, rest: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width - 1, initial_indent=first, subsequent_indent=rest,
                                    break_long_words=False, break_on_hyphens=False)) or first.rstrip()


def render_plan(plan: Plan, explain: bool = False) -> None:
    """The plan as aligned lines: component, version, why (wrapped under itself on a
    terminal or with $COLUMNS; one line per component when piped)."""
    from torchfit.compat.matrix import FAMILY_PACKAGES

    con = console()
    width = _error_width()
    con.print(f"[bold]torchfit resolve: the stack for {_esc(', '.join(plan.hosts))}[/]", soft_wrap=True)
    py = f"{plan.python_version}{'t' if plan.free_threaded else ''}" + (" (pyenv will install)" if plan.python_source == "pyenv" else "")
    rows: Sequence[tuple[str, str | None, str]] = [
        ("Python", py, plan.why.get("python", "")),
        ("torch", plan.torch, plan.why.get("torch", "")),
        ("variant", plan.variant, plan.why.get("variant", "")),
        ("CUDA" if not plan.rocm else "ROCm", plan.cuda or plan.rocm or "-",
         plan.why.get("cuda", "CPU build" if plan.variant == "cpu" else "")),
        ("cuDNN", plan.cudnn or ("unknown" if plan.cuda else "-"), plan.why.get("cudnn", "") if plan.cuda else ""),
        ("NCCL", plan.nccl or ("unknown" if plan.cuda else "-"), plan.why.get("nccl", "") if plan.cuda else ""),
        ("torchvision", plan.torchvision or "-", plan.why.get("torchvision", "")),
        ("torchaudio", plan.torchaudio or "-", plan.why.get("torchaudio", "")),
        ("index URL", redact(plan.index_url), plan.why.get("index_url", "")),
    ]
    col = 2 + 12 + 20
    for name, ver, why in rows:
        value = terminal_text(ver or "-")
        head = f"  {name:<12}{value:<20}"
        why = terminal_text(redact(why))
        if not why:
            con.print(_esc_plain(head.rstrip()), soft_wrap=True)
        elif width is None:
            con.print(_esc_plain(f"{head}{why}" if len(value) < 20 else f"{head} {why}"), soft_wrap=True)
        else:
            first = head if len(value) < 20 else f"  {name:<12}{value}"
            lines = [first.rstrip()] if len(value) >= 20 else []
            wrapped = _wrap(why, width, " " * col, " " * col).splitlines()
            if len(value) < 20 and wrapped:
                wrapped[0] = head + wrapped[0][col:]
            for line in lines + wrapped:
                con.print(_esc_plain(line), soft_wrap=True)
    for r in plan.reasons:
        _print_item(con, "[green]•[/] ", "• ", r, width)
    if plan.resolved:
        project_pins = sorted((n, v) for n, v in plan.resolved.items() if n not in FAMILY_PACKAGES)
        _print_item(con, "[green]•[/] ", "• ", f"project: {len(plan.project)} requirements, {len(plan.resolved)} "
                    "packages resolved by uv with the torch family pinned: "
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


def _esc_plain(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _print_item(con: Any, markup: str, plain: str, text: str, width: int | None) -> None:
    """One reason or warning: wrapped under its own start on a terminal."""
    text = terminal_text(redact(text))
    if width is None:
        con.print(markup + _esc_plain(text), soft_wrap=True)
        return
    lines = _wrap(text, width, " " * len(plain), " " * len(plain)).splitlines()
    con.print(markup + _esc_plain(lines[0].lstrip()), soft_wrap=True)
    for line in lines[1:]:
        con.print(_esc_plain(line), soft_wrap=True)


def render_facts(facts: HostFacts, data: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    table = Table(title=f"torchfit detect: {_esc(facts.name)}", title_justify="left")
    table.add_column("fact", style="bold")
    table.add_column("value")
    reasons = facts.reasons

    def val(key: str, text: str | None) -> str:
        if text:
            return _esc(text)
        why = reasons.get(key, "unknown, not read")
        return f"[yellow]{_esc(why)}[/]"

    table.add_row("driver", val("driver_version", facts.driver_version))
    if facts.gpus:
        for g in facts.gpus:
            mem = f", {g.memory_mib} MiB" if g.memory_mib else ""
            bus = f", {g.pci_bus_id}" if g.pci_bus_id else ""
            table.add_row(f"GPU {g.index}", _esc(g.label() + mem + bus))
    else:
        table.add_row("GPUs", f"none ({_esc(reasons.get('gpus', 'none found'))})")
    if facts.topology:
        table.add_row("links", _esc(", ".join(f"{k}: {v}" for k, v in sorted(facts.topology.items()))))
    table.add_row("glibc", val("glibc", facts.glibc))
    table.add_row("OS", val("os", facts.os))
    table.add_row("WSL", "yes" if facts.wsl else "no" if facts.wsl is False else val("wsl", None))
    table.add_row("CPU arch", val("arch", facts.arch))
    pys = ", ".join(f"{p.version} ({p.source})" for p in facts.pythons)
    table.add_row("Pythons", val("pythons", pys))
    table.add_row(
        "pyenv",
        val("pyenv", f"{facts.pyenv.version or ''} at {facts.pyenv.path}".strip()) if facts.pyenv else val("pyenv", None),
    )
    con.print(table)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(terminal_text(redact(text)))
