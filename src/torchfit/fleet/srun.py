"""One srun, one task per node, and reading back what each task said.

Both `detect --slurm` and `verify --slurm` start their work on the nodes with one
`srun --ntasks-per-node=1 --label` and read a JSON answer per node from its output.
srun's `--label` prefixes every line with the task number and cuts lines longer than
1024 bytes into pieces (measured, Slurm 22.05), so a task prints its answer as one
JSON line between two marker lines (`framed`) and the pieces are joined back per
label (`parse_framed`). srun's own complaints name the node of a failed task
(`srun: error: n2: task 1: Exited with exit code 2`), which `parse_task_errors` reads.
The run itself is bounded: after `bound` seconds the runner stops srun (SIGTERM, then
SIGKILL to its process group); srun then cancels the step and Slurm ends the tasks.

Whose answer is it? A task's record is what a node says; the label in front of each of
its lines is srun's. srun runs `--verbose`, so it says itself where it started each task
(`srun: launching StepId=7.0 on host n2, 1 tasks: 1`, `parse_placement`): the answer of
task K belongs to the node srun placed task K on, whatever the record claims
(`attribute`). A record naming another node (renaming a neighbour, adding a node nobody
asked) is refused and named; the host's own hostname is only reported (cloned images
share one: `hostname_clash`). Records are read with the bounded JSON reader
(inputs.decode_json): one node's 100,000-deep answer is that node's bad answer, not
the end of the gather.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchfit.errors import ProbeFailed, SlurmMissing, ToolMissing, ToolTimeout
from torchfit.inputs import decode_json, shown
from torchfit.jsontypes import JsonObject
from torchfit.runner import Runner, RunResult, index_variables

BEGIN = "torchfit-fleet-node"
END = "torchfit-fleet-end"
_LABEL = re.compile(r"^ *([0-9]+): ?(.*)$")
_TASK_ERROR = re.compile(r"^srun: error: ([A-Za-z0-9_.\-]+): tasks? ([0-9,\-]+): (.*)$")
# srun --verbose, Slurm 20.02 and later ("launching 7.0 on host" before): where each task runs.
_LAUNCH = re.compile(r"^srun: launching (?:StepId=)?\S+ on host (\S+), \d+ tasks?: ([0-9,\-]+)\s*$")
# srun's own words while it waits: job queued, job allocated (srun(1) and --verbose).
_QUEUED = re.compile(r"^srun: job (\d+) queued and waiting for resources")
_ALLOCATED = re.compile(r"^srun: job (\d+) has been allocated resources")
_NODES = re.compile(r"^srun: jobid (\d+): nodes\(\d+\):`([^']*)'")


def framed(payload: JsonObject, node: str | None, host: str | None) -> str:
    """What a task prints, on one line between markers: its answer, the node Slurm says it
    is on (SLURMD_NODENAME) and the host's own hostname (reported only: attribution is srun's)."""
    rec = {"node": node, "host": host, "data": payload}
    return f"{BEGIN}\n{json.dumps(rec, separators=(',', ':'), default=str)}\n{END}\n"


@dataclass
class Answer:
    """One task's record as read: what it claims, or why it is no answer."""

    node: str | None = None  # the node the record says it is from
    host: str | None = None  # the host's own hostname
    data: dict[str, Any] | None = None
    bad: str | None = None  # why the record is not an answer (not JSON, too deep, printed twice)


def parse_framed(stdout: str) -> dict[int, Answer]:
    """srun --label output of the tasks -> {task number: its record}; pieces joined per
    label. A task cut off inside its record (a stopped srun) has none."""
    pieces: dict[int, list[str]] = {}
    inside: dict[int, bool] = {}
    records: dict[int, int] = {}
    for line in stdout.splitlines():
        m = _LABEL.match(line)
        if not m:
            continue
        label, text = int(m.group(1)), m.group(2)
        if text == BEGIN:
            inside[label], pieces[label] = True, []
            records[label] = records.get(label, 0) + 1
        elif text == END:
            inside[label] = False
        elif inside.get(label):
            pieces[label].append(text)
    out: dict[int, Answer] = {}
    for label, parts in pieces.items():
        if inside.get(label):
            continue
        if records[label] > 1:
            out[label] = Answer(bad=f"its task printed {records[label]} answers, where it prints one")
            continue
        try:
            rec = decode_json("".join(parts))
        except ValueError as exc:
            out[label] = Answer(bad=f"its answer is not valid JSON ({str(exc)[:120]})")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict) \
                or not isinstance(rec.get("node"), (str, type(None))) \
                or not isinstance(rec.get("host"), (str, type(None))):
            out[label] = Answer(bad="its answer is not a torchfit task record")
            continue
        out[label] = Answer(rec["node"], rec.get("host"), rec["data"])
    return out


def parse_placement(stderr: str) -> dict[int, str]:
    """srun --verbose's "launching StepId=7.0 on host n2, 1 tasks: 1" -> {1: "n2"}."""
    out: dict[int, str] = {}
    for line in stderr.splitlines():
        m = _LAUNCH.match(line.strip())
        if not m:
            continue
        node, tasks = m.groups()
        for part in tasks.split(","):
            low, _, high = part.partition("-")
            if low.isdigit() and (not high or high.isdigit()):
                for k in range(int(low), int(high or low) + 1):
                    out.setdefault(k, node)
    return out


@dataclass
class Attributed:
    """Every answer under the node srun ran it on, and the nodes whose answer was refused."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # node -> why its answer is not taken
    hosts: dict[str, str] = field(default_factory=dict)  # node -> its own hostname, as it said
    stray: list[str] = field(default_factory=list)  # answers of tasks srun placed nowhere we know

    def hostname_clash(self) -> str | None:
        """One line when nodes answered with the same hostname (cloned images), else None."""
        from torchfit.fleet.hostlist import compress_hostlist

        by_host: dict[str, list[str]] = {}
        for node, host in self.hosts.items():
            by_host.setdefault(host, []).append(node)
        clashes = [(h, n) for h, n in by_host.items() if len(n) > 1]
        if not clashes:
            return None
        said = "; ".join(f"{compress_hostlist(nodes)} all say hostname {shown(host)!r}" for host, nodes in clashes)
        return f"{said} (cloned images?): told apart by Slurm's node names, not hostnames"


def attribute(answers: Mapping[int, Answer], placement: Mapping[int, str],
              expected: Sequence[str] = ()) -> Attributed:
    """Task K's answer belongs to the node srun placed task K on (`placement`; without any
    launch line, the K-th of `expected`, the nodes as asked). A record that names another
    node is refused, the node it names is never added; a task placed nowhere known is stray."""
    where = dict(placement) if placement else dict(enumerate(expected))
    out = Attributed()
    for k in sorted(answers):
        ans = answers[k]
        node = where.get(k)
        if node is None:
            out.stray.append(f"task {k} answered, but srun started no task {k}: its answer is not taken"
                             + (f" (it names node {shown(ans.node)})" if ans.node else ""))
            continue
        if ans.bad is not None:
            out.refused[node] = ans.bad
        elif ans.node is not None and ans.node != node:
            out.refused[node] = (f"refused: the answer of task {k}, which srun ran on {node}, names node "
                                 f"{shown(ans.node)[:80]}")
        elif ans.data is not None:
            out.answers[node] = ans.data
            if ans.host:
                out.hosts[node] = ans.host
    return out


def read_step(stdout: str, stderr: str, expected: Sequence[str] = ()) -> Attributed:
    """What one srun's tasks said, each answer under its node (parse_framed + attribute)."""
    return attribute(parse_framed(stdout), parse_placement(stderr), expected)


class StepEvents:
    """srun's output as it arrives -> `on_event(kind, text)`: "queued" (the job id), "allocated"
    (its nodes, once srun names them), "answer" (a node whose record just ended), in order."""

    def __init__(self, on_event: Callable[[str, str], None]) -> None:
        self.on_event = on_event
        self.job: str | None = None
        self.placed: dict[int, str] = {}
        self.told_nodes = False
        self.pending: dict[int, bool] = {}

    def line(self, stream: str, text: str) -> None:
        if stream == "stderr":
            self._srun_line(text.strip())
            return
        m = _LABEL.match(text)
        if not m:
            return
        label, body = int(m.group(1)), m.group(2)
        if body == BEGIN:
            self.pending[label] = True
        elif body == END and self.pending.pop(label, False):
            self.on_event("answer", self.placed.get(label, f"task {label}"))

    def _srun_line(self, text: str) -> None:
        if m := _QUEUED.match(text):
            self.job = m.group(1)
            self.on_event("queued", m.group(1))
        elif m := _NODES.match(text):
            if not self.told_nodes:
                self.told_nodes = True
                self.on_event("allocated", m.group(2))
        elif m := _LAUNCH.match(text):
            self.placed.update(parse_placement(text))
        elif _ALLOCATED.match(text) and not self.told_nodes:
            pass  # the node names follow in --verbose's "jobid N: nodes(K):`...'" line


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


def srun_complaint(stderr: str) -> str | None:
    """srun's first error that is not about one task (an allocation refused, a bad option)."""
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("srun: error:") and ": task" not in line:
            return line[len("srun: error:"):].strip()[:200]
    return None


def run_srun(runner: Runner, argv: Sequence[str], bound: float,
             on_event: Callable[[str, str], None] | None = None) -> tuple[str, str, bool]:
    """Run srun for at most `bound` seconds: (stdout, stderr, timed_out). `on_event` hears
    what srun is waiting for and each node's answer as it arrives (StepEvents)."""
    events = StepEvents(on_event) if on_event is not None else None
    try:
        # srun hands its environment to every task on every node: no package source or credential goes
        res = runner.run(list(argv), timeout=bound, unset=index_variables(),
                         on_line=events.line if events is not None else None)
    except ToolMissing:
        raise SlurmMissing(argv[0]) from None
    except ToolTimeout as exc:
        return exc.stdout, exc.stderr, True
    return res.stdout, res.stderr, False


def run_tool(runner: Runner, argv: list[str], timeout: float) -> RunResult:
    """A Slurm client command that must succeed (sinfo, scontrol)."""
    try:
        res = runner.run(argv, timeout=timeout)
    except ToolMissing:
        raise SlurmMissing(argv[0]) from None
    if res.returncode != 0:
        raise ProbeFailed(argv, res.returncode, res.stderr or res.stdout)
    return res


def node_address(runner: Runner, node: str, timeout: float = 10.0) -> str:
    """Where other nodes reach `node`: its NodeAddr (`scontrol show node`), else its name."""
    try:
        res = runner.run(["scontrol", "--oneliner", "show", "node", node], timeout=timeout)
    except (ToolMissing, ToolTimeout):
        return node
    m = re.search(r"\bNodeAddr=(\S+)", res.stdout)
    return m.group(1) if res.returncode == 0 and m else node
