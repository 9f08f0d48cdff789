"""A fleet's text: `detect --slurm`'s groups (one line each, and the nodes without facts), and
`resolve --each-group`'s plan per group under its hostlist."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchfit.inputs import terminal_text

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.plan import Plan
    from torchfit.errors import TorchfitError
    from torchfit.fleet.model import Fleet


def render_fleet(fleet: Fleet) -> None:
    """`detect --slurm` on stdout: format_fleet's lines."""
    for line in format_fleet(fleet):
        print(line)


def format_fleet(fleet: Fleet) -> list[str]:
    """One line per group (and per reason nodes were not gathered)."""
    gathered = sum(len(g.nodes) for g in fleet.groups)
    lost = sum(len(m.nodes) for m in fleet.missing)
    lines = [f"fleet: {gathered} node(s) in {len(fleet.groups)} group(s)"
             + (f", {lost} without facts" if lost else "") + (f"; {fleet.source}" if fleet.source else "")]
    rows = [(g.hostlist, g.signature) for g in fleet.groups]
    rows += [(m.hostlist, f"NO FACTS: {m.why}") for m in fleet.missing]
    width = min(max((len(r[0]) for r in rows), default=0), 32)
    lines += [f"  {name:<{width}}  {text}" for name, text in rows]
    return [terminal_text(line) for line in lines]  # nodes' facts and sinfo's reasons are their text


def render_group_plans(results: Sequence[tuple[HostFacts, Plan | None, TorchfitError | None]],
                       explain: bool) -> None:
    """`resolve --each-group`: each group's name, then its plan or why it has none."""
    from torchfit.cli.ui.plan import render_plan

    for host, plan, err in results:
        print(f"== {host.name}")
        if plan is not None:
            render_plan(plan, explain=explain)
        elif err is not None:
            print(f"no stack: {err.message}")
