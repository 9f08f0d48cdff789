"""`torchfit detect --slurm`: every node's facts through ONE `srun`, grouped into a fleet.

What runs where: on the machine where it is typed (a login node), `sinfo` lists the
nodes and their Slurm state, then one `srun --ntasks-per-node=1 --label` starts
`PYTHON -m torchfit detect --json --fleet-task` on every usable node, PYTHON being the
interpreter running torchfit here. So the nodes must be able to run that same
torchfit: the usual case is shared storage (a venv or pipx install under /home or
/shared); a node that cannot (no such file, another Python) fails its task, and
srun's own error line is what the fleet file says about it. Nodes that are down,
drained or busy are not asked; they are listed with their Slurm state and reason.

Each task prints its facts framed (fleet.srun: srun's --label cuts long lines); the
answer of task K is the node's that srun ran task K on (fleet.srun.attribute): a
record naming another node is refused, never added. sinfo's node names and reasons
are a site's text: they pass through `inputs.terminal_text` before they are kept.
Bounds: each probe on a node has `timeout` (a hung nvidia-smi is cut off and reported
by the node itself); the whole srun has `bound`, after which the runner stops it
(SIGTERM, then SIGKILL to its process group: srun then cancels the step, and Slurm
kills the tasks), and a node that said nothing by then is "no answer within N s".
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Mapping

from torchfit.errors import BadInput
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist
from torchfit.fleet.model import Fleet, Missing, group_nodes
from torchfit.fleet.srun import (
    framed,
    parse_task_errors,
    read_step,
    run_srun,
    run_tool,
    srun_complaint,
)
from torchfit.inputs import terminal_text
from torchfit.jsontypes import JsonObject
from torchfit.runner import Runner

# sinfo's long state names (sinfo(1) "NODE STATE CODES") that take a new job step.
USABLE = frozenset(("idle", "mixed"))


def task_record(facts: JsonObject, node: str | None, host: str | None) -> str:
    """What `detect --json --fleet-task` prints: its facts, Slurm's name of its node and the
    host's own hostname, framed."""
    return framed(facts, node, host)


def node_states(runner: Runner, partition: str | None, nodelist: str | None, timeout: float) -> dict[str, str]:
    """{node: "idle"} from `sinfo -N` (state and, for a node out of service, its reason)."""
    argv = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]
    if partition:
        argv.append(f"--partition={partition}")
    if nodelist:
        argv.append(f"--nodes={nodelist}")
    res = run_tool(runner, argv, timeout)
    states: dict[str, str] = {}
    for line in res.stdout.splitlines():
        name, _, rest = terminal_text(line).partition("|")
        state, _, reason = rest.partition("|")
        if name.strip():
            shown = state.strip() + (f" (reason: {reason.strip()})" if reason.strip() not in ("", "none") else "")
            states.setdefault(name.strip(), shown)
    return states


def gather(
    runner: Runner,
    *,
    partition: str | None = None,
    nodelist: str | None = None,
    timeout: float = 10.0,
    bound: float | None = None,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
    on_event: Callable[[str, str], None] | None = None,
) -> Fleet:
    """Ask every usable node for its facts in one srun; group them; list the rest with why.
    `on_event(kind, text)`: srun queued, allocated, a node's answer arrived (fleet.srun.StepEvents)."""
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
    if on_event is not None:
        on_event("start", hostlist)
    stdout, stderr, timed_out = run_srun(runner, argv, bound, on_event)
    step = read_step(stdout, stderr, nodes)
    facts = {n: d for n, d in step.answers.items() if n in set(nodes)}
    errors = parse_task_errors(stderr)
    general = srun_complaint(stderr)
    for node in nodes:
        if node in facts:
            continue
        if node in step.refused:
            why = step.refused[node]
        elif timed_out:  # srun's own "task 2: Killed" then is our stop, not the node's failure
            why = f"no answer within {bound:g} s (srun stopped; Slurm cancelled the step)"
        elif node in errors:
            why = (f"its task failed: {errors[node]} (can it run {python or sys.executable} -m torchfit? "
                   "the nodes need the same torchfit, e.g. on shared storage)")
        else:
            why = f"no answer (srun: {general})" if general else "no answer"
        missing.append(Missing((node,), why))
    notes = [n for n in (step.hostname_clash(), *step.stray) if n]
    return group_nodes(facts, missing, gathered_at=stamp,
                       source=f"one srun on {where}: {len(nodes)} task(s), one per node of {hostlist}"
                       + "".join(f"; {n}" for n in notes))


def srun_argv(hostlist: str, count: int, python: str, timeout: float, *, partition: str | None,
              immediate: int | None) -> list[str]:
    """One srun, one task per node, each running this torchfit's `detect --json --fleet-task`."""
    argv = ["srun", "--verbose", "--job-name=torchfit-detect", f"--nodes={count}", f"--ntasks={count}",
            "--ntasks-per-node=1", f"--nodelist={hostlist}", "--label", "--kill-on-bad-exit=0"]
    if partition:
        argv.append(f"--partition={partition}")
    if immediate is not None:
        argv.append(f"--immediate={immediate}")
    return [*argv, python, "-m", "torchfit", "detect", "--json", "--fleet-task", "--timeout", f"{timeout:g}"]
