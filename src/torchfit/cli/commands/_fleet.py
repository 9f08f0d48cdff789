"""The CLI side of fleets: `detect --slurm` options and output, fleet files as `--facts`,
`--exclude` and `resolve --each-group`. The work is in torchfit.fleet."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from torchfit.cli.ui.jsonout import json_text
from torchfit.errors import BadInput, TorchfitError

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.matrix import Matrix
    from torchfit.compat.plan import Plan
    from torchfit.compat.request import Request
    from torchfit.planning import PlanSettings
    from torchfit.progress import Progress


def fleet_task(data: dict[str, Any]) -> int:
    import socket

    from torchfit.cli.ui.output import write_data
    from torchfit.fleet.gather import task_record

    # Slurm's name of the node (slurmd sets it for every task) and the host's own hostname,
    # which cloned images share: the login node attributes the answer by srun's placement.
    write_data(task_record(data, os.environ.get("SLURMD_NODENAME") or None, socket.gethostname()))
    return 0


def run_detect_slurm(args: argparse.Namespace) -> int:
    from torchfit.cli.ui.slurm import step_lines
    from torchfit.fleet.gather import gather
    from torchfit.fleet.model import fleet_to_json
    from torchfit.runner import Runner

    fleet = gather(Runner(), partition=args.partition, nodelist=args.nodelist, timeout=args.timeout,
                   bound=args.deadline, on_event=step_lines("detect --slurm"))
    data = fleet_to_json(fleet)
    if args.output:
        from torchfit.cli.ui.output import write_output

        write_output(args.output, json_text("fleet", data) + "\n", "--output")
    if args.json:
        print(json_text("fleet", data))
    else:
        from torchfit.cli.ui.fleet import render_fleet

        render_fleet(fleet)
    return 0 if fleet.groups else 1


def resolve_each_group(args: argparse.Namespace, hosts: list[HostFacts], request: Request, matrix: Matrix,
                       settings: PlanSettings, progress: Progress | None = None) -> int:
    """`resolve --each-group`: one plan per group, each through the planning step `resolve` takes
    (`make_plan`: with a project, uv's answer for that group); exit 1 when any group has none."""
    from torchfit.compat.plan import plan_to_json
    from torchfit.planning import make_plan

    if not args.facts or (len(hosts) < 2 and not any(h.source.startswith("fleet: ") for h in hosts)):
        raise BadInput("--each-group needs a fleet file (--facts FLEET.json from `torchfit detect --slurm`)")
    results: list[tuple[HostFacts, Plan | None, TorchfitError | None]] = []
    for host in hosts:
        try:
            results.append((host, make_plan([host], request, matrix, settings, progress=progress), None))
        except BadInput:
            raise
        except TorchfitError as exc:  # NoCompatibleSet, GpuFactsUnknown: that group's answer
            results.append((host, None, exc))
    if args.json:
        print(json_text("resolve-groups", {"ok": all(p is not None for _, p, _ in results), "groups": [
            {"nodes": h.name, **(plan_to_json(p) if p is not None else err.to_json() if err is not None else {})} for h, p, err in results
        ]}))
    else:
        from torchfit.cli.ui.fleet import render_group_plans

        render_group_plans(results, args.explain)
    return 0 if all(p is not None for _, p, _ in results) else 1
