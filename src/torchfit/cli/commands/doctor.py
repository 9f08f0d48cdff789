"""`torchfit doctor`: options, the choice of environment to inspect, and the report.

The checks live in `torchfit.doctor`; this module validates the input
(exit 2 on a bad path), picks the Python whose environment is inspected, runs the
checks and prints them: a report grouped by area (torchfit.cli.ui.doctor), or one
JSON object with `--json`. Exit 0 when no check failed,
1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchfit.errors import BadInput
from torchfit.inputs import seconds

if TYPE_CHECKING:
    from torchfit.checks import Check
    from torchfit.doctor.context import Context
    from torchfit.progress import Progress

LOG_LIMIT = 64 << 20  # read at most the last 64 MiB of a --log file

DESCRIPTION = """\
Diagnose a broken GPU / PyTorch setup: each check names what it looked at, what it
found and how to fix it. Areas: driver, build (torch against this host), shadowing
(which NCCL / cuDNN / CUDA runtime torch really loads), environment (CUDA_* and
NCCL_* variables, /dev/shm), topology (NVLink, sockets, WSL) and, with --log, known
error messages. The environment inspected is --env/--python, else the active venv
or conda env, else `python3` on PATH. docs/doctor.md lists every check."""


def add_parser(subparsers: Any, epilog: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "doctor",
        help="diagnose a broken GPU / PyTorch setup and say how to fix it",
        description=DESCRIPTION,
        epilog="Exit codes: 0 nothing failed, 1 a check failed, 2 bad input, 130 interrupted.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--env", metavar="PREFIX", help="inspect the venv or conda env at PREFIX")
    target.add_argument("--python", metavar="PATH", help="inspect the environment of this interpreter")
    p.add_argument("--log", metavar="FILE", help="also explain the error messages found in FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object (for CI)")
    p.add_argument("--root", metavar="DIR", default="/",
                   help="read /proc, /sys, /dev, /etc, /lib/modules under DIR instead of / (tests, images)")
    p.add_argument("--timeout", type=seconds(), default=10.0, metavar="S",
                   help="timeout for each tool it runs (default 10 s; importing torch gets at least 300 s)")
    p.add_argument("--node-check", action="store_true",
                   help="fast node health check for Slurm's HealthCheckProgram/Prolog: driver and environment "
                        "checks only (no torch), one line, exit 0 healthy or 1 with the reason (docs/cluster.md)")
    return p


def pick_python(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The interpreter whose environment is inspected (an absolute path), and why that one.

    Absolute because the worker runs in an empty temporary directory: `--env env`
    or `VIRTUAL_ENV=.` would name nothing there. Symlinks are kept (a venv's
    bin/python links to the base interpreter; resolving it would leave the venv).
    """
    python, why = _pick_python(args, environ)
    return (os.path.abspath(python) if python else None), why


def _pick_python(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str | None, str]:
    from torchfit.host.pythons import env_python

    if args.python:
        path = os.path.expanduser(args.python)
        if os.sep not in path:
            path = shutil.which(path) or path
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise BadInput(f"--python {args.python}: not an executable file")
        return path, "--python"
    if args.env:
        prefix = os.path.expanduser(args.env)
        if not os.path.isdir(prefix):
            raise BadInput(f"--env {args.env}: not a directory")
        candidate = env_python(prefix)
        if candidate:
            return candidate, "--env"
        raise BadInput(f"--env {args.env}: no bin/python3 or bin/python in it (not a venv or conda env)")
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(var)
        if prefix:
            candidate = env_python(prefix)
            if candidate:
                return candidate, f"the active env (${var})"
    found = shutil.which("python3", path=environ.get("PATH", os.defpath))
    if found:
        return found, "python3 on PATH"
    return None, "none found"


def read_log(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if size > LOG_LIMIT:
                fh.seek(size - LOG_LIMIT)
            data = fh.read(LOG_LIMIT)
    except IsADirectoryError:
        raise BadInput(f"--log {path}: is a directory") from None
    except OSError as exc:
        raise BadInput(f"--log {path}: cannot read ({exc.strerror or exc})") from None
    return data.decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    from torchfit.doctor import diagnose
    from torchfit.doctor.context import Context

    root = os.path.abspath(os.path.expanduser(args.root))
    if not os.path.isdir(root):
        raise BadInput(f"--root {args.root}: not a directory")
    environ = dict(os.environ)
    if args.node_check:
        return _node_check(args, root, environ)
    python, source = pick_python(args, environ)
    log_text = read_log(args.log)
    ctx = Context(
        root=root,
        environ=environ,
        python=python,
        python_source=source,
        log_path=args.log,
        log_text=log_text,
        timeout=args.timeout,
        worker_timeout=max(300.0, args.timeout),
    )
    checks = diagnose(ctx, _traces(args))
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print(json.dumps(report_json(checks, ctx), indent=2))
    else:
        from torchfit.cli.ui.doctor import render_report

        render_report(checks, ctx)
    return 1 if failed else 0


def _traces(args: argparse.Namespace) -> Progress | None:
    """Where a failing check's traceback goes: stderr under -v, nowhere otherwise."""
    from torchfit.progress import StderrProgress

    return StderrProgress() if getattr(args, "verbose", False) else None


def _node_check(args: argparse.Namespace, root: str, environ: dict[str, str]) -> int:
    import sys

    from torchfit.doctor.context import Context
    from torchfit.doctor.nodecheck import format_node_line, node_check

    if args.env or args.python or args.log:
        raise BadInput("--node-check looks at the node, not an environment: drop --env/--python/--log")
    ctx = Context(root=root, environ=environ, python=None, python_source="--node-check", timeout=args.timeout)
    checks, seconds = node_check(ctx, _traces(args))
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        data = report_json(checks, ctx)
        data["seconds"] = round(seconds, 3)
        print(json.dumps(data, indent=2))
    else:
        # One line on stdout whatever the verdict: a Prolog or health-check wrapper
        # passes it to `scontrol update ... reason=`.
        sys.stdout.write(f"torchfit node-check: {format_node_line(checks, seconds)}\n")
    return 1 if failed else 0


def report_json(checks: Sequence[Check], ctx: Context) -> dict[str, Any]:
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
