"""The runner's guarantees with real processes and real signals: a child dies with torchfit
(PR_SET_PDEATHSIG) even when torchfit is SIGKILLed, a silent child is killed as stalled, and
`kill_all` leaves no registered child behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchfit.runner import Runner, ToolStalled, kill_all, live_children, spawn

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_d10_a_spawned_child_dies_when_its_parent_is_sigkilled() -> None:
    code = ("import sys, subprocess; from torchfit.runner import spawn; "
            "p = spawn(['sleep', '600'], stdout=subprocess.DEVNULL); print(p.pid, flush=True); "
            "import time; time.sleep(600)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    end = time.monotonic() + 5
    while _alive(child) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(child), "the child outlived its SIGKILLed parent"


def test_d07_a_silent_child_is_killed_as_stalled_and_progress_is_reported() -> None:
    calls: list[tuple[float, int]] = []
    start = time.monotonic()
    with pytest.raises(ToolStalled, match=r"made no progress for 1\.5 s"):
        Runner().run(["sleep", "60"], timeout=60, stall=1.5, on_wait=lambda e, b: calls.append((e, b)))
    assert time.monotonic() - start < 10
    assert calls and calls[-1][0] >= 1.0
    assert not live_children()


def test_a_child_that_keeps_writing_is_not_stalled() -> None:
    res = Runner().run(["sh", "-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done"], timeout=30, stall=1.5)
    assert res.ok and res.stdout.split() == ["1", "2", "3", "4", "5", "6"]


def test_kill_all_kills_every_registered_child_group() -> None:
    proc = spawn(["sh", "-c", "sleep 600 & sleep 600; wait"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    pgid = proc.pid
    assert pgid in kill_all(grace=0.2)
    time.sleep(0.2)
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    if int(fh.read().rpartition(")")[2].split()[2]) == pgid:
                        members.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    assert members == [] and not live_children()
