"""`torchfit verify`: arguments, choosing the interpreter, and rendering the report.

Which Python: cli/target.py's rule, doctor's too: `--env PREFIX` (its bin/python),
`--python PATH` (a path or a name on PATH), else the active env, else the `python3`
on PATH: the interpreter a user would type, not the one running torchfit (torchfit
may live in its own pipx environment without torch). The orchestration is
torchfit.verify; this module parses, and the report is rendered by
torchfit.cli.ui.verify (never for --json).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING

from torchfit.cli.options import slurm_name, slurm_time
from torchfit.errors import BadInput
from torchfit.inputs import check_port_text, count, port, seconds

if TYPE_CHECKING:
    from torchfit.verify.model import Options

HELP = "prove a torch environment on this host: runtime versions, DDP smoke test, bandwidth"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "verify",
        help=HELP,
        epilog=epilog,
        description="Inspect a torch environment (the libraries that really run, GPU arch coverage, a kernel per "
        "GPU), run a DDP smoke test under torchrun, and sweep all-reduce bandwidth. Every phase has a "
        "timeout; nothing is left running. When the inspection has already failed the gpus check (a GPU "
        "host whose torch sees no GPU), verify stops there: the DDP test and the sweep are reported as "
        "skipped, not run.",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--env", metavar="PREFIX", help="the environment to verify (a venv or conda prefix)"
    )
    which.add_argument(
        "--python", metavar="PATH", help="its interpreter (default: the active venv or conda env, else python3 on PATH)"
    )
    p.add_argument(
        "--nproc",
        type=count(minimum=1, maximum=1024),
        metavar="N",
        help="processes per node (default: one per visible GPU; 2 with gloo)",
    )
    p.add_argument(
        "--backend", choices=("nccl", "gloo"), help="default: nccl when torch sees a GPU, else gloo"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--timeout",
        type=seconds(),
        default=120.0,
        metavar="S",
        help="a stage that makes no progress for S seconds is stalled: killed and reported (default 120)",
    )
    bw = p.add_mutually_exclusive_group()
    bw.add_argument(
        "--no-bandwidth",
        dest="bandwidth",
        action="store_false",
        default=None,
        help="skip the all-reduce bandwidth sweep",
    )
    bw.add_argument(
        "--bandwidth",
        dest="bandwidth",
        action="store_true",
        help="run the sweep with gloo too (default sizes 1-16 MiB there)",
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        metavar="SIZE",
        help="sweep sizes, e.g. 1M 64M 1G or 1M,8G (default 1 MiB..1 GiB in powers of two)",
    )
    p.add_argument(
        "--iters", type=count(minimum=1, maximum=1_000_000), metavar="N", help="timed all-reduces per size (default 50..10 by size)"
    )
    p.add_argument(
        "--warmup", type=count(minimum=0, maximum=1_000_000), metavar="N", help="warmup all-reduces per size (default 5)"
    )
    p.add_argument(
        "--lock",
        metavar="FILE",
        help="the lock to compare with (default PREFIX/pylock.toml if present)",
    )
    p.add_argument(
        "--keep", action="store_true", help="keep the work directory (worker logs) even on success"
    )
    multi = p.add_argument_group("several nodes (run the same command on every node)")
    multi.add_argument("--nnodes", type=count(minimum=1, maximum=65536), default=1, metavar="N")
    multi.add_argument("--node-rank", type=count(minimum=0, maximum=65535), default=0, metavar="R")
    multi.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="torchrun c10d rendezvous (on one of the nodes)",
    )
    multi.add_argument("--rdzv-id", default="torchfit-verify", metavar="ID")
    multi.add_argument(
        "--rdzv-timeout",
        type=seconds(),
        default=300.0,
        metavar="S",
        help="how long to wait for every node to join (default 300)",
    )
    multi.add_argument(
        "--master-addr",
        metavar="HOST",
        help="static rendezvous instead of c10d (with --master-port)",
    )
    multi.add_argument("--master-port", type=port, metavar="PORT")
    slurm = p.add_argument_group("Slurm: verify across nodes through srun (`torchfit docs cluster`)")
    slurm.add_argument("--slurm", action="store_true",
                       help="run on N nodes through one srun (inside an allocation: a step of it), torchrun's "
                            "c10d rendezvous on the first node, one report of every node")
    slurm.add_argument("--print-script", action="store_true",
                       help="with --slurm: print the equivalent sbatch script instead of running")
    slurm.add_argument("--nodes", type=count(minimum=1, maximum=65536), metavar="N")
    slurm.add_argument("--nodelist", metavar="LIST", help="these nodes (Slurm notation, gpu[01-04])")
    slurm.add_argument("--gpus-per-node", type=count(minimum=1, maximum=1024), metavar="G",
                       help="with --print-script: GPUs per node (srun runs use --nproc)")
    slurm.add_argument("--rdzv-port", type=port, default=29400, metavar="PORT",
                       help="the c10d rendezvous port on the first node (default 29400)")
    # What each srun task runs: its place in the run from srun's variables, its report framed.
    slurm.add_argument("--slurm-task", action="store_true", help=argparse.SUPPRESS)
    slurm.add_argument("--partition", type=slurm_name, metavar="NAME")
    slurm.add_argument("--account", type=slurm_name, metavar="NAME")
    slurm.add_argument("--time", type=slurm_time, default="00:15:00", metavar="HH:MM:SS")


# A host name, IPv4 or [IPv6] address: nothing a shell or torchrun would read differently.
_HOST = re.compile(r"^(?:[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])$")


def find_python(args: argparse.Namespace) -> tuple[str, str | None]:
    """(interpreter path, env prefix or None) by cli.target's rule; BadInput (exit 2) when there is none."""
    from torchfit.cli.target import target_python

    target = target_python(args, os.environ)
    if target.python is None:
        raise BadInput("no python3 on PATH: give --python PATH or --env PREFIX")
    return target.python, target.prefix


def _options(args: argparse.Namespace, python: str, prefix: str | None) -> Options:
    from torchfit.verify.model import Options
    from torchfit.verify.sizes import parse_sizes

    # --nproc, --timeout and --nnodes are in range already (their argparse type=).
    if not args.node_rank < args.nnodes:
        raise BadInput(
            f"--node-rank {args.node_rank} is outside 0..{args.nnodes - 1} (--nnodes {args.nnodes})"
        )
    if args.nnodes > 1 and not args.rdzv_endpoint and not (args.master_addr and args.master_port):
        raise BadInput(
            "--nnodes > 1 needs --rdzv-endpoint HOST:PORT (or --master-addr and --master-port)"
        )
    if args.rdzv_endpoint:
        host, sep, rdzv_port = args.rdzv_endpoint.rpartition(":")
        if not sep or not host or not _HOST.match(host):
            raise BadInput(f"--rdzv-endpoint {args.rdzv_endpoint}: expected HOST:PORT")
        check_port_text(rdzv_port, f"--rdzv-endpoint {args.rdzv_endpoint}")
    if args.master_addr and not _HOST.match(args.master_addr):
        raise BadInput(f"--master-addr {args.master_addr!r}: not a host name or address")
    if args.lock and not os.path.isfile(args.lock):
        raise BadInput(f"--lock {args.lock}: no such file")
    for flag in ("iters", "warmup"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "iters" else 0):
            raise BadInput(f"--{flag} {value}: too small")
    return Options(
        python=python,
        env_prefix=prefix,
        nproc=args.nproc,
        backend=args.backend,
        timeout=args.timeout,
        bandwidth=args.bandwidth,
        sizes=parse_sizes(args.sizes) if args.sizes else None,
        iters=args.iters,
        warmup=args.warmup,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
        master_addr=args.master_addr,
        master_port=args.master_port,
        rdzv_timeout=args.rdzv_timeout,
        lock=os.path.abspath(args.lock) if args.lock else None,
        keep=args.keep,
    )


def run(args: argparse.Namespace) -> int:
    if args.slurm_task:
        return _slurm_task(args)
    if args.print_script and not args.slurm:
        raise BadInput("--print-script goes with --slurm")
    if args.slurm and args.print_script:
        return _slurm(args)
    if args.slurm:
        return _slurm_run(args)
    python, prefix = find_python(args)
    opts = _options(args, python, prefix)
    from torchfit.progress import StderrProgress
    from torchfit.verify import verify

    # The one progress protocol (torchfit.progress): verify reports its phases through it.
    report = verify(opts, None if args.json else StderrProgress(prefix="torchfit verify:"))
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("verify", report.to_json(), default=str))
    else:
        from torchfit.cli.ui.verify import render_report

        render_report(report)
    return 0 if report.ok else 1


def _slurm_task(args: argparse.Namespace) -> int:
    """One node's part of `verify --slurm`: the ordinary multi-node verify, its report framed."""
    from torchfit.fleet.srun import framed
    from torchfit.runner import Runner
    from torchfit.verify import verify
    from torchfit.verify.slurm import task_rendezvous

    place = task_rendezvous(os.environ, Runner(), args.rdzv_port)
    for key, value in place.items():
        setattr(args, key, value)
    python, prefix = find_python(args)
    report = verify(_options(args, python, prefix), None)
    from torchfit.cli.ui.output import write_data

    write_data(framed(report.to_json(), os.environ.get("SLURMD_NODENAME") or None, os.uname().nodename))
    return 0 if report.ok else 1


def _slurm_run(args: argparse.Namespace) -> int:
    """`verify --slurm`: one srun, a task per node, one report (verify.slurm)."""
    from torchfit.fleet.hostlist import expand_hostlist
    from torchfit.runner import Runner
    from torchfit.verify.slurm import run_slurm_verify

    python, prefix = find_python(args)
    if args.nodelist:
        expand_hostlist(args.nodelist)  # BadInput on a malformed list, before anything runs
    if not (args.nodes or args.nodelist or os.environ.get("SLURM_JOB_ID")):
        raise BadInput("--slurm needs --nodes N or --nodelist LIST (or run it inside an allocation)")
    if args.nnodes != 1 or args.rdzv_endpoint or args.master_addr:
        raise BadInput("--slurm sets the nodes and the rendezvous itself: drop --nnodes/--rdzv-endpoint/--master-addr")
    _options(args, python, prefix)  # the same checks a node will make, here, once
    task = _task_argv(args, python, prefix)
    # doctor's judgement of what srun will export to every node, here, before anything starts;
    # each node judges its own interfaces itself (its task runs the same check).
    from torchfit.verify.environment import judge_environment
    from torchfit.verify.slurm import SlurmRun

    pre = [c for c in judge_environment(os.environ, nccl=args.backend != "gloo", gpu_count=None,
                                        multi_node="verify --slurm", interfaces=False)
           if c.status in ("fail", "warn")]
    # Each stage is bounded on the node; the whole run on top: rendezvous, two stages, start-up.
    bound = args.rdzv_timeout + 3 * args.timeout + 60
    if any(c.status == "fail" for c in pre):
        run = SlurmRun([], pre=pre)
    else:
        # At once, before srun waits on the queue (issue 26, item 5): what is asked of Slurm, and the bound.
        from torchfit.progress import StderrProgress

        where = args.nodelist or (f"{args.nodes} node(s)" if args.nodes else "this allocation's nodes")
        StderrProgress().info(
            f"verify --slurm: one srun for {where}"
            + (f" in partition {args.partition}" if args.partition else "")
            + f", a task per node; waiting for the allocation and the nodes' answers (at most {bound:g} s)")
        from torchfit.cli.ui.slurm import step_lines

        total = args.nodes or (len(expand_hostlist(args.nodelist)) if args.nodelist else None)
        run = run_slurm_verify(Runner(), task, nodes=args.nodes, nodelist=args.nodelist,
                               partition=args.partition, account=args.account, time_limit=args.time,
                               bound=bound, environ=os.environ, on_event=step_lines("verify --slurm", total))
        run.pre = pre
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("verify-slurm", run.to_json(), default=str))
    else:
        from torchfit.cli.ui.slurm import render_slurm_run

        render_slurm_run(run)
    return 0 if run.ok else 1


def _task_argv(args: argparse.Namespace, python: str, prefix: str | None) -> list[str]:
    """The command each node's task runs: `verify --slurm-task --json` with this run's options."""
    task = [sys.executable, "-m", "torchfit", "verify", "--slurm-task", "--json",
            "--rdzv-port", str(args.rdzv_port), "--timeout", f"{args.timeout:g}",
            "--rdzv-timeout", f"{args.rdzv_timeout:g}"]
    task += ["--env", prefix] if prefix else ["--python", python]
    for flag, value in (("--nproc", args.nproc), ("--backend", args.backend), ("--iters", args.iters),
                        ("--warmup", args.warmup), ("--lock", args.lock)):
        if value is not None:
            task += [flag, str(value)]
    if args.bandwidth is not None:
        task.append("--bandwidth" if args.bandwidth else "--no-bandwidth")
    if args.sizes:
        task += ["--sizes", *args.sizes]
    if args.keep:
        task.append("--keep")
    return task


def _slurm(args: argparse.Namespace) -> int:
    from torchfit.verify.slurm import format_slurm_script

    if not args.nodes or args.nodes < 1 or not args.gpus_per_node or args.gpus_per_node < 1:
        raise BadInput("--slurm --print-script needs --nodes N and --gpus-per-node G")
    python = os.path.abspath(args.env + "/bin/python") if args.env else args.python or "python3"
    extra = []
    if args.timeout != 120.0:
        extra += ["--timeout", f"{args.timeout:g}"]
    if args.bandwidth is False:
        extra.append("--no-bandwidth")
    if args.json:
        extra.append("--json")
    from torchfit.cli.ui.output import write_data

    write_data(
        format_slurm_script(
            args.nodes,
            args.gpus_per_node,
            python,
            [sys.executable, "-m", "torchfit"],
            partition=args.partition,
            account=args.account,
            time_limit=args.time,
            extra=extra,
        )
        + "\n"
    )
    return 0
