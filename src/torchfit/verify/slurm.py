"""`torchfit verify --slurm`: verify on every node of an allocation through one srun,
joined by torchrun's c10d rendezvous on the first node, and one report of all of them;
`--print-script` prints the equivalent sbatch script instead (format_slurm_script).

What runs where: the login node runs one `srun --ntasks-per-node=1` (fleet.srun); each
task runs this torchfit's `verify --slurm-task`, which reads its place in the run from
srun's variables (task_rendezvous) and runs the ordinary multi-node verify (torchrun,
c10d on the step's first node); each prints its report framed, and the login node
combines them (SlurmRun): every node's checks, the nodes-agree table, the failed node
named."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchfit.checks import Check
from torchfit.errors import BadInput
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist
from torchfit.fleet.srun import (
    node_address,
    parse_task_errors,
    read_step,
    run_srun,
    srun_complaint,
)
from torchfit.jsontypes import JsonObject
from torchfit.redact import redact
from torchfit.runner import Runner
from torchfit.verify.model import check_to_json
from torchfit.verify.peers import COMPARED, ENV_COMPARED


def format_slurm_script(
    nodes: int,
    gpus_per_node: int,
    python: str,
    torchfit_cmd: Sequence[str],
    *,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str = "00:15:00",
    port: int = 29400,
    extra: Sequence[str] = (),
) -> str:
    """An sbatch script: one task per node, each running `torchfit verify` with
    torchrun's c10d rendezvous on the first node of the allocation."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# torchfit verify on {nodes} node(s) x {gpus_per_node} GPU(s): every node inspects itself and",
        "# runs its share of one DDP smoke test; torchrun's c10d rendezvous on the first node joins them,",
        "# and each node prints every node's versions side by side. Submit: sbatch THIS_FILE",
        "#SBATCH --job-name=torchfit-verify",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --output=torchfit-verify-%j.out",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [
        "set -euo pipefail",
        "",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'export TORCHFIT_VERIFY_ENDPOINT="$head_node:${{TORCHFIT_RDZV_PORT:-{port}}}"',
        f"export TORCHFIT_VERIFY_PYTHON={q(python)}",
        f"export TORCHFIT_VERIFY_CMD={q(' '.join(q(c) for c in torchfit_cmd))}",
        f"export TORCHFIT_VERIFY_EXTRA={q(' '.join(q(c) for c in extra))}",
        "",
        "# One task per node; SLURM_NODEID and SLURM_JOB_ID are expanded by each task's shell.",
        "srun --ntasks-per-node=1 --kill-on-bad-exit=0 --label bash -c '",
        '  exec $TORCHFIT_VERIFY_CMD verify --python "$TORCHFIT_VERIFY_PYTHON" \\',
        f'    --nnodes "$SLURM_JOB_NUM_NODES" --node-rank "$SLURM_NODEID" --nproc {gpus_per_node} \\',
        '    --rdzv-endpoint "$TORCHFIT_VERIFY_ENDPOINT" --rdzv-id "torchfit-$SLURM_JOB_ID" $TORCHFIT_VERIFY_EXTRA\'',
        "",
    ]
    return "\n".join(lines)


# --- running it: one srun, one `torchfit verify` per node, one report -----------------------

# Everything about a node's part in the run comes from the variables srun sets for its task
# (srun(1) "OUTPUT ENVIRONMENT VARIABLES"): the step's nodes, this node's index, the job.
STEP_NODES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
STEP_COUNT = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")


def task_rendezvous(environ: Mapping[str, str], runner: Runner, port: int) -> dict[str, Any]:
    """A node's place in the run, inside its srun task: nnodes, node_rank, the c10d endpoint
    on the step's first node (its NodeAddr, as the other nodes reach it) and an id unique to
    the step. BadInput outside an srun task."""
    nodelist = next((environ[k] for k in STEP_NODES if environ.get(k)), None)
    count = next((environ[k] for k in STEP_COUNT if environ.get(k)), None)
    if not nodelist or not count or "SLURM_NODEID" not in environ:
        raise BadInput("--slurm-task runs only inside an srun task (SLURM_NODEID, SLURM_STEP_NODELIST unset)")
    head = expand_hostlist(nodelist)[0]
    return {
        "nnodes": int(count),
        "node_rank": int(environ["SLURM_NODEID"]),
        "rdzv_endpoint": f"{node_address(runner, head)}:{port}",
        "rdzv_id": f"torchfit-{environ.get('SLURM_JOB_ID', 'job')}-{environ.get('SLURM_STEP_ID', '0')}",
    }


def verify_srun_argv(task: Sequence[str], *, nodes: int | None, nodelist: str | None, partition: str | None,
                     account: str | None, time_limit: str | None, immediate: int | None) -> list[str]:
    """One srun: a task per node, each running `task` (this torchfit's `verify --slurm-task ...`)."""
    # --verbose: srun says where it starts each task (fleet.srun.parse_placement) and its allocation.
    argv = ["srun", "--verbose", "--job-name=torchfit-verify", "--ntasks-per-node=1", "--label",
            "--kill-on-bad-exit=0"]
    if nodes:
        argv += [f"--nodes={nodes}", f"--ntasks={nodes}"]
    if nodelist:
        argv.append(f"--nodelist={nodelist}")
        if not nodes:
            n = len(expand_hostlist(nodelist))
            argv += [f"--nodes={n}", f"--ntasks={n}"]
    if partition:
        argv.append(f"--partition={partition}")
    if account:
        argv.append(f"--account={account}")
    if time_limit:
        argv.append(f"--time={time_limit}")
    if immediate is not None:
        argv.append(f"--immediate={immediate}")
    return [*argv, *task]


@dataclass
class SlurmRun:
    """What came back from every node: its report, or why it sent none."""

    argv: list[str]
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    pre: list[Check] = field(default_factory=list)  # judged before launching (verify.environment)
    notes: list[str] = field(default_factory=list)  # hostnames that collide, answers of no placed task

    @property
    def ok(self) -> bool:
        return (not self.missing and bool(self.reports) and all(r.get("ok") for r in self.reports.values())
                and not any(c.status == "fail" for c in self.pre))

    def failed_nodes(self) -> dict[str, str]:
        """{node: why}: nodes with no report, nodes whose own checks failed, and for a
        disagreement the nodes in the minority (the odd ones out), named."""
        out = dict(self.missing)
        table = self.nodes_table()
        for key in (*COMPARED, *ENV_COMPARED):
            values: dict[str, list[str]] = {}
            for row in table:
                values.setdefault(str(row.get(key)), []).append(str(row.get("host")))
            if len(values) > 1:
                size = min(len(v) for v in values.values())
                majority = max(values.values(), key=len)
                for value, hosts in values.items():
                    if len(hosts) == size and (hosts is not majority or size * 2 < len(table)):
                        for h in hosts:
                            out.setdefault(h, f"{key} is {value}, the other node(s) have "
                                              + "; ".join(f"{v} ({compress_hostlist(hs)})"
                                                          for v, hs in values.items() if v != value))
        for node, rep in self.reports.items():
            if not rep.get("ok") and node not in out:
                bad = [c for c in rep.get("checks", []) if c.get("status") == "fail"]
                own = [c for c in bad if c.get("name") != "nodes-agree"]  # a disagreement names the odd ones
                if own or not bad:
                    out[node] = f"{own[0]['name']}: {own[0].get('summary')}" if own else "its verify failed"
        return out

    def nodes_table(self) -> list[dict[str, Any]]:
        for node in sorted(self.reports):
            rows = self.reports[node].get("nodes") or []
            if len(rows) > 1:
                return list(rows)
        return []

    def to_json(self) -> JsonObject:
        return {
            "ok": self.ok,
            "srun": [redact(a) for a in self.argv],
            "seconds": round(self.seconds, 2),
            "checks": [check_to_json(c) for c in self.pre],
            "nodes": self.nodes_table(),
            "failed_nodes": self.failed_nodes(),
            "reports": self.reports,
            "missing": self.missing,
            "notes": self.notes,
        }


def run_slurm_verify(runner: Runner, task: Sequence[str], *, nodes: int | None, nodelist: str | None,
                     partition: str | None, account: str | None, time_limit: str | None, bound: float,
                     environ: Mapping[str, str], on_event: Callable[[str, str], None] | None = None) -> SlurmRun:
    """Inside an allocation a step of it; outside, srun asks for one (`--immediate`: a busy
    cluster is an answer, not a wait). Bounded by `bound`; srun cleans up the tasks. Each
    report is the node's srun ran its task on (fleet.srun.attribute). `on_event(kind, text)`:
    srun queued, allocated, a node's report arrived (fleet.srun.StepEvents)."""
    inside = bool(environ.get("SLURM_JOB_ID"))
    argv = verify_srun_argv(task, nodes=nodes, nodelist=nodelist, partition=partition, account=account,
                            time_limit=None if inside else time_limit,
                            immediate=None if inside else max(5, int(min(bound / 2, 120))))
    t0 = time.monotonic()
    stdout, stderr, timed_out = run_srun(runner, argv, bound, on_event)
    run = SlurmRun(argv, seconds=time.monotonic() - t0)
    wanted = expand_hostlist(nodelist) if nodelist else []
    step = read_step(stdout, stderr, wanted)
    run.reports = step.answers
    run.missing.update(step.refused)
    run.notes = [n for n in (step.hostname_clash(), *step.stray) if n]
    errors = parse_task_errors(stderr)
    for node in [*wanted, *errors]:
        if node not in run.reports and node not in run.missing:
            run.missing[node] = (f"no report within {bound:g} s (srun stopped; Slurm cancelled the step)"
                                 if timed_out else f"its task failed: {errors.get(node) or 'no report'}")
    if not run.reports and not run.missing:
        why = srun_complaint(stderr) or ("no node answered" if not timed_out else f"no answer within {bound:g} s")
        run.missing["(allocation)"] = why
    return run


def format_slurm_run(run: SlurmRun) -> list[str]:
    """The one report of a run across nodes, as plain lines (the CLI prints them)."""
    reports = run.reports
    hosts = sorted([*reports, *[m for m in run.missing if m != "(allocation)"]])
    first = next(iter(reports.values()), {})
    ddp = first.get("ddp") or {}
    lines = [f"torchfit verify --slurm: {compress_hostlist(hosts) if hosts else 'no node'}, "
             f"{len(hosts)} node(s) x {ddp.get('nproc', '?')} rank(s), {ddp.get('backend') or 'no'} backend; "
             f"one srun, {run.seconds:.1f} s"]
    for c in run.pre:
        lines.append(f"  [{c.status}] {c.name} (before launching): {c.summary}")
        if c.hint and c.status in ("fail", "warn"):
            lines.append(f"      fix: {c.hint}")
    marks = {"pass": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}
    for node in hosts:
        rep = reports.get(node)
        if rep is None:
            lines.append(f"  {node:<8} NO REPORT: {run.missing.get(node)}")
            continue
        checks = rep.get("checks") or []
        shown = ", ".join(f"{c['name']} {marks.get(c['status'], c['status'])}" for c in checks)
        lines.append(f"  {node:<8} {'PASS' if rep.get('ok') else 'FAIL'}: {shown}")
        for c in checks:
            if c["status"] == "fail":
                lines.append(f"      {c['name']}: {c.get('summary')}")
                if c.get("hint"):
                    lines.append(f"      fix: {c['hint']}")
    table = run.nodes_table()
    if table:
        names = [str(r.get("host")) for r in table]
        width = max(12, *(len(str(r.get(k))) for r in table for k in (*COMPARED, *ENV_COMPARED)))
        lines.append("  nodes agree?".ljust(32) + "".join(n.ljust(width + 2) for n in names))
        for key in (*COMPARED, *ENV_COMPARED):
            values = [str(r.get(key)) for r in table]
            flag = "  " if len(set(values)) == 1 else "!!"
            lines.append(f"  {flag}{key}".ljust(32) + "".join(v.ljust(width + 2) for v in values))
    ddp_check = next((c for c in first.get("checks") or [] if c.get("name") == "ddp"), None)
    if ddp_check:
        lines.append(f"  all-reduce across the nodes: {ddp_check.get('summary')}")
    lines += [f"  note: {n}" for n in run.notes]
    failed = run.failed_nodes()
    if run.ok:
        lines.append(f"verify: PASS on {len(hosts)} node(s) ({compress_hostlist(hosts)})")
    else:
        for c in run.pre:
            if c.status == "fail":
                lines.append(f"verify: FAIL before launching: {c.summary}")
        for node, why in failed.items():
            lines.append(f"verify: FAIL on {node}: {why}")
    return lines
