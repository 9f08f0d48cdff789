"""`torchfit adopt --env PREFIX`: the command line of verify.adopt (an env's own torch as the base).

`add_parser` is cheap (argparse only). An env that is not there or has a lock already is bad
input (exit 2); a torch that fails on this host or contradicts the image's constraints is
refused (exit 1); nothing is written then.
"""

from __future__ import annotations

import argparse
import os

from torchfit.inputs import seconds


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "adopt",
        help="take an env's own torch (a container's, a conda env's) as the base that `add` fits packages around",
        description=(
            "Read the torch installed in PREFIX the way verify does (version, CUDA, arch list, NCCL), judge it "
            "against this host with verify's checks, honour the pip constraints file it finds (PIP_CONSTRAINT, "
            "else /etc/pip/constraint.txt), and write PREFIX/pylock.toml recording that torch as the base: "
            "`torchfit add` then holds the torch family to it and never replaces it."
        ),
        epilog=epilog + " See `torchfit docs adopt`.",
    )
    p.add_argument("--env", required=True, metavar="PREFIX",
                   help="the env (a venv, one made with --system-site-packages over a container's Python, a "
                        "conda env)")
    p.add_argument("--force", action="store_true", help="replace a pylock.toml PREFIX has already")
    p.add_argument("--timeout", type=seconds(), default=600.0, metavar="SECONDS",
                   help="the longest the reading of torch may stall (default 600)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    from torchfit.errors import BadInput
    from torchfit.interrupts import interrupts_raise
    from torchfit.verify.adopt import adopt

    if not args.env or not args.env.strip():
        raise BadInput("--env: give the env's directory")
    prefix = os.path.abspath(os.path.expanduser(args.env))
    with interrupts_raise():
        result = adopt(prefix, force=args.force, timeout=args.timeout, environ=os.environ)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("adopt", result.to_json()))
        return 0
    from torchfit.cli.ui.install import render_adopt_summary

    render_adopt_summary(result)
    return 0
