"""`torchfit detect`'s table of this host's facts (the reason beside every fact not read)."""

from __future__ import annotations

from torchfit.cli.ui.console import console, esc, table
from torchfit.compat.facts import HostFacts
from torchfit.jsontypes import JsonObject


def render_facts(facts: HostFacts, data: JsonObject) -> None:

    con = console()
    grid = table(title=f"torchfit detect: {esc(facts.name)}", title_justify="left")
    grid.add_column("fact", style="bold")
    grid.add_column("value")
    reasons = facts.reasons

    def val(key: str, text: str | None) -> str:
        if text:
            return esc(text)
        why = reasons.get(key, "unknown, not read")
        return f"[yellow]{esc(why)}[/]"

    grid.add_row("driver", val("driver_version", facts.driver_version))
    if facts.gpus:
        for g in facts.gpus:
            mem = f", {g.memory_mib} MiB" if g.memory_mib else ""
            bus = f", {g.pci_bus_id}" if g.pci_bus_id else ""
            grid.add_row(f"GPU {g.index}", esc(g.label() + mem + bus))
    else:
        grid.add_row("GPUs", f"none ({esc(reasons.get('gpus', 'none found'))})")
    if facts.topology:
        grid.add_row("links", esc(", ".join(f"{k}: {v}" for k, v in sorted(facts.topology.items()))))
    grid.add_row("glibc", val("glibc", facts.glibc))
    grid.add_row("OS", val("os", facts.os))
    grid.add_row("WSL", "yes" if facts.wsl else "no" if facts.wsl is False else val("wsl", None))
    grid.add_row("CPU arch", val("arch", facts.arch))
    pys = ", ".join(f"{p.version} ({p.source})" for p in facts.pythons)
    grid.add_row("Pythons", val("pythons", pys))
    grid.add_row(
        "pyenv",
        val("pyenv", f"{facts.pyenv.version or ''} at {facts.pyenv.path}".strip()) if facts.pyenv else val("pyenv", None),
    )
    con.print(grid)
