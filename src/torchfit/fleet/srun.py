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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from torchfit.errors import ProbeFailed, SlurmMissing, ToolMissing, ToolTimeout
from torchfit.runner import Runner, index_variables

BEGIN = "torchfit-fleet-node"
END = "torchfit-fleet-end"
_LABEL = re.compile(r"^ *([0-9]+): ?(.*)$")
_TASK_ERROR = re.compile(r"^srun: error: ([A-Za-z0-9_.\-]+): tasks? ([0-9,\-]+): (.*)$")


def framed(node: str, payload: Mapping[str, Any]) -> str:
    """What a task prints: its node's name and its answer, on one line between markers."""
    return f"{BEGIN}\n{json.dumps({'node': node, 'data': payload}, separators=(',', ':'), default=str)}\n{END}\n"


def parse_framed(stdout: str) -> dict[str, Any]:
    """srun --label output of the tasks -> {node: answer}; pieces joined per task label.
    A task cut off inside its record (a stopped srun) has no answer."""
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
            continue
        try:
            rec = json.loads("".join(parts))
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("node"), str) and isinstance(rec.get("data"), dict):
            out[rec["node"]] = rec["data"]
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


def srun_complaint(stderr: str) -> str | None:
    """srun's first error that is not about one task (an allocation refused, a bad option)."""
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("srun: error:") and ": task" not in line:
            return line[len("srun: error:"):].strip()[:200]
    return None


def run_srun(runner: Runner, argv: Sequence[str], bound: float) -> tuple[str, str, bool]:
    """Run srun for at most `bound` seconds: (stdout, stderr, timed_out)."""
    try:
        # srun hands its environment to every task on every node: no package source or credential goes
        res = runner.run(list(argv), timeout=bound, unset=index_variables())
    except ToolMissing:
        raise SlurmMissing(argv[0]) from None
    except ToolTimeout as exc:
        return exc.stdout, exc.stderr, True
    return res.stdout, res.stderr, False


def run_tool(runner: Runner, argv: list[str], timeout: float) -> Any:
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
