"""`torchfit doctor`: options, the choice of environment to inspect, and the report.

The checks live in `torchfit.doctor`; this module validates the input
(exit 2 on a bad path), picks the Python whose environment is inspected, runs the
checks and prints them: a report grouped by area (torchfit.cli.ui.doctor), or one
JSON object with `--json`. Exit 0 when no check failed,
1 otherwise.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchfit.errors import BadInput
from torchfit.inputs import MAX_LOG_BYTES, read_text_file, seconds
from torchfit.jsontypes import JsonObject

if TYPE_CHECKING:
    from torchfit.checks import Check
    from torchfit.doctor.context import Context
    from torchfit.progress import Progress

DESCRIPTION = """\
Diagnose a broken GPU / PyTorch setup: each check names what it looked at, what it
found and how to fix it. Areas: driver, build (torch against this host), shadowing
(which NCCL / cuDNN / CUDA runtime torch really loads), environment (CUDA_* and
NCCL_* variables, /dev/shm), topology (NVLink, sockets, WSL) and, with --log, known
error messages. The environment inspected is --env/--python, else the active venv
or conda env, else `python3` on PATH. `--list` names every check; `--fix` makes
the repairs torchfit knows are safe, in an env torchfit built only (`--fix --dry-run`
shows them first). `torchfit docs doctor` explains every check."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "doctor",
        help="diagnose a broken GPU / PyTorch setup and say how to fix it",
        description=DESCRIPTION,
        epilog="Exit codes: 0 nothing failed, 1 a check failed (with --fix: or a repair failed, or the env is in "
               "use), 2 bad input, 130 interrupted.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--env", metavar="PREFIX", help="inspect the venv or conda env at PREFIX")
    target.add_argument("--python", metavar="PATH", help="inspect the environment of this interpreter")
    p.add_argument("--log", metavar="FILE",
                   help=f"also explain the error messages found in FILE (its last {MAX_LOG_BYTES >> 20} MiB; "
                        "- is standard input)")
    p.add_argument("--json", action="store_true", help="print one JSON object (for CI)")
    p.add_argument("--root", metavar="DIR", default="/",
                   help="read /proc, /sys, /dev, /etc, /lib/modules under DIR instead of / (tests, images)")
    p.add_argument("--timeout", type=seconds(), default=10.0, metavar="S",
                   help="timeout for each tool it runs (default 10 s; importing torch gets at least 300 s)")
    p.add_argument("--node-check", action="store_true",
                   help="fast node health check for Slurm's HealthCheckProgram/Prolog: driver and environment "
                        "checks only (no torch), one line, exit 0 healthy or 1 with the reason (`torchfit docs cluster`)")
    p.add_argument("--fix", action="store_true",
                   help="repair what a check found, where the repair is safe and known, in an env torchfit built "
                        "only (--env PREFIX or the active env): files that differ from the lock reinstalled from "
                        "it, a lost torch installed again from it (nothing else replaced), the line setting a variable "
                        "removed from bin/torchfit-env; then check again")
    p.add_argument("--dry-run", action="store_true", help="with --fix: show the repairs, change nothing")
    p.add_argument("--allow-in-use", action="store_true",
                   help="with --fix: reinstall even while processes use the env (as `torchfit add --allow-in-use`): "
                        "what they import later is the new files")
    p.add_argument("--list", action="store_true", help="list the checks with their ids and the repair --fix has")
    return p


def run(args: argparse.Namespace) -> int:
    from torchfit.doctor import diagnose
    from torchfit.doctor.context import Context

    if args.dry_run and not args.fix:
        raise BadInput("--dry-run shows what --fix would do: give --fix too")
    if args.allow_in_use and not args.fix:
        raise BadInput("--allow-in-use is for --fix (a reinstall under running processes): give --fix too")
    if args.list:
        from torchfit.cli.commands._doctor_fix import list_checks

        return list_checks(args.json)
    root = os.path.abspath(os.path.expanduser(args.root))
    if not os.path.isdir(root):
        raise BadInput(f"--root {args.root}: not a directory")
    environ = dict(os.environ)
    if args.node_check:
        if args.fix:
            raise BadInput("--node-check only looks: drop --fix (run `torchfit doctor --fix --env PREFIX`)")
        return _node_check(args, root, environ)
    from torchfit.cli.target import target_python

    python, prefix, source = target_python(args, environ)
    lock = None
    if args.fix:  # refused before anything runs when the env is not one torchfit built
        from torchfit.cli.commands._doctor_fix import fix_target

        prefix, lock = fix_target(prefix, source)
    # The end of the log (its error is there): its last MAX_LOG_BYTES, "-" is standard input.
    log_text = read_text_file(args.log, "--log", limit=MAX_LOG_BYTES, tail=True) if args.log else None

    def context() -> Context:  # what the checks look at; --fix looks again after its repairs
        return Context(root=root, environ=environ, python=python, python_source=source, log_path=args.log,
                       log_text=log_text, timeout=args.timeout, worker_timeout=max(300.0, args.timeout))

    ctx = context()
    checks = diagnose(ctx, _traces(args))
    if args.fix:
        from torchfit.cli.commands._doctor_fix import run_fix

        def again() -> tuple[list[Check], Context]:
            fresh = context()
            return diagnose(fresh, _traces(args)), fresh

        assert prefix is not None and lock is not None  # fix_target returned both
        return run_fix(args, prefix, lock, checks, ctx, again, report_json)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("doctor", report_json(checks, ctx)))
    else:
        from torchfit.cli.ui.doctor import render_report

        render_report(checks, ctx)
    return 1 if failed else 0


def _traces(args: argparse.Namespace) -> Progress | None:
    """Where a failing check's traceback goes: stderr under -v, nowhere otherwise."""
    from torchfit.progress import StderrProgress

    return StderrProgress() if getattr(args, "verbose", False) else None


def _node_check(args: argparse.Namespace, root: str, environ: dict[str, str]) -> int:
    from torchfit.doctor.context import Context
    from torchfit.doctor.nodecheck import node_check

    if args.env or args.python or args.log:
        raise BadInput("--node-check looks at the node, not an environment: drop --env/--python/--log")
    ctx = Context(root=root, environ=environ, python=None, python_source="--node-check", timeout=args.timeout)
    checks, seconds = node_check(ctx, _traces(args))
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        data = report_json(checks, ctx)
        data["seconds"] = round(seconds, 3)
        print(json_text("doctor", data))
    else:
        from torchfit.cli.ui.doctor import render_node_line

        render_node_line(checks, seconds)
    return 1 if failed else 0


def report_json(checks: Sequence[Check], ctx: Context) -> JsonObject:
    from torchfit.doctor.model import check_to_json, summary

    return {
        "ok": not any(c.status == "fail" for c in checks),
        "summary": summary(checks),
        "python": ctx.python,
        "python_source": ctx.python_source,
        "root": ctx.root,
        "log": ctx.log_path,
        "checks": [check_to_json(c) for c in checks],
    }
