"""`torchfit detect`: this host's facts (the `--facts` format with `--json`), or with
`--slurm` every node of a Slurm cluster gathered into a fleet file (cli/commands/_fleet.py).
"""

from __future__ import annotations

import argparse

from torchfit.cli.options import slurm_name
from torchfit.errors import BadInput
from torchfit.inputs import seconds


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    det = subparsers.add_parser("detect", help="read this host: driver, GPUs, links, glibc, OS, Pythons, pyenv",
                                epilog=epilog)
    det.add_argument("--json", action="store_true", help="print one JSON object (the --facts format)")
    det.add_argument("--timeout", type=seconds(), default=10.0, metavar="S",
                     help="timeout for each probe command (default 10 s)")
    fleet = det.add_argument_group("a whole Slurm cluster (`torchfit docs cluster`)")
    fleet.add_argument("--slurm", action="store_true",
                       help="gather every node's facts through one srun into a fleet file (nodes grouped "
                            "by hardware)")
    fleet.add_argument("--partition", metavar="NAME", type=slurm_name, help="with --slurm: the nodes of this partition")
    fleet.add_argument("--nodelist", metavar="LIST",
                       help="with --slurm: only these nodes (Slurm notation, gpu[01-16])")
    fleet.add_argument("-o", "--output", metavar="FILE", help="with --slurm: also write the fleet file to FILE")
    fleet.add_argument("--deadline", type=seconds(), metavar="S",
                       help="with --slurm: stop waiting for the nodes after S seconds (default 60 + 3 x "
                            "--timeout); a node that has not answered is listed as such")
    # What each srun task runs: its facts framed for the gather (fleet.gather).
    det.add_argument("--fleet-task", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from torchfit.compat.facts import facts_to_json
    from torchfit.host import probe_host
    from torchfit.runner import Runner

    if args.slurm:
        from torchfit.cli.commands._fleet import run_detect_slurm

        return run_detect_slurm(args)
    if args.partition or args.nodelist or args.output or args.deadline is not None:
        raise BadInput("--partition, --nodelist, --output and --deadline go with --slurm")
    from torchfit.lock.uvbin import find_uv

    runner = Runner()
    facts = probe_host(runner, timeout=args.timeout, uv=find_uv(runner))
    data = facts_to_json(facts)
    if args.fleet_task:
        from torchfit.cli.commands._fleet import fleet_task

        return fleet_task(data)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("detect", data))
    else:
        from torchfit.cli.ui.facts import render_facts

        render_facts(facts, data)
    return 0
