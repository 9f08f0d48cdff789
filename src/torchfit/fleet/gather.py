"""`torchfit detect --slurm`: every node's facts through ONE `srun`, grouped into a fleet.

What runs where: on the machine where it is typed (a login node), `sinfo` lists the
nodes and their Slurm state, then one `srun --ntasks-per-node=1 --label` starts
`PYTHON -m torchfit detect --json --fleet-task` on every usable node, PYTHON being the
interpreter running torchfit here. So the nodes must be able to run that same
torchfit: the usual case is shared storage (a venv or pipx install under /home or
/shared); a node that cannot (no such file, another Python) fails its task, and
srun's own error line is what the fleet file says about it. Nodes that are down,
drained or busy are not asked; they are listed with their Slurm state and reason.

Each task prints its facts as one JSON line between two marker lines. srun's `--label`
prefixes every line with the task number and cuts lines longer than 1024 bytes into
pieces (measured, Slurm 22.05), so the pieces of a task are joined back by label.
Bounds: each probe on a node has `timeout` (a hung nvidia-smi is cut off and reported
by the node itself); the whole srun has `bound`, after which the runner stops it
(SIGTERM, then SIGKILL to its process group: srun then cancels the step, and Slurm
kills the tasks), and a node that said nothing by then is "no answer within N s".
"""

from __future__ import annotations

import datetime
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from torchfit.errors import BadInput, ProbeFailed, ToolMissing, ToolTimeout, TorchfitError
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist
from torchfit.fleet.model import Fleet, Missing, group_nodes
from torchfit.runner import Runner

BEGIN = "torchfit-fleet-node"
END = "torchfit-fleet-end"
# sinfo's long state names (sinfo(1) "NODE STATE CODES") that take a new job step.
USABLE = frozenset(("idle", "mixed"))
_LABEL = re.compile(r"^ *([0-9]+): ?(.*)$")
_TASK_ERROR = re.compile(r"^srun: error: ([A-Za-z0-9_.\-]+): tasks? ([0-9,\-]+): (.*)$")


class SlurmMissing(TorchfitError):
    reference = "slurm-missing"
    exit_code = 2

    def __init__(self, tool: str) -> None:
        super().__init__(f"{tool} not found on PATH: --slurm needs Slurm's client commands (sinfo, srun)",
                         hint="run it on a login node of the cluster, or give --facts files instead")


def task_record(node: str, facts: Mapping[str, Any]) -> str:
    """What `detect --json --fleet-task` prints: the node's name and its facts, framed."""
    return f"{BEGIN}\n{json.dumps({'node': node, 'facts': facts}, separators=(',', ':'))}\n{END}\n"


def parse_task_output(stdout: str) -> dict[str, Any]:
    """srun --label output of the tasks -> {node: facts}; pieces joined per task label."""
    pieces: dict[str, list[str]] = {}
    inside: dict[str, bool] = {}
    for line in stdout.splitlines():
        m = _LABEL.match(line)
        if not m:
            continue
        label, text = m.groups()
        if text == BEGIN:
            inside[label], pieces[label] = True, []
        elif text == END:
            inside[label] = False
        elif inside.get(label):
            pieces[label].append(text)
    out: dict[str, Any] = {}
    for label, parts in pieces.items():
        if inside.get(label):
            continue  # cut off mid-record: no answer
        try:
            rec = json.loads("".join(parts))
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("node"), str) and isinstance(rec.get("facts"), dict):
            out[rec["node"]] = rec["facts"]
    return out


def parse_task_errors(stderr: str) -> dict[str, str]:
    """srun's "srun: error: NODE: task K: Exited with exit code 2" and the labelled lines
    of task K ("K: slurmstepd-NODE: error: execve(): ...") -> {node: first cause}."""
    by_label: dict[str, str] = {}
    for line in stderr.splitlines():
        m = _LABEL.match(line)
        if m and m.group(1) not in by_label and m.group(2).strip():
            by_label[m.group(1)] = m.group(2).strip()
    out: dict[str, str] = {}
    for line in stderr.splitlines():
        m = _TASK_ERROR.match(line.strip())
        if m:
            node, tasks, what = m.groups()
            first = tasks.split(",")[0].split("-")[0]
            cause = by_label.get(first) or what
            # "slurmstepd-n2: error: ..." -> "slurmstepd: error: ...": nodes with one cause group.
            out.setdefault(node, cause.replace(f"slurmstepd-{node}:", "slurmstepd:"))
    return out


def node_states(runner: Runner, partition: str | None, nodelist: str | None, timeout: float) -> dict[str, str]:
    """{node: "idle"} from `sinfo -N` (state and, for a node out of service, its reason)."""
    argv = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]
    if partition:
        argv.append(f"--partition={partition}")
    if nodelist:
        argv.append(f"--nodes={nodelist}")
    res = _run(runner, argv, timeout)
    states: dict[str, str] = {}
    for line in res.stdout.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        if name.strip():
            shown = state.strip() + (f" (reason: {reason.strip()})" if reason.strip() not in ("", "none") else "")
            states.setdefault(name.strip(), shown)
    return states


def _run(runner: Runner, argv: list[str], timeout: float) -> Any:
    try:
        res = runner.run(argv, timeout=timeout)
    except ToolMissing:
        raise SlurmMissing(argv[0]) from None
    if res.returncode != 0:
        raise ProbeFailed(argv, res.returncode, res.stderr or res.stdout)
    return res


def gather(
    runner: Runner,
    *,
    partition: str | None = None,
    nodelist: str | None = None,
    timeout: float = 10.0,
    bound: float | None = None,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Fleet:
    """Ask every usable node for its facts in one srun; group them; list the rest with why."""
    env = dict(os.environ if environ is None else environ)
    bound = bound if bound is not None else 60.0 + 3 * timeout
    wanted = expand_hostlist(nodelist) if nodelist else None
    missing: list[Missing] = []
    job = env.get("SLURM_JOB_ID")
    if job and env.get("SLURM_JOB_NODELIST"):
        # Inside an allocation: its nodes are ours; srun starts a step in it.
        nodes = expand_hostlist(env["SLURM_JOB_NODELIST"])
        if wanted is not None:
            outside = [n for n in wanted if n not in nodes]
            if outside:
                raise BadInput(f"--nodelist {compress_hostlist(outside)}: not in this allocation (job {job})")
            nodes = wanted
        where = f"job {job}"
    else:
        states = node_states(runner, partition, nodelist, min(timeout, 30.0))
        if wanted is not None:
            unknown = [n for n in wanted if n not in states]
            if unknown:
                raise BadInput(f"--nodelist {compress_hostlist(unknown)}: Slurm knows no such node"
                               + (f" in partition {partition}" if partition else ""))
        if not states:
            raise BadInput(f"sinfo lists no nodes{f' in partition {partition}' if partition else ''}")
        nodes = []
        for node, state in states.items():
            base = state.split(" ")[0]
            if base in USABLE:
                nodes.append(node)
            else:
                missing.append(Missing((node,), f"not asked: Slurm state {state}"))
        where = f"partition {partition}" if partition else "the default partition"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not nodes:
        return group_nodes({}, missing, source=f"detect --slurm ({where}): no usable node", gathered_at=stamp)
    hostlist = compress_hostlist(nodes)
    argv = srun_argv(hostlist, len(nodes), python or sys.executable, timeout, partition=partition,
                     immediate=None if job else max(5, int(bound / 2)))
    stdout = stderr = ""
    timed_out = False
    try:
        res = runner.run(argv, timeout=bound)
        stdout, stderr = res.stdout, res.stderr
    except ToolMissing:
        raise SlurmMissing("srun") from None
    except ToolTimeout as exc:
        stdout, stderr, timed_out = exc.stdout, exc.stderr, True
    facts = parse_task_output(stdout)
    errors = parse_task_errors(stderr)
    general = _srun_complaint(stderr)
    for node in nodes:
        if node in facts:
            continue
        if timed_out:  # srun's own "task 2: Killed" then is our stop, not the node's failure
            why = f"no answer within {bound:g} s (srun stopped; Slurm cancelled the step)"
        elif node in errors:
            why = (f"its task failed: {errors[node]} (can it run {python or sys.executable} -m torchfit? "
                   "the nodes need the same torchfit, e.g. on shared storage)")
        else:
            why = f"no answer (srun: {general})" if general else "no answer"
        missing.append(Missing((node,), why))
    return group_nodes(facts, missing, gathered_at=stamp,
                       source=f"one srun on {where}: {len(nodes)} task(s), one per node of {hostlist}")


def _srun_complaint(stderr: str) -> str | None:
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("srun: error:") and ": task" not in line:
            return line[len("srun: error:"):].strip()[:200]
    return None


def srun_argv(hostlist: str, count: int, python: str, timeout: float, *, partition: str | None,
              immediate: int | None) -> list[str]:
    """One srun, one task per node, each running this torchfit's `detect --json --fleet-task`."""
    argv = ["srun", "--job-name=torchfit-detect", f"--nodes={count}", f"--ntasks={count}",
            "--ntasks-per-node=1", f"--nodelist={hostlist}", "--label", "--kill-on-bad-exit=0"]
    if partition:
        argv.append(f"--partition={partition}")
    if immediate is not None:
        argv.append(f"--immediate={immediate}")
    return [*argv, python, "-m", "torchfit", "detect", "--json", "--fleet-task", "--timeout", f"{timeout:g}"]
