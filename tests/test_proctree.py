"""proctree.py, the /proc readers runner.py decides what to kill from: real process trees, a
command name with parentheses in it, a marked command line, a stopped process group and a daemon
holding a pipe; each answer checked against processes whose pids the test knows."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from torchfit.proctree import (
    descendants,
    find_pids_with,
    group_activity,
    group_io_bytes,
    pipe_holders,
)


def _until(check: Callable[[], bool], timeout: float = 10) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        _kill(proc.pid)
        proc.wait(timeout=10)


# A child that starts a grandchild and prints its pid, then waits.
PARENT = ("import subprocess, sys, time\n"
          "g = subprocess.Popen([sys.argv[1], '30'])\n"
          "print(g.pid, flush=True)\n"
          "time.sleep(30)\n")


def test_descendants_are_children_and_grandchildren_and_never_a_sibling(
        tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    # The grandchild runs a program whose name holds ") R 1 (": /proc/PID/stat's comm field
    # in parentheses, so only a reader that splits at the *last* ")" finds its real parent.
    odd = tmp_path / "x) R 1 (y"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", odd)
    child = subprocess.Popen([sys.executable, "-c", PARENT, str(odd)], stdout=subprocess.PIPE)
    procs.append(child)
    sibling = subprocess.Popen(["sleep", "30"])
    procs.append(sibling)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        below_child = descendants(child.pid)
        assert set(below_child) == {grandchild}
        mine = descendants(os.getpid())
        assert {child.pid, grandchild, sibling.pid} <= set(mine)
        # the value is the start time (clock ticks since boot): the same on every reading
        assert below_child[grandchild].isdigit() and descendants(child.pid) == below_child
    finally:
        _kill(grandchild)
    child.kill()
    child.wait(timeout=10)  # the killed grandchild, reparented, is reaped: no longer anyone's
    assert _until(lambda: not {child.pid, grandchild} & set(descendants(os.getpid())))


def test_find_pids_with_finds_the_marked_process_alone_and_only_while_it_lives(procs: list[subprocess.Popen[bytes]]) -> None:
    marker = f"/tmp/torchfit-work-{uuid.uuid4().hex}"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    procs.append(live)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker[:-1]])  # a prefix of it
    procs.append(other)
    assert _until(lambda: live.pid in find_pids_with(marker))
    assert find_pids_with(marker) == [live.pid]  # not this process, whose argv holds no marker
    live.kill()
    live.wait(timeout=10)
    assert find_pids_with(marker) == []


def test_group_activity_counts_the_groups_bytes_and_sees_it_stopped(procs: list[subprocess.Popen[bytes]]) -> None:
    # A group of its own (a new session) that reads 8 MiB, then idles.
    code = "import time\nwith open('/dev/zero', 'rb') as f:\n    f.read(8 << 20)\nprint('read', flush=True)\ntime.sleep(30)\n"
    reader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    procs.append(reader)
    assert reader.stdout is not None and reader.stdout.readline() == b"read\n"
    moved, stopped = group_activity(reader.pid)
    assert moved >= 8 << 20 and not stopped
    assert group_io_bytes(reader.pid) >= moved  # the same count, read again
    os.kill(reader.pid, signal.SIGSTOP)
    try:
        assert _until(lambda: group_activity(reader.pid)[1])
    finally:
        os.kill(reader.pid, signal.SIGCONT)
    assert _until(lambda: not group_activity(reader.pid)[1])
    reader.kill()
    reader.wait(timeout=10)
    assert group_activity(reader.pid) == (0, False)  # a group with no live member


def test_pipe_holders_names_the_daemon_that_kept_the_pipe(procs: list[subprocess.Popen[bytes]]) -> None:
    # The child starts a daemon that inherits its stdout, prints the daemon's pid and exits.
    child = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!"], stdout=subprocess.PIPE)
    procs.append(child)
    assert child.stdout is not None
    daemon = int(child.stdout.readline())
    child.wait(timeout=10)
    try:
        assert pipe_holders([child.stdout]) == [daemon]  # never this process, the reading end's holder
    finally:
        _kill(daemon)
    assert _until(lambda: pipe_holders([child.stdout]) == [])
    assert pipe_holders([object()]) == []  # no descriptor: nothing to look for
