"""`torchfit verify`'s report: checks, nodes side by side, busbw bars, the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchfit.cli.ui.console import console, table
from torchfit.text import format_bytes_iec

if TYPE_CHECKING:
    from torchfit.verify.model import Report

_MARK = {"pass": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]", "skip": "[dim]-[/]"}


def render_report(report: Report) -> None:
    """The human report: checks, nodes side by side, busbw bars, the verdict."""
    from rich.markup import escape

    con = console()
    con.print(
        f"[bold]torchfit verify[/] {escape(report.python)}"
        + (f" (env {escape(report.env_prefix)})" if report.env_prefix else "")
    )
    for c in report.checks:
        con.print(
            f" {_MARK.get(c.status, '?')} [bold]{escape(c.name)}[/]: {escape(c.summary)}",
            soft_wrap=True,
        )
        for line in c.detail:
            con.print(f"     {escape(line)}", soft_wrap=True)
        if c.hint and c.status in ("fail", "warn"):
            con.print(f"     [cyan]hint:[/] {escape(c.hint)}", soft_wrap=True)
    if report.ddp:
        for note in report.ddp.get("notes") or []:
            con.print(f" [dim]note: {escape(note)}[/]")
    if len(report.nodes) > 1 or report.node_disagreements:
        grid = table(title="nodes", title_justify="left")
        grid.add_column("")
        for n in report.nodes:
            grid.add_column(f"node {n['node']} ({escape(str(n['host']))})")
        bad = {d.split(":")[0] for d in report.node_disagreements}
        from torchfit.verify.peers import ENV_COMPARED

        for key in ("driver", "torch", "cuda", "cudnn", "nccl", "nccl_path", *ENV_COMPARED):
            style = "red" if key in bad else ""
            grid.add_row(
                key,
                *[
                    f"[{style}]{escape(str(n.get(key)))}[/]" if style else escape(str(n.get(key)))
                    for n in report.nodes
                ],
            )
        con.print(grid)
    bw = report.bandwidth
    if bw and bw.get("rows"):
        promise = bw.get("promise_gbps")
        top = max([r["busbw"] for r in bw["rows"]] + [promise or 0.0]) or 1.0
        width = max(10, min(40, con.width - 30))  # the bar: what the size and figures leave
        grid = table(
            title="all-reduce bus bandwidth (float32)"
            + (f", links promise {promise:.0f} GB/s" if promise else ""),
            title_justify="left",
            box=None,
            pad_edge=False,
        )
        grid.add_column("size", justify="right")
        grid.add_column("busbw GB/s", justify="right")
        if promise:
            grid.add_column("of promise", justify="right")
        grid.add_column("")
        for r in bw["rows"]:
            filled = round(r["busbw"] / top * width)
            colour = (
                "green"
                if not promise or r["busbw"] >= promise * bw.get("warn_below_fraction", 0.4)
                else "yellow"
            )
            bar = f"[{colour}]{'█' * filled}[/]{'·' * (width - filled)}"
            cells = [format_bytes_iec(r["bytes"]), f"{r['busbw']:.1f}"]
            if promise:
                cells.append(f"{r['busbw'] / promise:.0%}")
            grid.add_row(*cells, bar)
        con.print(grid)
    t = report.timings
    con.print(
        "[dim]"
        + ", ".join(f"{k} {v:.1f} s" for k, v in t.items() if isinstance(v, (int, float)))
        + "[/]",
        soft_wrap=True,
    )
    if report.work_dir:
        con.print(f"[dim]worker logs kept in {escape(report.work_dir)}[/]")
    colour = "green" if report.ok else "red"
    con.print(f"[bold {colour}]verify: {escape(report.verdict())}[/]", soft_wrap=True)
