"""Reading /proc (Linux): which processes descend from one, carry a mark in their command line,
belong to a process group (and how many bytes it moved, whether one is stopped), or hold a pipe.

Pure readers, no signal sent: `runner.py` decides what to kill from their answers (split from
runner.py, issue 28 item 10). A process that ends while it is read is skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of `pid` by parent (Linux /proc), with its start time.

    A child of the runner is a PR_SET_CHILD_SUBREAPER, so what it started stays its
    descendant even after a setsid() and a double fork (a build backend's daemon that left
    the process group): read while the child lives, this is everything it started.
    """
    procs: dict[int, tuple[int, str]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # pragma: no cover - no /proc
        return {}
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rpartition(")")[2].split()
            procs[int(entry)] = (int(fields[1]), fields[19])
        except (OSError, ValueError, IndexError):
            continue
    kids: dict[int, list[int]] = {}
    for p, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(p)
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        for k in kids.get(todo.pop(), ()):
            if k not in found and k != os.getpid():
                found[k] = procs[k][1]
                todo.append(k)
    return found


def find_pids_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (a unique work path)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmd and state != "Z":
            found.append(int(entry))
    return found


def group_io_bytes(pgid: int) -> int:
    """Bytes read and written so far by the live members of process group `pgid` (Linux /proc).

    Network reads count (rchar covers sockets): a download that moves shows it, a
    hung index shows a number that stops growing.
    """
    return group_activity(pgid)[0]


def group_activity(pgid: int) -> tuple[int, bool]:
    """`group_io_bytes`, and whether a member of the group is stopped (state T: SIGSTOP,
    Ctrl-Z, a debugger): a stopped process moves no byte, and is not a hung index."""
    total = 0
    stopped = False
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # pragma: no cover
        return 0, False
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rpartition(")")[2].split()
            if int(fields[2]) != pgid:
                continue
            stopped = stopped or fields[0] in ("T", "t")
            with open(f"/proc/{entry}/io", encoding="ascii") as fh:
                for line in fh:
                    key, _, val = line.partition(":")
                    if key in ("rchar", "wchar"):
                        total += int(val)
        except (OSError, ValueError, IndexError):
            continue
    return total, stopped


def pipe_holders(streams: Sequence[object]) -> list[int]:
    """Pids (other than this process) with one of these pipes open (Linux /proc)."""
    targets = set()
    for stream in streams:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            targets.add(f"pipe:[{os.fstat(stream.fileno()).st_ino}]")  # type: ignore[attr-defined]
    found: list[int] = []
    if not targets:
        return found
    me = os.getpid()
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit() and int(e) != me]
    except OSError:  # pragma: no cover
        return found
    for entry in entries:
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in targets:
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found
