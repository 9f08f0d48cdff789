"""background.py and interrupts.interrupts_raise: SIGINT arriving at every instant of starting and
waiting for a thread. The standard library's Thread.start/join and Condition wait, interrupted
by an exception from a signal handler at the wrong instant, end in "RuntimeError: release
unlocked lock" (the internal error issue 25 saw once under load): a real SIGINT is raised at
each line the main thread runs inside threading.py in turn (sys.settrace picks the instant;
the signal and torchfit's handler are the real ones), and each run must end interrupted, or
finished, never in that error nor with a lock left held."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.cli import ROOT

AT_EACH_LINE = r"""
import json, signal, sys, threading, time
from torchfit import background
from torchfit.interrupts import Interrupted, interrupts_raise

counts = {"finished": 0, "interrupted": 0, "errors": []}
for nth in range(1, 80):
    seen = [0]

    def trace(frame, event, arg):
        if frame.f_code.co_filename == threading.__file__ and event == "line":
            seen[0] += 1
            if seen[0] == nth:
                signal.raise_signal(signal.SIGINT)
        return trace

    try:
        with interrupts_raise():
            sys.settrace(trace)
            try:
                if sys.argv[1] == "wake":
                    wake = background.Wake()
                    background.Background(lambda: (time.sleep(0.01), wake.set()))
                    wake.wait(5)
                else:
                    background.Background(time.sleep, 0.01).result()
                time.sleep(0.05)  # a deferred interruption lands here
            finally:
                sys.settrace(None)
        counts["finished"] += 1
    except Interrupted:
        counts["interrupted"] += 1
    except Exception as exc:
        counts["errors"].append(f"{nth}: {type(exc).__name__}: {exc}")
print(json.dumps(counts))
"""


@pytest.mark.parametrize("what", ["result", "wake"])
def test_sigint_at_every_line_of_starting_and_waiting_for_a_thread(what: str) -> None:
    res = subprocess.run([sys.executable, "-c", AT_EACH_LINE, what], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    assert res.returncode == 0, res.stderr[-2000:]
    counts = json.loads(res.stdout.strip().splitlines()[-1])
    assert counts["errors"] == [], counts["errors"][:3]
    assert counts["interrupted"] > 10, counts
