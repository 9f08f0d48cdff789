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


def test_map_in_threads_keeps_order_bounds_the_threads_and_reraises() -> None:
    """background.map_in_threads (host/pythons.py's probes, which used a thread pool whose joins
    raced once in CI): results in the items' order, at most `workers` at once, an error re-raised."""
    import threading
    import time

    from torchfit.background import map_in_threads

    running, peak, lock = [0], [0], threading.Lock()

    def slow_square(x: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return x * x

    assert map_in_threads(slow_square, list(range(10)), 3) == [x * x for x in range(10)]
    assert peak[0] <= 3

    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    import pytest

    with pytest.raises(ValueError, match="bad 0"):
        map_in_threads(boom, [0, 1], 2)


def test_an_internal_error_says_where_it_was_raised() -> None:
    """A bug's one line names the innermost frame (issue 36: a CI run showed only "RuntimeError:
    release unlocked lock", from a probe's thread, and no -v run reproduced it)."""
    from torchfit.background import Background
    from torchfit.cli.main import _raised_at

    def fails() -> None:
        raise RuntimeError("release unlocked lock")

    import pytest

    with pytest.raises(RuntimeError) as info:
        Background(fails).result()
    where = _raised_at(info.value)
    assert where.startswith(" (raised in test_background.py:") and where.endswith(" fails)"), where


def test_torchfits_threads_leave_the_signals_to_the_main_thread() -> None:
    """A thread that can take SIGTERM defeats interrupts.signals_deferred (which blocks it in the
    main thread only): an install's SIGTERM during the swap was raised at once, exit 130, where it
    should have been held and reported as late. Background and the index client's deadline timer
    start with SIGINT, SIGTERM and SIGHUP blocked; the main thread's own mask is as it was."""
    import signal

    from torchfit.background import Background
    from torchfit.interrupts import SIGNALS

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    inside = Background(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [])).result()
    assert set(SIGNALS) <= set(inside)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_the_first_import_of_logging_waits_for_a_fork_in_progress() -> None:
    """logging registers fork hooks as it is imported; imported in one thread while another forks
    (runner.spawn, under background.no_fork), the parent's hook released a lock it never took and
    "Exception ignored in: _releaseLock" reached a command's stderr. Its first import, in any
    thread, now waits for the fork (a fresh interpreter: logging not yet imported)."""
    code = (
        "import sys, threading, time\n"
        "from torchfit import background\n"
        "assert 'logging' not in sys.modules\n"
        "done = []\n"
        "t = threading.Thread(target=lambda: (__import__('logging'), done.append(time.monotonic())))\n"
        "with background.no_fork():\n"
        "    t.start()\n"
        "    time.sleep(0.5)\n"
        "    held = time.monotonic()\n"
        "    assert done == [], 'imported during the fork'\n"
        "t.join(10)\n"
        "assert done and done[0] >= held, done\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
