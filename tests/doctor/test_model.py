"""doctor.model.run_checks: a check that raises becomes `unknown` and its traceback goes to the
progress the command passes (stderr under -v), never straight to a stream (issue 17)."""

from __future__ import annotations

import io
from pathlib import Path

from torchfit.checks import Status
from torchfit.doctor.context import Context
from torchfit.doctor.model import Spec, Verdict, run_checks
from torchfit.progress import Progress, StderrProgress


class Traces(Progress):
    def __init__(self) -> None:
        self.traces: list[str] = []

    def trace(self, text: str) -> None:
        self.traces.append(text)


def _broken(ctx: Context) -> Verdict:
    raise KeyError("nvidia-smi-field")


def _ctx(tmp_path: Path) -> Context:
    return Context(root=str(tmp_path), environ={}, python=None, python_source="test", timeout=5)


def test_a_failing_check_is_unknown_and_its_traceback_goes_to_the_progress(tmp_path: Path) -> None:
    spec = Spec("broken-check", "driver", "a check with a bug", _broken)
    progress = Traces()
    (check,) = run_checks(_ctx(tmp_path), [spec], progress)
    assert check.status is Status.UNKNOWN and "KeyError" in check.summary and "please report it" in check.summary
    assert len(progress.traces) == 1 and progress.traces[0].startswith("Traceback (most recent call last):")
    assert "_broken" in progress.traces[0] and "KeyError: 'nvidia-smi-field'" in progress.traces[0]
    (quiet,) = run_checks(_ctx(tmp_path), [spec])  # no progress (no -v): the verdict alone
    assert quiet.summary == check.summary


def test_stderr_progress_writes_the_traceback_as_it_is() -> None:
    stream = io.StringIO()
    StderrProgress(stream).trace("Traceback (most recent call last):\n  File \"x\"\nKeyError: 'k'\n")
    assert stream.getvalue() == "Traceback (most recent call last):\n  File \"x\"\nKeyError: 'k'\n"
