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
from torchfit.compat.request import Plan
from torchfit.errors import NoCompatibleSet, TorchfitError
from torchfit.redact import redact

if TYPE_CHECKING:
    from rich.console import Console


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def render_error(err: TorchfitError, verbose: bool = False) -> None:
    """One line for what failed (plus conflicts and a hint where there are some), on stderr."""
    out = sys.stderr
    out.write(redact(f"torchfit: error: {err.message}") + f"  [{err.reference}]\n")
    if isinstance(err, NoCompatibleSet):
        for line in err.conflicts[1:]:
            out.write(redact(f"  - {line}") + "\n")
        for hint in err.hints:
            out.write(redact(f"  hint: {hint}") + "\n")
    elif err.hint:
        out.write(redact(f"  hint: {err.hint}") + "\n")
    tail = getattr(err, "tail", None)
    if tail:
        out.write("  last lines of the log:\n")
        for line in str(tail).splitlines()[-20:]:
            out.write(redact(f"    {line}") + "\n")


def render_plan(plan: Plan, explain: bool = False) -> None:
    from rich.table import Table

    con = console()
    table = Table(title="torchfit resolve: the stack for " + ", ".join(plan.hosts), title_justify="left")
    table.add_column("component", style="bold", no_wrap=True)
    table.add_column("version", overflow="fold")
    table.add_column("why", overflow="fold")
    py = f"{plan.python_version}" + (" (pyenv will install)" if plan.python_source == "pyenv" else "")
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
    for name, ver, why in rows:
        table.add_row(name, ver or "-", why)
    con.print(table)
    for r in plan.reasons:
        con.print(f"[green]•[/] {_esc(r)}", soft_wrap=True)
    for w in plan.warnings:
        con.print(f"[yellow]warning:[/] {_esc(w)}", soft_wrap=True)
    if explain and not plan.ruled_out:
        con.print("\nRuled out: nothing; this is the build torchfit prefers most for these hosts.")
    elif explain:
        con.print(f"\n[bold]Ruled out ({len(plan.ruled_out)} builds preferred over this one):[/]")
        for line in plan.ruled_out:
            con.print(f"  [red]✗[/] {_esc(line)}", soft_wrap=True)
    elif plan.ruled_out:
        con.print(f"[dim]{len(plan.ruled_out)} preferred builds were ruled out: --explain lists them[/]")


def render_facts(facts: HostFacts, data: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    table = Table(title=f"torchfit detect: {facts.name}", title_justify="left")
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

    return escape(redact(text))
