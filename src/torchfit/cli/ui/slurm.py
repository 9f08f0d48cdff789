"""What `verify --slurm` and `detect --slurm` say while srun waits (issue 26, item 5): a line
when the job is queued, when it is allocated (its nodes), and per node as its answer arrives,
on stderr (stdout stays the report, or --json). The events come from fleet.srun.StepEvents.
Then `verify --slurm`'s one report of the run (render_slurm_run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from torchfit.progress import StderrProgress

if TYPE_CHECKING:
    from torchfit.verify.slurm import SlurmRun


def step_lines(command: str, total: int | None = None,
               progress: StderrProgress | None = None) -> Callable[[str, str], None]:
    """An `on_event(kind, text)` for fleet.srun.run_srun that prints one line per event."""
    out = progress or StderrProgress()
    state = {"total": total, "answered": 0}

    def on_event(kind: str, text: str) -> None:
        from torchfit.fleet.hostlist import expand_hostlist

        if kind == "start":
            state["total"] = len(expand_hostlist(text))
            out.info(f"{command}: one srun on {text}, a task per node; asking Slurm for them")
        elif kind == "queued":
            out.info(f"{command}: job {text} queued, waiting for resources (squeue -j {text} shows why)")
        elif kind == "allocated":
            state["total"] = len(expand_hostlist(text))
            out.info(f"{command}: allocated {text}; a task starts on each node")
        elif kind == "answer":
            state["answered"] = int(state["answered"] or 0) + 1
            of = f" of {state['total']}" if state["total"] else ""
            out.info(f"{command}: {text} answered ({state['answered']}{of})")

    return on_event


def render_slurm_run(run: SlurmRun) -> None:
    """`verify --slurm`'s report on stdout: verify.slurm.format_slurm_run's lines."""
    from torchfit.inputs import terminal_text
    from torchfit.verify.slurm import format_slurm_run

    for line in format_slurm_run(run):
        print(terminal_text(line))  # the nodes' reports are their text
