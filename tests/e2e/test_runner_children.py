"""The runner's guarantees with real processes and real signals: a child dies with torchfit
(PR_SET_PDEATHSIG) even when torchfit is SIGKILLed, a silent child is killed as stalled, and
`kill_all` leaves no registered child behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchfit.errors import ToolStalled
from torchfit.runner import Runner, kill_all, live_children, spawn

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_spawned_child_dies_when_its_parent_is_sigkilled() -> None:
    """Defect #10 of the 2026-11 attack (issue 13)."""
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


def test_a_silent_child_is_killed_as_stalled_and_progress_is_reported() -> None:
    """Defect #7 of the 2026-11 attack (issue 13)."""
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


# --- grandchildren: the watchdog ---------------------------------------------------------

# A torchfit stand-in: spawns through runner.spawn a child that starts a grandchild in three
# ways, prints "ready", then sleeps until it is SIGKILLed. Every process carries MARK in argv.
_FAMILY = r"""
import os, subprocess, sys, time
from torchfit.runner import spawn, watchdog_pid
mark = sys.argv[1]
child = '''
import os, sys, time
mark = sys.argv[1]
def sleeper(name):
    os.execvp("sleep", [mark + "-" + name, "600"])
if os.fork() == 0:                     # 1: a grandchild in the child's own group
    sleeper("samegroup")
if os.fork() == 0:                     # 2: a grandchild that setsid()s (the child lives on)
    os.setsid(); sleeper("setsid")
if os.fork() == 0:                     # 3: a daemon: setsid, fork, the middle one exits
    os.setsid()
    if os.fork() == 0:
        sleeper("daemon")
    os._exit(0)
os.wait()                              # reap the middle one
time.sleep(600)
'''
p = spawn([sys.executable, "-c", child, mark, mark + "-child"], stdout=subprocess.DEVNULL)
def started():                         # the three grandchildren have exec'd (slow on a loaded machine)
    seen = set()
    for e in os.listdir("/proc"):
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                seen.add(fh.read().split(b"\0")[0].decode(errors="replace"))
        except OSError:
            pass
    return {mark + "-samegroup", mark + "-setsid", mark + "-daemon"} <= seen
end = time.monotonic() + 60
while not started() and time.monotonic() < end:
    time.sleep(0.05)
time.sleep(1.2)                        # > two watchdog scans after they all exist
print(p.pid, watchdog_pid(), flush=True)
time.sleep(600)
"""


def _marked(mark: str) -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not _alive(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if mark in cmd:
            found.append((int(entry), cmd))
    return found


@pytest.mark.parametrize("how", ["pid", "group"])
def test_grandchildren_die_when_torchfit_is_sigkilled(how: str, tmp_path: Path) -> None:
    """Covered: a grandchild in the child's group, one that setsid()s while the child lives,
    and a double-forked daemon (re-parented to the child, a subreaper). `group`: the whole
    process group of torchfit is SIGKILLed at once, as a scheduler does; the watchdog leads
    its own session and survives to clean up."""
    import uuid

    mark = f"tfwd-{uuid.uuid4().hex[:10]}"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    tf = subprocess.Popen([sys.executable, "-c", _FAMILY, mark], stdout=subprocess.PIPE, text=True,
                          env=env, start_new_session=True)
    try:
        assert tf.stdout is not None
        _child, dog = (int(x) for x in tf.stdout.readline().split())
        # argv[0] is the name of an exec'd sleeper; the child is `python -c CODE MARK MARK-child`
        names = {cmd.split()[0] if cmd.startswith(mark) else cmd.split()[-1] for _, cmd in _marked(mark)}
        assert {f"{mark}-samegroup", f"{mark}-setsid", f"{mark}-daemon", f"{mark}-child"} <= names, names
        assert _alive(dog)
        os.killpg(tf.pid, signal.SIGKILL) if how == "group" else tf.kill()
        tf.wait(timeout=10)
        end = time.monotonic() + 3
        while _marked(mark) and time.monotonic() < end:
            time.sleep(0.05)
        assert _marked(mark) == [], "a descendant outlived the SIGKILLed torchfit"
        end = time.monotonic() + 3
        while _alive(dog) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(dog), "the watchdog outlived its work"
    finally:
        for pid, _ in _marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_the_watchdog_ends_with_a_torchfit_that_exits_normally_and_spares_released_groups() -> None:
    """A finished torchfit leaves no watchdog; a group it released (waited for) is not its to kill."""
    code = ("import subprocess, sys; from torchfit.runner import Runner, watchdog_pid; "
            "r = Runner().run(['sh', '-c', 'echo hi'], timeout=30); "
            "print(watchdog_pid(), flush=True)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    dog = int(out.stdout)
    end = time.monotonic() + 3
    while _alive(dog) and time.monotonic() < end:
        time.sleep(0.02)
    assert not _alive(dog)
    assert time.monotonic() - start < 10


def test_run_stops_waiting_on_a_pipe_held_by_a_daemon_once_the_child_exited() -> None:
    """The child prints, leaves a daemon (own session) holding its stdout and exits 3: run()
    returns within DRAIN_S of the exit with the output, and the daemon is killed."""
    import uuid

    mark = f"tfpipe-{uuid.uuid4().hex[:8]}"
    code = ("import os, sys\n"
            "print('before', flush=True)\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            f"    os.execvp('sleep', [{mark!r}, '600'])\n"
            "sys.exit(3)\n")
    start = time.monotonic()
    res = Runner().run([sys.executable, "-c", code], timeout=120)
    assert time.monotonic() - start < 10
    assert res.returncode == 3 and res.stdout == "before\n"
    time.sleep(0.2)
    assert _marked(mark) == []
