"""`torchfit resolve`: one consistent set of versions for the host (or `--facts` hosts, a
fleet file's groups), with every choice explained; `--json` is the plan contract.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    from torchfit.cli.options import add_resolve_options, add_source_options

    res = subparsers.add_parser("resolve", help="pick one consistent set of versions and explain every choice",
                                epilog=epilog)
    add_resolve_options(res)
    add_source_options(res)
    res.add_argument("--json", action="store_true", help="print one JSON object")
    res.add_argument("--explain", action="store_true", help="list what was ruled out and by which fact")
    res.add_argument("--no-build", action="store_true",
                     help="never build a package from source to plan (wheels only; uv's --no-build)")
    res.add_argument("--each-group", action="store_true",
                     help="with a fleet file: one plan per group of nodes instead of one for all")


def run(args: argparse.Namespace) -> int:
    from torchfit.cache import load_matrix
    from torchfit.cli.options import check_source_options
    from torchfit.cli.settings import load_hosts, make_request, plan_settings
    from torchfit.compat.plan import plan_to_json
    from torchfit.planning import make_plan
    from torchfit.progress import StderrProgress

    matrix = load_matrix(args.matrix)
    check_source_options(args)
    request = make_request(args, matrix)
    if args.each_group:
        from torchfit.cli.commands._fleet import resolve_each_group

        return resolve_each_group(args, load_hosts(args), request, matrix, plan_settings(args, request.project),
                                  StderrProgress())
    hosts = load_hosts(args)
    # NoCompatibleSet: the boundary prints it (exit 1)
    plan = make_plan(hosts, request, matrix, plan_settings(args, request.project), progress=StderrProgress())
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("resolve", plan_to_json(plan)))
    else:
        from torchfit.cli.ui.plan import render_plan

        render_plan(plan, explain=args.explain)
    return 0
